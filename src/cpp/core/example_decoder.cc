#include "example_decoder.h"

#include <cstring>

#include "protobuf_wire.h"

namespace tfr {
namespace {

using wire::Cursor;

static_assert(uint32_t(Kind::kBytes) == wire::kBytesList && uint32_t(Kind::kFloat) == wire::kFloatList &&
                  uint32_t(Kind::kInt64) == wire::kInt64List,
              "Kind values are the Feature.kind field numbers");

// A Feature's list field (kBytesList..kInt64List) as a Kind.
Kind list_kind_of(uint32_t field) { return Kind(field); }

const char* list_name(Kind kind) {
  switch (kind) {
    case Kind::kInt64: return "an int64_list";
    case Kind::kFloat: return "a float_list";
    case Kind::kBytes: return "a bytes_list";
    case Kind::kFeature: break;
  }
  return "?";
}

size_t value_size(Kind kind) { return kind == Kind::kInt64 ? 8 : 4; }

[[noreturn]] void bad_spec(const FieldSpec& s, const std::string& what) {
  throw std::invalid_argument("spec of feature '" + s.name + "': " + what);
}

void check_spec(const FieldSpec& s) {
  if (s.kind != Kind::kBytes && s.kind != Kind::kFloat && s.kind != Kind::kInt64) {
    bad_spec(s, std::string("kind ") + kind_name(s.kind) + " is no list (use bytes, float or int64)");
  }
  if (s.layout != Layout::kFixed && s.layout != Layout::kVar && s.layout != Layout::kRawBytes) {
    bad_spec(s, "unknown layout");
  }
  if (s.layout == Layout::kRawBytes && s.kind != Kind::kBytes) bad_spec(s, "raw bytes read a bytes list");
  if (s.layout == Layout::kRawBytes && s.sequence) bad_spec(s, "a feature list cannot be read as raw bytes");
  if (!s.has_default) return;
  if (s.sequence || s.layout == Layout::kVar) bad_spec(s, "only a fixed-size feature has a default");
  const size_t want = s.layout == Layout::kRawBytes ? s.count
                      : s.kind == Kind::kBytes     ? s.default_value.size()  // one value, any size
                                                   : s.count * value_size(s.kind);
  if (s.default_value.size() != want) {
    bad_spec(s, "a default of " + std::to_string(s.default_value.size()) + " bytes, " +
                    std::to_string(want) + " needed");
  }
}

// Where a requested feature's Feature message was found in the current record. A key that appears
// twice in the map keeps its last value, as protobuf does.
struct Found {
  bool present = false;
  Cursor feature{nullptr, nullptr};
  bool merged = false;  // its map entry held the value twice (protobuf would merge them)
};

// The key seen at one map position in the previous record, and the spec it named (-1: none).
struct Hint {
  const uint8_t* key;
  size_t size;
  int spec;
};

class Decoder {
 public:
  Decoder(const uint8_t* data, const std::vector<FieldSpec>& specs, size_t n, bool sequences)
      : data_(data), specs_(specs), sequences_(sequences), found_(specs.size()),
        columns_(specs.size()) {
    for (size_t k = 0; k < specs.size(); ++k) {
      Column& c = columns_[k];
      const FieldSpec& s = specs[k];
      if (s.layout == Layout::kVar || s.sequence) c.row_splits.assign(1, 0);
      if (s.sequence && s.layout == Layout::kVar) c.step_splits.assign(1, 0);
      if (s.kind == Kind::kBytes && s.layout == Layout::kFixed) {
        c.starts.reserve(n * s.count);
        c.ends.reserve(n * s.count);
      } else if (s.layout != Layout::kVar) {
        c.values.reserve(n * s.count * (s.layout == Layout::kRawBytes ? 1 : value_size(s.kind)));
      }
    }
  }

  void record(size_t index, Cursor example) {
    index_ = index;
    for (Found& f : found_) f.present = false;
    uint32_t field, wire_type;
    while (!example.done()) {
      if (!example.tag(&field, &wire_type)) malformed("a bad field tag");
      // Example.features and SequenceExample.context are both field 1 holding a Features map;
      // SequenceExample.feature_lists (field 2) maps names to FeatureLists.
      const bool lists = sequences_ && field == wire::kSequenceFeatureLists;
      if ((field == wire::kExampleFeatures || lists) && wire_type == wire::kLengthDelimited) {
        Cursor map;
        if (!example.sub(&map)) malformed("a truncated Features message");
        scan_features(map, lists);
      } else if (!example.skip(wire_type)) {
        malformed("a truncated or unsupported field");
      }
    }
    for (size_t k = 0; k < specs_.size(); ++k) fill(k);
  }

  std::vector<Column> take() { return std::move(columns_); }

 private:
  [[noreturn]] void malformed(const std::string& what) const {
    throw ParseError(index_, false, "", std::string("not a valid tf.train.") +
                                     (sequences_ ? "SequenceExample: " : "Example: ") + what);
  }
  [[noreturn]] void wrong(size_t k, const std::string& what) const {
    throw ParseError(index_, true, specs_[k].name, what);
  }

  // Scans a map<string, Feature> (or, for `lists`, map<string, FeatureList>), noting where each
  // requested feature's value is.
  void scan_features(Cursor features, bool lists) {
    uint32_t field, wire_type;
    size_t entry_index = 0;
    while (!features.done()) {
      if (!features.tag(&field, &wire_type)) malformed("a bad field tag in Features");
      if (field != wire::kFeaturesEntry || wire_type != wire::kLengthDelimited) {
        if (!features.skip(wire_type)) malformed("a truncated field in Features");
        continue;
      }
      Cursor entry;
      if (!features.sub(&entry)) malformed("a truncated feature map entry");
      Cursor key{nullptr, nullptr}, value{nullptr, nullptr};
      int values = 0;
      while (!entry.done()) {
        if (!entry.tag(&field, &wire_type)) malformed("a bad tag in a feature map entry");
        Cursor* target = field == wire::kMapKey ? &key : field == wire::kMapValue ? &value : nullptr;
        if (target != nullptr && wire_type == wire::kLengthDelimited) {
          if (!entry.sub(target)) malformed("a truncated feature name or value");
          values += target == &value;
        } else if (!entry.skip(wire_type)) {
          malformed("a truncated field in a feature map entry");
        }
      }
      match(hints_[lists], lists, entry_index++, key, value, values > 1);
    }
  }

  // Finds which requested feature (if any) a map key names. Records of one file usually list
  // their features in the same order, so the answer for the entry at this position in the
  // previous record is checked first: one comparison per key instead of one per spec.
  void match(std::vector<Hint>& hints, bool lists, size_t position, Cursor key, Cursor value,
             bool merged) {
    const size_t size = size_t(key.end - key.p);
    if (position < hints.size()) {
      Hint& h = hints[position];
      if (h.size == size && same(h.key, key.p, size)) {
        if (h.spec >= 0) note(size_t(h.spec), value, merged);
        h.key = key.p;
        return;
      }
    } else {
      hints.resize(position + 1);
    }
    Hint& h = hints[position];
    h = Hint{key.p, size, -1};
    for (size_t k = 0; k < specs_.size(); ++k) {
      const std::string& name = specs_[k].name;
      if (specs_[k].sequence == lists && name.size() == size && same(reinterpret_cast<const uint8_t*>(name.data()), key.p, size)) {
        note(k, value, merged);
        h.spec = int(k);
      }
    }
  }

  // Member by member: copying a freshly built Found as a whole stalls on store forwarding.
  void note(size_t k, Cursor value, bool merged) {
    Found& f = found_[k];
    f.present = true;
    f.feature = value;
    f.merged = merged;
  }

  // Feature names are short: compare them inline instead of calling memcmp.
  static bool same(const uint8_t* a, const uint8_t* b, size_t n) {
    if (n > 16) return std::memcmp(a, b, n) == 0;
    if (n >= 8) {  // two overlapping words cover 8..16 bytes
      uint64_t a0, b0, a1, b1;
      std::memcpy(&a0, a, 8);
      std::memcpy(&b0, b, 8);
      std::memcpy(&a1, a + n - 8, 8);
      std::memcpy(&b1, b + n - 8, 8);
      return a0 == b0 && a1 == b1;
    }
    for (size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }

  // Reads one Feature: which list it holds and hands each of its list messages to `each_list`.
  // Protobuf semantics: setting another member of the oneof clears the list, while repeating the
  // same member merges (appends) it. So the lists that count are the run of the kind set last,
  // starting after the last switch to it.
  template <typename F>
  bool feature_lists(size_t k, Cursor feature, Kind* kind, F each_list) {
    uint32_t field, wire_type, last = 0;
    {  // The usual Feature holds exactly one list: take it in a single pass.
      Cursor c = feature, list;
      if (c.tag(&field, &wire_type) && wire_type == wire::kLengthDelimited &&
          field >= wire::kBytesList && field <= wire::kInt64List && c.sub(&list) && c.done()) {
        *kind = list_kind_of(field);
        each_list(list);
        return true;
      }
    }
    const uint8_t* run_start = nullptr;  // where the current run of `last` lists begins
    for (Cursor c = feature; !c.done();) {
      const uint8_t* at = c.p;
      if (!c.tag(&field, &wire_type)) wrong(k, "a bad field tag in its Feature");
      if (wire_type == wire::kLengthDelimited && field >= wire::kBytesList &&
          field <= wire::kInt64List && field != last) {
        last = field;
        run_start = at;
      }
      if (!c.skip(wire_type)) wrong(k, "a truncated Feature");
    }
    if (last == 0) return false;
    *kind = list_kind_of(last);
    for (Cursor c{run_start, feature.end}; !c.done();) {  // validated by the first pass
      Cursor list;
      c.tag(&field, &wire_type);
      if (wire_type != wire::kLengthDelimited) {
        c.skip(wire_type);
      } else if (c.sub(&list) && field == last) {
        each_list(list);
      }
    }
    return true;
  }

  // Appends the values of list message `list` of kind `kind` to column k. Returns the count.
  size_t append_values(size_t k, Kind kind, Cursor list) {
    Column& col = columns_[k];
    size_t count = 0;
    uint32_t field, wire_type;
    while (!list.done()) {
      if (!list.tag(&field, &wire_type)) wrong(k, "a bad field tag in its value list");
      if (field != wire::kListValue) {
        if (!list.skip(wire_type)) wrong(k, "a truncated value list");
        continue;
      }
      if (kind == Kind::kBytes) {
        Cursor value;
        if (wire_type != wire::kLengthDelimited || !list.sub(&value)) wrong(k, "a bad bytes value");
        col.starts.push_back(value.p - data_);
        col.ends.push_back(value.end - data_);
        ++count;
      } else if (kind == Kind::kFloat) {
        if (wire_type == wire::kFixed32) {  // unpacked
          uint32_t bits;
          if (!list.fixed32(&bits)) wrong(k, "a truncated float");
          col.values.append(reinterpret_cast<const uint8_t*>(&bits), 4);
          ++count;
        } else if (wire_type == wire::kLengthDelimited) {  // packed
          Cursor packed;
          if (!list.sub(&packed) || (packed.end - packed.p) % 4 != 0) wrong(k, "a bad packed float list");
          const size_t bytes = size_t(packed.end - packed.p);
#if TFR_BIG_ENDIAN
          for (const uint8_t* q = packed.p; q < packed.end; q += 4) {  // to host order
            const uint32_t host = load_le32(q);
            col.values.append(reinterpret_cast<const uint8_t*>(&host), 4);
          }
#else
          col.values.append(packed.p, bytes);  // little-endian wire = host order
#endif
          count += bytes / 4;
        } else {
          wrong(k, "a float with the wrong wire type");
        }
      } else {
        uint64_t v;
        if (wire_type == wire::kVarint) {  // unpacked
          if (!list.varint(&v)) wrong(k, "a truncated int64");
          col.values.append(reinterpret_cast<const uint8_t*>(&v), 8);
          ++count;
        } else if (wire_type == wire::kLengthDelimited) {  // packed
          Cursor packed;
          if (!list.sub(&packed)) wrong(k, "a truncated packed int64 list");
          // At most one value per byte: make room once, then store straight into the column.
          uint8_t* out = col.values.grow_for(size_t(packed.end - packed.p) * 8);
          size_t stored = 0;
          while (!packed.done()) {
            if (!packed.varint(&v)) wrong(k, "a truncated int64 in a packed list");
            std::memcpy(out + 8 * stored++, &v, 8);
          }
          col.values.resize(col.values.size() + 8 * stored);
          count += stored;
        } else {
          wrong(k, "an int64 with the wrong wire type");
        }
      }
    }
    return count;
  }

  // Decodes one Feature of column k: returns its number of values, checking the list kind.
  size_t feature_values(size_t k, Cursor feature, bool* has_list) {
    const FieldSpec& spec = specs_[k];
    Kind kind = spec.kind;
    size_t count = 0;
    *has_list = feature_lists(k, feature, &kind, [&](Cursor list) {
      if (kind == spec.kind) count += append_values(k, kind, list);
    });
    if (*has_list && kind != spec.kind) {
      wrong(k, std::string("holds ") + list_name(kind) + ", the spec asks for " +
                   list_name(spec.kind));
    }
    return count;
  }

  size_t values_in(const Column& col, Kind kind) const {
    return kind == Kind::kBytes ? col.starts.size() : col.values.size() / value_size(kind);
  }

  // A feature list: each step (a Feature) follows the spec's layout. Missing list: no steps.
  void fill_sequence(size_t k) {
    const FieldSpec& spec = specs_[k];
    Column& col = columns_[k];
    int64_t steps = 0;
    if (found_[k].present) {
      Cursor list = found_[k].feature;
      uint32_t field, wire_type;
      while (!list.done()) {
        if (!list.tag(&field, &wire_type)) wrong(k, "a bad field tag in its FeatureList");
        Cursor feature;
        if (field != wire::kFeatureListFeature || wire_type != wire::kLengthDelimited) {
          if (!list.skip(wire_type)) wrong(k, "a truncated FeatureList");
          continue;
        }
        if (!list.sub(&feature)) wrong(k, "a truncated Feature in its FeatureList");
        bool has_list;
        const size_t count = feature_values(k, feature, &has_list);
        if (spec.layout == Layout::kFixed && count != spec.count) {
          wrong(k, "step " + std::to_string(steps) + " has " + std::to_string(count) +
                       " values, the spec asks for " + std::to_string(spec.count));
        }
        if (spec.layout == Layout::kVar) col.step_splits.push_back(int64_t(values_in(col, spec.kind)));
        ++steps;
      }
    }
    col.row_splits.push_back(col.row_splits.back() + steps);
  }

  void fill(size_t k) {
    if (found_[k].present && found_[k].merged) {
      // Rare enough (no serializer writes it) to refuse clearly rather than merge.
      wrong(k, "its map entry holds the value twice; merging them is not supported");
    }
    if (specs_[k].sequence) return fill_sequence(k);
    const FieldSpec& spec = specs_[k];
    Column& col = columns_[k];
    const Found& f = found_[k];
    bool has_list = false;
    const size_t bytes_before = col.starts.size();
    const size_t count = f.present ? feature_values(k, f.feature, &has_list) : 0;
    switch (spec.layout) {
      case Layout::kVar:
        if (!f.present && spec.required) wrong(k, "is missing (the spec requires it)");
        col.row_splits.push_back(int64_t(values_in(col, spec.kind)));
        col.present.push_back(uint8_t(f.present));
        return;
      case Layout::kFixed:
        if (!f.present) {
          if (!spec.has_default) wrong(k, "is missing and has no default");
          if (spec.kind == Kind::kBytes) {  // -1 marks "the default" for the caller
            col.starts.insert(col.starts.end(), spec.count, -1);
            col.ends.insert(col.ends.end(), spec.count, -1);
          } else {
            col.values.append(spec.default_value.data(), spec.default_value.size());
          }
          return;
        }
        if (count != spec.count) {
          wrong(k, "has " + std::to_string(count) + " values, the spec asks for " +
                       std::to_string(spec.count));
        }
        return;
      case Layout::kRawBytes: {
        if (!f.present) {
          if (!spec.has_default) wrong(k, "is missing and has no default");
          col.values.append(spec.default_value.data(), spec.default_value.size());
          return;
        }
        if (count != 1) wrong(k, "has " + std::to_string(count) + " bytes values, the spec asks for 1");
        const size_t size = size_t(col.ends.back() - col.starts.back());
        if (size != spec.count) {
          wrong(k, "holds " + std::to_string(size) + " bytes, the spec's shape and dtype need " +
                       std::to_string(spec.count));
        }
        col.values.append(data_ + col.starts.back(), size);
        col.starts.resize(bytes_before);
        col.ends.resize(bytes_before);
        return;
      }
    }
  }

  const uint8_t* data_;
  const std::vector<FieldSpec>& specs_;
  bool sequences_;
  std::vector<Found> found_;
  std::vector<Hint> hints_[2];  // for the features (or context) map and the feature_lists map
  std::vector<Column> columns_;
  size_t index_ = 0;
};

}  // namespace

namespace {

class KindScanner {
 public:
  explicit KindScanner(bool sequence_examples) : sequences_(sequence_examples) {}

  void record(size_t index, Cursor message) {
    index_ = index;
    uint32_t field, wire_type;
    while (!message.done()) {
      if (!message.tag(&field, &wire_type)) malformed("a bad field tag");
      Cursor features;
      // Example.features and SequenceExample.context are both field 1.
      if (field == wire::kExampleFeatures && wire_type == wire::kLengthDelimited) {
        if (!message.sub(&features)) malformed("a truncated Features message");
        scan(features);
      } else if (!message.skip(wire_type)) {
        malformed("a truncated or unsupported field");
      }
    }
  }

  std::vector<FeatureKind> take() { return std::move(found_); }

 private:
  [[noreturn]] void malformed(const std::string& what) const {
    throw ParseError(index_, false, "", std::string("not a valid tf.train.") +
                                     (sequences_ ? "SequenceExample: " : "Example: ") + what);
  }

  void scan(Cursor features) {
    uint32_t field, wire_type;
    while (!features.done()) {
      if (!features.tag(&field, &wire_type)) malformed("a bad field tag in Features");
      Cursor entry;
      if (field != wire::kFeaturesEntry || wire_type != wire::kLengthDelimited) {
        if (!features.skip(wire_type)) malformed("a truncated field in Features");
        continue;
      }
      if (!features.sub(&entry)) malformed("a truncated feature entry");
      std::string name;
      std::optional<Kind> kind;
      while (!entry.done()) {
        Cursor value;
        if (!entry.tag(&field, &wire_type)) malformed("a bad field tag in a feature entry");
        if (wire_type != wire::kLengthDelimited) {
          if (!entry.skip(wire_type)) malformed("a truncated field in a feature entry");
          continue;
        }
        if (!entry.sub(&value)) malformed("a truncated feature entry");
        if (field == wire::kMapKey) {
          name.assign(reinterpret_cast<const char*>(value.p), size_t(value.end - value.p));
        } else if (field == wire::kMapValue) {
          kind = list_kind(value);
        }
      }
      note(name, kind);
    }
  }

  // The kind of a Feature message: its last list field wins, as protobuf's oneof does.
  std::optional<Kind> list_kind(Cursor feature) {
    std::optional<Kind> kind;
    uint32_t field, wire_type;
    while (!feature.done()) {
      if (!feature.tag(&field, &wire_type)) malformed("a bad field tag in a Feature");
      if (wire_type == wire::kLengthDelimited && field >= wire::kBytesList &&
          field <= wire::kInt64List) {
        kind = list_kind_of(field);
      }
      if (!feature.skip(wire_type)) malformed("a truncated field in a Feature");
    }
    return kind;
  }

  void note(const std::string& name, std::optional<Kind> kind) {
    for (FeatureKind& f : found_) {
      if (f.name == name) {
        if (!f.kind) f.kind = kind;
        return;
      }
    }
    found_.push_back(FeatureKind{name, kind, index_});
  }

  bool sequences_;
  size_t index_ = 0;
  std::vector<FeatureKind> found_;
};

}  // namespace

std::vector<FeatureKind> feature_kinds(const uint8_t* data, const int64_t* offsets, size_t n,
                                       bool sequence_examples, bool strict) {
  KindScanner scanner(sequence_examples);
  for (size_t i = 0; i < n; ++i) {
    KindScanner before = scanner;  // a damaged record adds nothing, not even in part
    try {
      scanner.record(i, Cursor{data + offsets[i], data + offsets[i + 1]});
    } catch (const ParseError&) {
      if (strict) throw;
      return before.take();
    }
  }
  return scanner.take();
}

std::vector<Column> decode_examples(const uint8_t* data, const int64_t* offsets, size_t n,
                                    const std::vector<FieldSpec>& specs, bool sequence_examples) {
  for (const FieldSpec& s : specs) check_spec(s);
  Decoder decoder(data, specs, n, sequence_examples);
  for (size_t i = 0; i < n; ++i) {
    decoder.record(i, Cursor{data + offsets[i], data + offsets[i + 1]});
  }
  return decoder.take();
}

}  // namespace tfr
