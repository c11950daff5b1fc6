#include "example_decoder.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <new>

#include "portable.h"
#include "protobuf_wire.h"
#include "task_pool.h"

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

// How the entry at a map position was laid out in the previous record, for known_entry to check
// the next record's against. Short: every length one byte. The usual Feature: one list of the
// spec's kind holding one value field (packed numbers, or one bytes value).
enum class Form : uint8_t {
  kNone,          // none of these: the entry is read field by field
  kShortEntry,    // a short entry
  kShortFeature,  // a short entry holding the usual Feature
  kLongFeature,   // the usual Feature with every length two bytes (a payload of 128 B to ~16 KB)
};

// The key seen at one map position in the previous record, the spec it named (-1: none), and
// the form of its entry (learned again, a few times a part, when the same key comes in another
// form: a first record with an empty list must not slow the rest). For a form, the entry's bytes
// from its key tag on, [key tag][key size] [key][value tag] (kShortFeature: and [value length]
// [list tag][list length][packed tag] [payload length]), as two words and the mask of the bytes
// that must match (lengths masked out: they are checked apart).
struct Hint {
  const uint8_t* key;
  size_t size;
  int spec;
  Form form;
  uint8_t list_tag;  // the Feature forms: the list tag of the spec's kind
  uint8_t relearns;  // how many more times a miss on the same key may learn the form again
  uint64_t signature[2];
  uint64_t mask[2];
};

// The one-byte tags the usual encodings write.
constexpr uint8_t kFeaturesTag = wire::tag_byte(wire::kExampleFeatures, wire::kLengthDelimited);
constexpr uint8_t kEntryTag = wire::tag_byte(wire::kFeaturesEntry, wire::kLengthDelimited);
constexpr uint8_t kKeyTag = wire::tag_byte(wire::kMapKey, wire::kLengthDelimited);
constexpr uint8_t kValueTag = wire::tag_byte(wire::kMapValue, wire::kLengthDelimited);

// Where the decoder puts the values of one feature of one record (a "sink"): append_values
// hands each value over as it reads it.

// Numbers for a record's slot in a fixed-size column: keeps the first `room` values and counts
// them all (a count other than `room` is an error the caller reports).
struct NumberSlot {
  static constexpr bool kBytes = false;
  uint8_t* out;
  size_t room;
  size_t count = 0;

  template <typename T>
  void put(T value) {
    if (count < room) std::memcpy(out + count * sizeof(T), &value, sizeof(T));
    ++count;
  }
  void put_floats(const uint8_t* values, size_t n) {  // n floats back to back, host order
    const size_t keep = count < room ? std::min(n, room - count) : 0;
    if (keep != 0) std::memcpy(out + count * 4, values, keep * 4);
    count += n;
  }
  void expect(size_t, size_t) {}
};

// Numbers appended to a column's values.
struct NumberAppender {
  static constexpr bool kBytes = false;
  ByteBuffer& values;
  size_t count = 0;

  template <typename T>
  void put(T value) {
    values.append(reinterpret_cast<const uint8_t*>(&value), sizeof(T));
    ++count;
  }
  void put_floats(const uint8_t* floats, size_t n) {
    values.append(floats, n * 4);
    count += n;
  }
  void expect(size_t n, size_t size) { values.grow_for(n * size); }  // room for n more values
};

// Bytes values appended to a column as [start, end) offsets into the records.
struct BytesAppender {
  static constexpr bool kBytes = true;
  Column& column;
  size_t count = 0;

  void put(int64_t start, int64_t end) {
    column.starts.push_back(start);
    column.ends.push_back(end);
    ++count;
  }
};

// Bytes values for a record's slots of starts and ends in a fixed-size column: keeps the first
// `room` and counts them all.
struct BytesSlot {
  static constexpr bool kBytes = true;
  int64_t* starts;
  int64_t* ends;
  size_t room;
  size_t count = 0;

  void put(int64_t start, int64_t end) {
    if (count < room) {
      starts[count] = start;
      ends[count] = end;
    }
    ++count;
  }
};

// The last bytes value of a feature, and how many it holds (raw bytes read exactly one).
struct LastBytesValue {
  static constexpr bool kBytes = true;
  int64_t start = 0;
  int64_t end = 0;
  size_t count = 0;

  void put(int64_t value_start, int64_t value_end) {
    start = value_start;
    end = value_end;
    ++count;
  }
};

// How a requested feature lands in its column, worked out once per batch.
enum class Handler : uint8_t { kVar, kFixedNumbers, kFixedBytes, kRawBytes, kSequence };

Handler handler_of(const FieldSpec& s) {
  if (s.sequence) return Handler::kSequence;
  switch (s.layout) {
    case Layout::kVar: return Handler::kVar;
    case Layout::kRawBytes: return Handler::kRawBytes;
    case Layout::kFixed: break;
  }
  return s.kind == Kind::kBytes ? Handler::kFixedBytes : Handler::kFixedNumbers;
}

// Whether a feature's records are written to their own slots in one buffer for the batch (fixed
// size: numbers and raw bytes in its values, bytes values in its starts and ends) rather than
// appended.
bool in_slots(const FieldSpec& s) { return !s.sequence && s.layout != Layout::kVar; }

// The bytes of a record's slot (for fixed bytes values: in its starts, and as many in its ends).
size_t bytes_per_record(const FieldSpec& s) {
  const size_t size = s.layout == Layout::kRawBytes ? 1
                      : s.kind == Kind::kBytes     ? sizeof(int64_t)
                                                   : value_size(s.kind);
  if (s.count > SIZE_MAX / size) throw std::bad_alloc();
  return s.count * size;
}

// What the decoder needs of a requested feature on every record, in one place.
struct Field {
  Handler handler;
  Kind kind;
  uint8_t list_tag;   // the one-byte tag of its list in a Feature
  size_t count;       // FieldSpec::count
  size_t slot_bytes;  // fixed size: the bytes of a record's slot...
  uint8_t* slots;     // ...in the batch's values (fixed bytes values: in its starts...
  int64_t* ends;      // ...and as many in its ends)
  Column* column;     // the others: the column appended to
  size_t seen;        // the one pass: the stamp() of the last record that held it
};

// Decodes records into the batch's columns. Fixed-size features go straight to record i's slot
// of the batch's column (its values, or its starts and ends for bytes); every other column is
// appended to (`columns`: the batch's own for the first records, or a part's, joined afterwards).
// Records are given by their index in the batch, so errors name it; `first` is the first record
// this decoder gets.
//
// Each record is decoded in one pass, each feature as its key is met (the usual record). Anything
// else (a key twice, a value twice in an entry, any error) sends the record to the careful pass,
// which notes where every feature is and then fills the columns in spec order, protobuf's way:
// so the error reported is the one that order meets first, whatever order the features came in.
class Decoder {
 public:
  Decoder(const uint8_t* data, const uint8_t* data_end, const std::vector<FieldSpec>& specs,
          bool sequences, size_t first, const std::vector<Column*>& columns)
      : data_(data), data_end_(data_end), specs_(specs), sequences_(sequences), first_(first),
        found_(specs.size()) {
    fields_.reserve(specs.size());
    for (size_t k = 0; k < specs.size(); ++k) {
      const FieldSpec& s = specs[k];
      const Handler handler = handler_of(s);
      Column& c = *columns[k];
      const bool pairs = handler == Handler::kFixedBytes;
      uint8_t* slots = pairs ? reinterpret_cast<uint8_t*>(c.starts.data()) : c.values.data();
      fields_.push_back(Field{handler, s.kind, wire::tag_byte(uint32_t(s.kind), wire::kLengthDelimited),
                              s.count, in_slots(s) ? bytes_per_record(s) : 0, slots,
                              pairs ? c.ends.data() : nullptr, &c, 0});
    }
  }

  void record(size_t index, Cursor example) {
    index_ = index;
    decoded_ = 0;
    try {
      if (scan_record(example, true)) {
        if (decoded_ == fields_.size()) return;  // each feature once: none missing
        for (size_t k = 0; k < specs_.size(); ++k) {
          if (fields_[k].seen != stamp()) fill_missing(k);
        }
        return;
      }
    } catch (const ParseError&) {  // reported below, in the careful pass's order
    }
    for (size_t k = 0; k < specs_.size(); ++k) undo_record(k);
    for (Found& f : found_) f.present = false;
    scan_record(example, false);
    for (size_t k = 0; k < specs_.size(); ++k) fill(k);
  }

 private:
  [[noreturn]] TFR_COLD void malformed(const char* what) const {
    throw ParseError(index_, false, "", std::string("not a valid tf.train.") +
                                     (sequences_ ? "SequenceExample: " : "Example: ") + what);
  }
  [[noreturn]] TFR_COLD void wrong(size_t k, const std::string& what) const {
    throw ParseError(index_, true, specs_[k].name, what);
  }
  [[noreturn]] TFR_COLD void wrong(size_t k, const char* what) const { wrong(k, std::string(what)); }
  [[noreturn]] TFR_COLD void wrong_kind(size_t k, Kind kind) const {
    wrong(k, std::string("holds ") + list_name(kind) + ", the spec asks for " +
                 list_name(specs_[k].kind));
  }
  [[noreturn]] TFR_COLD void wrong_count(size_t k, size_t count) const {
    wrong(k, "has " + std::to_string(count) + " values, the spec asks for " +
                 std::to_string(specs_[k].count));
  }
  [[noreturn]] TFR_COLD void wrong_step_count(size_t k, int64_t step, size_t count) const {
    wrong(k, "step " + std::to_string(step) + " has " + std::to_string(count) +
                 " values, the spec asks for " + std::to_string(specs_[k].count));
  }
  [[noreturn]] TFR_COLD void wrong_raw_values(size_t k, size_t count) const {
    wrong(k, "has " + std::to_string(count) + " bytes values, the spec asks for 1");
  }
  [[noreturn]] TFR_COLD void wrong_raw_size(size_t k, size_t size) const {
    wrong(k, "holds " + std::to_string(size) + " bytes, the spec's shape and dtype need " +
                 std::to_string(specs_[k].count));
  }

  // Marks the features the one pass has decoded in the current record.
  size_t stamp() const { return index_ + 1; }

  // Walks a record's fields. One pass (`decode`): decodes each requested feature as it comes and
  // returns false at anything unusual; careful pass: notes where each one is.
  bool scan_record(Cursor example, bool decode) {
    uint32_t field, wire_type;
    while (!example.done()) {
      Cursor map;
      if (example.next_is(kFeaturesTag)) {  // the usual field first
        if (!example.sub(&map)) malformed("a truncated Features message");
        if (!scan_features(map, false, decode)) return false;
        continue;
      }
      if (!example.tag(&field, &wire_type)) malformed("a bad field tag");
      // Example.features and SequenceExample.context are both field 1 holding a Features map;
      // SequenceExample.feature_lists (field 2) maps names to FeatureLists.
      const bool lists = sequences_ && field == wire::kSequenceFeatureLists;
      if ((field == wire::kExampleFeatures || lists) && wire_type == wire::kLengthDelimited) {
        if (!example.sub(&map)) malformed("a truncated Features message");
        if (!scan_features(map, lists, decode)) return false;
      } else if (!example.skip(wire_type)) {
        malformed("a truncated or unsupported field");
      }
    }
    return true;
  }

  // Scans a map<string, Feature> (or, for `lists`, map<string, FeatureList>) for the requested
  // features.
  bool scan_features(Cursor features, bool lists, bool decode) {
    uint32_t field, wire_type;
    size_t entry_index = 0;
    while (!features.done()) {
      Cursor key{nullptr, nullptr}, value{nullptr, nullptr}, payload{nullptr, nullptr};
      bool merged = false;
      int k;
      const Cursor at = features;  // where the entry starts
      if (entry_index < known_[lists] &&
          known_entry(hints_[lists][entry_index], &features, &key, &value, &payload)) {
        k = hints_[lists][entry_index++].spec;
      } else if (short_entry(&features, &key, &value)) {
        k = match(lists, entry_index++, key, at, value);
      } else {
        Cursor entry;
        if (!features.next_is(kEntryTag)) {
          if (!features.tag(&field, &wire_type)) malformed("a bad field tag in Features");
          if (field != wire::kFeaturesEntry || wire_type != wire::kLengthDelimited) {
            if (!features.skip(wire_type)) malformed("a truncated field in Features");
            continue;
          }
        }
        if (!features.sub(&entry)) malformed("a truncated feature map entry");
        if (!usual_entry(entry, &key, &value)) merged = read_entry(entry, &key, &value);
        k = match(lists, entry_index++, key, at, merged ? Cursor{nullptr, nullptr} : value);
      }
      if (k == kNone) continue;
      if (!decode || k == kSeveral) {
        if (decode) return false;
        note_all(lists, key, value, merged);
      } else if (merged || fields_[size_t(k)].seen == stamp()) {
        return false;
      } else {
        Field& f = fields_[size_t(k)];
        f.seen = stamp();
        ++decoded_;
        const bool filled = payload.p != nullptr ? fill_payload(size_t(k), f, payload)
                                                  : usual_fill(size_t(k), f, value);
        if (!filled) fill_unusual(size_t(k), value);
      }
    }
    return true;
  }

  // The usual map entry when it is shorter than 128 bytes, so that every length in it is one
  // byte: [entry tag][n] [key tag][k][key] [value tag][n - k - 4][value]. Its key and value in a
  // few comparisons; false (nothing consumed) for anything else.
  static TFR_INLINE bool short_entry(Cursor* features, Cursor* key, Cursor* value) {
    const uint8_t* q = features->p;
    const size_t left = size_t(features->end - q);
    if (left < 6 || q[0] != kEntryTag || q[1] >= 0x80 || q[2] != kKeyTag || q[3] >= 0x80) return false;
    const size_t n = q[1], key_size = q[3];
    if (n + 2 > left || key_size + 4 > n) return false;
    const uint8_t* v = q + 4 + key_size;  // the value's tag and length: inside the entry
    if (v[0] != kValueTag || v[1] != n - key_size - 4) return false;
    *key = Cursor{q + 4, v};
    *value = Cursor{v + 2, q + 2 + n};
    features->p = q + 2 + n;
    return true;
  }

  // An entry laid out as the hint's form (same key, same form, lengths that agree): its key,
  // value and (for the usual Feature) payload, in a few word comparisons; false (nothing
  // consumed) for anything else. The words may reach past the entry, never past the batch's
  // records.
  TFR_INLINE bool known_entry(const Hint& h, Cursor* features, Cursor* key, Cursor* value,
                              Cursor* payload) const {
    const uint8_t* q = features->p;
    if (h.form == Form::kNone || data_end_ - q < 19) return false;
    if (h.form == Form::kLongFeature) return known_long_entry(h, features, key, value, payload);
    const size_t left = size_t(features->end - q), n = q[1], key_size = h.size;
    if (q[0] != kEntryTag || n >= 0x80 || n + 2 > left || key_size + 4 > n) return false;
    if (!signed_bytes(h, q + 2)) return false;
    const uint8_t* v = q + 4 + key_size;
    const size_t value_size = n - key_size - 4;
    if (h.form == Form::kShortFeature) {
      // Each length two less than the one before; one that would be negative matches no byte.
      if (((v[1] ^ value_size) | (v[3] ^ (value_size - 2)) | (v[5] ^ (value_size - 4))) != 0) {
        return false;
      }
      *payload = Cursor{v + 6, q + 2 + n};
    } else if (v[1] != value_size) {
      return false;
    }
    *key = Cursor{q + 4, v};
    *value = Cursor{v + 2, q + 2 + n};
    features->p = q + 2 + n;
    return true;
  }

  // known_entry for kLongFeature: [entry tag][n: 2] [key tag][k][key] [value tag][n - k - 5: 2]
  // [list tag][n - k - 8: 2] [packed tag][n - k - 11: 2] payload.
  TFR_INLINE bool known_long_entry(const Hint& h, Cursor* features, Cursor* key, Cursor* value,
                                   Cursor* payload) const {
    const uint8_t* q = features->p;
    size_t n, value_size, list_size, payload_size;
    if (q[0] != kEntryTag || !two_byte_length(q + 1, &n) || n + 3 > size_t(features->end - q) ||
        n < h.size + 14 || !signed_bytes(h, q + 3)) {
      return false;
    }
    const uint8_t* v = q + 5 + h.size;  // the value's tag; its header ends inside the entry
    if (!two_byte_length(v + 1, &value_size) || value_size != n - h.size - 5 || v[3] != h.list_tag ||
        !two_byte_length(v + 4, &list_size) || list_size != value_size - 3 || v[6] != kPackedTag ||
        !two_byte_length(v + 7, &payload_size) || payload_size != list_size - 3) {
      return false;
    }
    *key = Cursor{q + 5, v};
    *value = Cursor{v + 3, q + 3 + n};
    *payload = Cursor{v + 9, q + 3 + n};
    features->p = q + 3 + n;
    return true;
  }

  // A length written in exactly two bytes.
  static TFR_INLINE bool two_byte_length(const uint8_t* p, size_t* out) {
    if (p[0] < 0x80 || p[1] >= 0x80) return false;
    *out = size_t(p[0] & 0x7f) | size_t(p[1]) << 7;
    return true;
  }

  // Whether the 16 bytes at p hold the hint's signature.
  static TFR_INLINE bool signed_bytes(const Hint& h, const uint8_t* p) {
    uint64_t w0, w1;
    std::memcpy(&w0, p, 8);
    std::memcpy(&w1, p + 8, 8);
    return (((w0 ^ h.signature[0]) & h.mask[0]) | ((w1 ^ h.signature[1]) & h.mask[1])) == 0;
  }

  // The usual map entry: its key, then its value, once each.
  static bool usual_entry(Cursor entry, Cursor* key, Cursor* value) {
    return entry.next_is(kKeyTag) && entry.sub(key) && entry.next_is(kValueTag) &&
           entry.sub(value) && entry.done();
  }

  // Any other map entry: the last key and value win. Returns whether the value came twice.
  bool read_entry(Cursor entry, Cursor* key, Cursor* value) {
    uint32_t field, wire_type;
    int values = 0;
    while (!entry.done()) {
      if (!entry.tag(&field, &wire_type)) malformed("a bad tag in a feature map entry");
      Cursor* target = field == wire::kMapKey ? key : field == wire::kMapValue ? value : nullptr;
      if (target != nullptr && wire_type == wire::kLengthDelimited) {
        if (!entry.sub(target)) malformed("a truncated feature name or value");
        values += target == value;
      } else if (!entry.skip(wire_type)) {
        malformed("a truncated field in a feature map entry");
      }
    }
    return values > 1;
  }

  static constexpr int kNone = -1;     // no requested feature has this name
  static constexpr int kSeveral = -2;  // several have (possible only through the C++ API)
  static constexpr uint8_t kRelearns = 4;  // bounds the cost of a form that keeps changing

  // Which requested feature (if any) a map key names. Records of one file usually list their
  // features in the same order, so the answer for the entry at this position in the previous
  // record is checked first: one comparison per key instead of one per spec.
  // `at`: the map from the entry on; `value`: its value (none: a value given twice; a null key:
  // the entry had none).
  TFR_INLINE int match(bool lists, size_t position, Cursor key, Cursor at, Cursor value) {
    const size_t size = size_t(key.end - key.p);
    if (position < known_[lists]) {
      Hint& h = hints_[lists][position];
      if (h.size == size && h.relearns == 0 && same(h.key, key.p, size)) {
        h.key = key.p;
        return h.spec;
      }
    }
    return new_match(lists, position, key, at, value);
  }

  // match's other answers: a key its position did not hold in the previous record, or the same
  // key, in another form than its hint's (known_entry missed it), while the hint may learn again.
  TFR_COLD int new_match(bool lists, size_t position, Cursor key, Cursor at, Cursor value) {
    std::vector<Hint>& hints = hints_[lists];
    const size_t size = size_t(key.end - key.p);
    if (position < known_[lists]) {
      Hint& h = hints[position];
      if (h.size == size && same(h.key, key.p, size)) {
        h.key = key.p;
        return relearn(h, at, value);
      }
    }
    if (position >= hints.size()) {
      hints.resize(position + 1);
      known_[lists] = hints.size();
    }
    Hint& h = hints[position];
    h = Hint{key.p, size, kNone, Form::kNone, 0, kRelearns, {0, 0}, {0, 0}};
    for (size_t k = 0; k < specs_.size(); ++k) {
      if (names(k, lists, key)) h.spec = h.spec == kNone ? int(k) : kSeveral;
    }
    if (h.spec != kSeveral && key.p != nullptr && value.p != nullptr) learn_form(h, at, value);
    return h.spec;
  }

  // The form of this entry, if it has one (an entry without one leaves the hint as it was). An
  // empty Feature where a form was learned (a VOC-like record without objects) says nothing
  // new: the hint keeps its form.
  int relearn(Hint& h, Cursor at, Cursor value) const {
    --h.relearns;
    if (h.spec == kSeveral || h.key == nullptr || value.p == nullptr) return h.spec;
    if (h.form != Form::kNone && empty_feature(h, value)) return h.spec;
    Hint trial = h;
    learn_form(trial, at, value);
    if (trial.form != Form::kNone) h = trial;
    return h.spec;
  }

  // A requested feature's Feature with no list, or an empty one.
  static bool empty_feature(const Hint& h, Cursor value) {
    return h.spec >= 0 && value.p != nullptr && value.end - value.p <= 2;
  }

  // The hint's form: the most specific one whose check takes the entry at `at` as it was read
  // (same value), signed from its bytes; kNone if none does. An empty Feature says nothing of
  // the next records' payloads: it gets the short entry form with its value signed too, which
  // the next entry holding values misses (and teaches its own form).
  void learn_form(Hint& h, Cursor at, Cursor value) const {
    const bool empty = empty_feature(h, value);
    const size_t empty_size = empty ? size_t(value.end - value.p) : 0;
    const Form forms[] = {Form::kShortFeature, Form::kShortEntry, Form::kLongFeature};
    for (Form form : forms) {
      const bool feature = form != Form::kShortEntry;
      const size_t signed_size =
          h.size + 3 + (form == Form::kShortFeature ? 5 : 0) + (empty ? 1 + empty_size : 0);
      if ((feature && (h.spec < 0 || empty)) || signed_size > 16) continue;
      h.form = form;
      h.list_tag = feature ? fields_[size_t(h.spec)].list_tag : 0;
      uint8_t bytes[16] = {}, mask[16] = {};
      bytes[0] = kKeyTag;
      bytes[1] = uint8_t(h.size);
      std::memcpy(bytes + 2, h.key, h.size);
      bytes[2 + h.size] = kValueTag;
      std::memset(mask, 0xff, h.size + 3);
      if (form == Form::kShortFeature) {  // after the value's length
        bytes[4 + h.size] = h.list_tag;
        bytes[6 + h.size] = kPackedTag;
        mask[4 + h.size] = mask[6 + h.size] = 0xff;
      }
      if (empty) {  // the value's length and bytes
        bytes[3 + h.size] = uint8_t(empty_size);
        if (empty_size != 0) std::memcpy(bytes + 4 + h.size, value.p, empty_size);
        std::memset(mask + 3 + h.size, 0xff, 1 + empty_size);
      }
      std::memcpy(h.signature, bytes, 16);
      std::memcpy(h.mask, mask, 16);
      Cursor rest = at, entry_key, entry_value, payload;
      if (known_entry(h, &rest, &entry_key, &entry_value, &payload) && entry_value.p == value.p &&
          entry_value.end == value.end) {
        return;
      }
    }
    h.form = Form::kNone;
  }

  bool names(size_t k, bool lists, Cursor key) const {
    const std::string& name = specs_[k].name;
    const size_t size = size_t(key.end - key.p);
    return specs_[k].sequence == lists && name.size() == size &&
           same(reinterpret_cast<const uint8_t*>(name.data()), key.p, size);
  }

  // The careful pass: where every requested feature of that name is.
  void note_all(bool lists, Cursor key, Cursor value, bool merged) {
    for (size_t k = 0; k < specs_.size(); ++k) {
      if (!names(k, lists, key)) continue;
      Found& f = found_[k];  // member by member: copying a whole Found stalls on store forwarding
      f.present = true;
      f.feature = value;
      f.merged = merged;
    }
  }

  // Feature names are short: compare them inline instead of calling memcmp.
  static bool same(const uint8_t* a, const uint8_t* b, size_t n) {
    if (n > 16) return std::memcmp(a, b, n) == 0;
    if (n >= 8) return same_words<uint64_t>(a, b, n);  // two overlapping words cover 8..16 bytes
    if (n >= 4) return same_words<uint32_t>(a, b, n);
    for (size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  template <typename Word>
  static bool same_words(const uint8_t* a, const uint8_t* b, size_t n) {
    Word a0, b0, a1, b1;
    std::memcpy(&a0, a, sizeof(Word));
    std::memcpy(&b0, b, sizeof(Word));
    std::memcpy(&a1, a + n - sizeof(Word), sizeof(Word));
    std::memcpy(&b1, b + n - sizeof(Word), sizeof(Word));
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
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

  // Hands the values of list message `list` (of the spec's kind) to `sink`.
  template <typename Sink>
  void append_values(size_t k, Cursor list, Sink& sink) {
    uint32_t field, wire_type;
    while (!list.done()) {
      if (!list.tag(&field, &wire_type)) wrong(k, "a bad field tag in its value list");
      if (field != wire::kListValue) {
        if (!list.skip(wire_type)) wrong(k, "a truncated value list");
        continue;
      }
      if constexpr (Sink::kBytes) {
        Cursor value;
        if (wire_type != wire::kLengthDelimited || !list.sub(&value)) wrong(k, "a bad bytes value");
        sink.put(value.p - data_, value.end - data_);
      } else if (specs_[k].kind == Kind::kFloat) {
        append_floats(k, wire_type, list, sink);
      } else {
        append_int64s(k, wire_type, list, sink);
      }
    }
  }

  template <typename Sink>
  void append_floats(size_t k, uint32_t wire_type, Cursor& list, Sink& sink) {
    if (wire_type == wire::kFixed32) {  // unpacked
      uint32_t bits;
      if (!list.fixed32(&bits)) wrong(k, "a truncated float");
      sink.put(bits);
    } else if (wire_type == wire::kLengthDelimited) {  // packed
      Cursor packed;
      if (!list.sub(&packed)) wrong(k, "a bad packed float list");
      packed_floats(k, packed, sink);
    } else {
      wrong(k, "a float with the wrong wire type");
    }
  }

  template <typename Sink>
  void packed_floats(size_t k, Cursor packed, Sink& sink) {
    if ((packed.end - packed.p) % 4 != 0) wrong(k, "a bad packed float list");
#if TFR_BIG_ENDIAN
    for (const uint8_t* q = packed.p; q < packed.end; q += 4) sink.put(load_le32(q));
#else
    sink.put_floats(packed.p, size_t(packed.end - packed.p) / 4);  // little-endian wire = host
#endif
  }

  template <typename Sink>
  void append_int64s(size_t k, uint32_t wire_type, Cursor& list, Sink& sink) {
    uint64_t v;
    if (wire_type == wire::kVarint) {  // unpacked
      if (!list.varint(&v)) wrong(k, "a truncated int64");
      sink.put(v);
    } else if (wire_type == wire::kLengthDelimited) {  // packed
      Cursor packed;
      if (!list.sub(&packed)) wrong(k, "a truncated packed int64 list");
      packed_int64s(k, packed, sink);
    } else {
      wrong(k, "an int64 with the wrong wire type");
    }
  }

  template <typename Sink>
  void packed_int64s(size_t k, Cursor packed, Sink& sink) {
    sink.expect(size_t(packed.end - packed.p), 8);  // at most one value per byte
    uint64_t v;
    while (!packed.done()) {
      if (!packed.varint(&v)) wrong(k, "a truncated int64 in a packed list");
      sink.put(v);
    }
  }

  // Hands the values of one Feature of column k to `sink`, checking the list kind.
  template <typename Sink>
  void feature_values(size_t k, Cursor feature, Sink& sink) {
    const Kind want = specs_[k].kind;
    {  // the usual Feature: one list of the kind asked for, holding one value field
      Cursor c = feature, list, payload;
      if (c.next_is(wire::tag_byte(uint32_t(want), wire::kLengthDelimited)) && c.sub(&list) &&
          c.done()) {
        Cursor values = list;
        if (!(values.next_is(kPackedTag) && values.sub(&payload) && values.done())) {
          return append_values(k, list, sink);
        }
        if constexpr (Sink::kBytes) {
          return sink.put(payload.p - data_, payload.end - data_);
        } else {
          if (want == Kind::kFloat) return packed_floats(k, payload, sink);
          return packed_int64s(k, payload, sink);
        }
      }
    }
    Kind kind = want;
    const bool has_list = feature_lists(k, feature, &kind, [&](Cursor list) {
      if (kind == want) append_values(k, list, sink);
    });
    if (has_list && kind != want) wrong_kind(k, kind);
  }

  // Appends the values of one Feature to column k's own (appended) column; returns how many.
  size_t append_feature(size_t k, Cursor feature, Column& col) {
    if (specs_[k].kind == Kind::kBytes) {
      BytesAppender sink{col};
      feature_values(k, feature, sink);
      return sink.count;
    }
    NumberAppender sink{col.values};
    feature_values(k, feature, sink);
    return sink.count;
  }

  size_t values_in(const Column& col, Kind kind) const {
    return kind == Kind::kBytes ? col.starts.size() : col.values.size() / value_size(kind);
  }

  // The careful pass's fill of column k.
  void fill(size_t k) {
    const Found& f = found_[k];
    if (!f.present) return fill_missing(k);
    // Rare enough (no serializer writes it) to refuse clearly rather than merge.
    if (f.merged) wrong(k, "its map entry holds the value twice; merging them is not supported");
    if (!usual_fill(k, fields_[k], f.feature)) fill_unusual(k, f.feature);
  }

  // The usual Feature of column k (f: fields_[k]), straight into the record's slot (fixed size)
  // or appended (VarLen), inline; false for anything else, which fill_unusual then handles (or
  // reports).
  TFR_INLINE bool usual_fill(size_t k, const Field& f, Cursor feature) {
    Cursor payload;
    return usual_payload(feature, f.list_tag, &payload) && fill_payload(k, f, payload);
  }

  // The same, given the usual Feature's payload.
  TFR_INLINE bool fill_payload(size_t k, const Field& f, Cursor payload) {
    uint8_t* slot = f.slots + index_ * f.slot_bytes;
    switch (f.handler) {
      case Handler::kFixedNumbers: return usual_numbers(f, payload, slot);
      case Handler::kFixedBytes: {
        if (f.count != 1) return false;
        f.ends[index_] = payload.end - data_;
        const int64_t start = payload.p - data_;
        std::memcpy(slot, &start, sizeof(start));
        return true;
      }
      case Handler::kRawBytes:
        if (size_t(payload.end - payload.p) != f.count) return false;
        if (f.count != 0) std::memcpy(slot, payload.p, f.count);
        return true;
      case Handler::kVar:
        if (f.kind == Kind::kBytes) {
          f.column->starts.push_back(payload.p - data_);  // the one bytes value
          f.column->ends.push_back(payload.end - data_);
        } else if (!usual_var_numbers(k, f, payload)) {
          return false;
        }
        end_var_record(k, true);
        return true;
      case Handler::kSequence: break;
    }
    return false;
  }

  // Every Feature usual_fill does not take: VarLen and sequence columns, and fixed-size ones in
  // any other encoding (or wrong).
  void fill_unusual(size_t k, Cursor feature) {
    const Field& f = fields_[k];
    switch (f.handler) {
      case Handler::kFixedNumbers: {
        NumberSlot sink{f.slots + index_ * f.slot_bytes, f.count};
        feature_values(k, feature, sink);
        return check_count(k, sink.count);
      }
      case Handler::kFixedBytes: {
        BytesSlot sink = bytes_slot(f);
        feature_values(k, feature, sink);
        return check_count(k, sink.count);
      }
      case Handler::kRawBytes: return fill_raw_bytes(k, feature);
      case Handler::kVar:
        append_feature(k, feature, *f.column);
        return end_var_record(k, true);
      case Handler::kSequence: return fill_sequence(k, feature);
    }
  }

  // Packed numbers appended to a VarLen column (true), or nothing done (false: unusual).
  bool usual_var_numbers(size_t k, const Field& f, Cursor payload) {
    NumberAppender sink{f.column->values};
    if (f.kind == Kind::kInt64) {
      packed_int64s(k, payload, sink);
      return true;
    }
    if (TFR_BIG_ENDIAN || (payload.end - payload.p) % 4 != 0) return false;
    sink.put_floats(payload.p, size_t(payload.end - payload.p) / 4);
    return true;
  }

  // The usual Feature: one list of the kind asked for (`list_tag`) holding one value field:
  // packed numbers, or one bytes value. Its payload.
  static TFR_INLINE bool usual_payload(Cursor feature, uint8_t list_tag, Cursor* payload) {
    // Under 128 bytes, both lengths are one byte: [list_tag][n - 2] [kPackedTag][n - 4] payload.
    const uint8_t* q = feature.p;
    const size_t n = size_t(feature.end - q);
    if (n >= 4 && n < 0x80 && q[0] == list_tag && q[1] == n - 2 && q[2] == kPackedTag && q[3] == n - 4) {
      *payload = Cursor{q + 4, feature.end};
      return true;
    }
    Cursor list;
    return feature.next_is(list_tag) && feature.sub(&list) && feature.done() &&
           list.next_is(kPackedTag) && list.sub(payload) && list.done();
  }

  // Exactly f.count packed numbers into a fixed-size slot; false for anything else (the general
  // path then says what is wrong, or takes what is unusual but right).
  static TFR_INLINE bool usual_numbers(const Field& f, Cursor payload, uint8_t* out) {
    if (f.kind == Kind::kFloat) {
      if (size_t(payload.end - payload.p) != f.slot_bytes || TFR_BIG_ENDIAN) return false;
      // Little-endian wire = host. One float, the usual, is copied inline (a memcpy of a size
      // known only at run time is a call into libc).
      if (f.slot_bytes == 4) {
        std::memcpy(out, payload.p, 4);
      } else if (f.slot_bytes != 0) {
        std::memcpy(out, payload.p, f.slot_bytes);
      }
      return true;
    }
    uint64_t v;
    for (size_t i = 0; i < f.count; ++i) {
      if (!payload.varint(&v)) return false;
      std::memcpy(out + 8 * i, &v, 8);
    }
    return payload.done();
  }

  // The current record's slots of a fixed-size bytes column.
  BytesSlot bytes_slot(const Field& f) const {
    const size_t first = index_ * f.count;
    return BytesSlot{reinterpret_cast<int64_t*>(f.slots) + first, f.ends + first, f.count};
  }

  void fill_missing(size_t k) {
    const FieldSpec& spec = specs_[k];
    const Field& f = fields_[k];
    switch (f.handler) {
      case Handler::kFixedNumbers:
      case Handler::kRawBytes: return fill_default(k, f.slots + index_ * f.slot_bytes);
      case Handler::kFixedBytes: {
        if (!spec.has_default) wrong(k, "is missing and has no default");
        BytesSlot sink = bytes_slot(f);
        for (size_t i = 0; i < f.count; ++i) sink.put(-1, -1);  // -1: "the default" for the caller
        return;
      }
      case Handler::kVar:
        if (spec.required) wrong(k, "is missing (the spec requires it)");
        return end_var_record(k, false);
      case Handler::kSequence: {  // no steps
        Column& col = *f.column;
        col.row_splits.push_back(col.row_splits.back());
        return;
      }
    }
  }

  void end_var_record(size_t k, bool present) {
    Column& col = *fields_[k].column;
    col.row_splits.push_back(int64_t(values_in(col, specs_[k].kind)));
    col.present.push_back(uint8_t(present));
  }

  void check_count(size_t k, size_t count) const {
    if (count != specs_[k].count) wrong_count(k, count);
  }

  // A missing fixed-size feature: its default into the record's slot.
  void fill_default(size_t k, uint8_t* slot) const {
    const FieldSpec& spec = specs_[k];
    if (!spec.has_default) wrong(k, "is missing and has no default");
    if (!spec.default_value.empty()) std::memcpy(slot, spec.default_value.data(), spec.default_value.size());
  }

  void fill_raw_bytes(size_t k, Cursor feature) {
    const FieldSpec& spec = specs_[k];
    LastBytesValue sink;
    feature_values(k, feature, sink);
    if (sink.count != 1) wrong_raw_values(k, sink.count);
    const size_t size = size_t(sink.end - sink.start);
    if (size != spec.count) wrong_raw_size(k, size);
    if (size != 0) std::memcpy(fields_[k].slots + index_ * fields_[k].slot_bytes, data_ + sink.start, size);
  }

  // A feature list: each step (a Feature) follows the spec's layout.
  void fill_sequence(size_t k, Cursor list) {
    const FieldSpec& spec = specs_[k];
    Column& col = *fields_[k].column;
    int64_t steps = 0;
    uint32_t field, wire_type;
    while (!list.done()) {
      if (!list.tag(&field, &wire_type)) wrong(k, "a bad field tag in its FeatureList");
      Cursor feature;
      if (field != wire::kFeatureListFeature || wire_type != wire::kLengthDelimited) {
        if (!list.skip(wire_type)) wrong(k, "a truncated FeatureList");
        continue;
      }
      if (!list.sub(&feature)) wrong(k, "a truncated Feature in its FeatureList");
      const size_t count = append_feature(k, feature, col);
      if (spec.layout == Layout::kFixed && count != spec.count) wrong_step_count(k, steps, count);
      if (spec.layout == Layout::kVar) col.step_splits.push_back(int64_t(values_in(col, spec.kind)));
      ++steps;
    }
    col.row_splits.push_back(col.row_splits.back() + steps);
  }

  // Takes back what the one pass appended to column k for the current record (the records
  // before it each left exactly one row). Slots need nothing: the careful pass rewrites them.
  void undo_record(size_t k) {
    const FieldSpec& spec = specs_[k];
    if (in_slots(spec)) return;
    Column& col = *fields_[k].column;
    const size_t rows = index_ - first_;  // complete records in this column
    size_t values = 0;
    switch (fields_[k].handler) {
      case Handler::kFixedNumbers:
      case Handler::kRawBytes:
      case Handler::kFixedBytes: break;
      case Handler::kVar:
        col.row_splits.resize(rows + 1);
        col.present.resize(rows);
        values = size_t(col.row_splits.back());
        break;
      case Handler::kSequence: {
        col.row_splits.resize(rows + 1);
        const size_t steps = size_t(col.row_splits.back());
        if (spec.layout == Layout::kVar) {
          col.step_splits.resize(steps + 1);
          values = size_t(col.step_splits.back());
        } else {
          values = steps * spec.count;
        }
        break;
      }
    }
    if (spec.kind == Kind::kBytes) {
      col.starts.resize(values);
      col.ends.resize(values);
    } else {
      col.values.resize(values * value_size(spec.kind));
    }
  }

  // The tag of a list's packed values (or of one bytes value).
  static constexpr uint8_t kPackedTag = wire::tag_byte(wire::kListValue, wire::kLengthDelimited);

  const uint8_t* data_;
  const uint8_t* data_end_;  // the end of the batch's records: how far known_entry may read
  const std::vector<FieldSpec>& specs_;
  bool sequences_;
  size_t first_;
  std::vector<Field> fields_;
  std::vector<Found> found_;     // the careful pass: where each requested feature is
  std::vector<Hint> hints_[2];   // for the features (or context) map and the feature_lists map
  size_t known_[2] = {0, 0};     // hints_[i].size(), kept apart: no division in the hot loop
  size_t index_ = 0;
  size_t decoded_ = 0;  // the one pass: the requested features decoded in the current record
};

// ---- a batch in parts ---------------------------------------------------------------------------

// An empty column for appending the records of a part: its first split(s).
void start_column(Column& c, const FieldSpec& s) {
  if (s.layout == Layout::kVar || s.sequence) c.row_splits.assign(1, 0);
  if (s.sequence && s.layout == Layout::kVar) c.step_splits.assign(1, 0);
}

// Room for n records in an appended column (what is known of their size).
void reserve_records(Column& c, const FieldSpec& s, size_t n) {
  if (s.layout == Layout::kVar && !s.sequence) {
    c.row_splits.reserve(n + 1);
    c.present.reserve(n);
  } else if (s.sequence) {
    c.row_splits.reserve(n + 1);
  }
}

template <typename T>
void append_shifted(std::vector<T>& to, const std::vector<T>& from, T shift) {
  // from[0] is the part's first split (0): the batch's last split already stands for it. One
  // resize and a plain loop (vectorised), not a push_back per split: this runs after the parts,
  // on one thread, while the others wait.
  const size_t at = to.size();
  to.resize(at + from.size() - 1);
  T* out = to.data() + at;
  for (size_t i = 1; i < from.size(); ++i) out[i - 1] = from[i] + shift;
}

// Appends a later part's column to the batch's: values and offsets as they are (bytes offsets
// point into the same records), splits shifted past the batch's values (or steps) so far.
void join(Column& to, Column& from) {
  to.values.append(from.values.data(), from.values.size());
  to.starts.insert(to.starts.end(), from.starts.begin(), from.starts.end());
  to.ends.insert(to.ends.end(), from.ends.begin(), from.ends.end());
  to.present.insert(to.present.end(), from.present.begin(), from.present.end());
  if (!from.row_splits.empty()) append_shifted(to.row_splits, from.row_splits, to.row_splits.back());
  if (!from.step_splits.empty()) append_shifted(to.step_splits, from.step_splits, to.step_splits.back());
}

// Parts per thread when a worker may start late (asleep): more parts than threads let it take
// fewer of them. When the workers are awake, one part each: every part costs a decoder that
// learns the records' forms anew, and its columns' cache lines written by the other core
// (callgrind: +4 K instructions a part; a C++ loop alternating both, call by call, on 1024-record
// batches: 2 threads took 1.06-1.2x longer with 4 parts a thread than with one).
constexpr size_t kPartsPerThread = 4;
constexpr size_t kMinRecordsPerPart = 64;

// How much work each thread should have at least, in records (a record, or this many bytes of
// records, is one unit): a thread woken for less costs about what it saves. At ~70 ns a record
// (MNIST-like), 512 records are ~35 us, about what waking a thread costs on a virtual machine.
constexpr size_t kWorkPerThread = 512;
constexpr size_t kBytesPerRecordOfWork = 1024;
// The work a call needs before it waits for sleeping workers (~290 us at ~70 ns a unit, some
// three times what a wake takes here). With less, the caller would do most of the parts alone
// and then wait for a late worker's: in a loop of calls over 1 ms apart (the workers asleep at
// each), 2 threads took 1.36x the time of one on 1024-record tutorial batches.
constexpr size_t kWorkForSleepers = 8 * kWorkPerThread;

size_t work_units(size_t n, size_t bytes) { return n + bytes / kBytesPerRecordOfWork; }

// How a call of n records (`bytes` long) asked to use `threads` threads is cut into parts, and
// on how many threads they run now (fewer than asked: the others are asleep, and the call has
// too little work to wait for them).
struct Cut {
  size_t parts;
  size_t threads;
};

Cut cut_for(size_t n, size_t bytes, size_t threads) {
  if (threads <= 1 || n <= 1) return {n == 0 ? size_t(0) : size_t(1), 1};
  size_t per_thread = 1, run_on = threads;
  const size_t awake = awake_task_workers();
  if (awake + 1 < threads) {
    if (work_units(n, bytes) >= kWorkForSleepers) {
      per_thread = kPartsPerThread;  // the caller takes most of them while the workers wake
    } else {
      // The same parts, on the threads awake (the caller alone if none): the results and the
      // code that joins the parts do not depend on the pool's state.
      run_on = awake + 1;
    }
  }
  const size_t parts = std::max(threads, std::min(threads * per_thread, n / kMinRecordsPerPart));
  return {std::min(parts, n), run_on};
}

// The first record of part `part` of `parts` over n records: the first n % parts parts hold one
// record more.
size_t part_begin(size_t part, size_t parts, size_t n) {
  return part * (n / parts) + std::min(part, n % parts);
}

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

namespace {

// The decoder reads a record's first bytes and skips its large values, so in a batch larger than
// the cache every record starts with a wait on memory, at a stride the hardware prefetchers do
// not follow (MNIST-like and VOC-like batches parsed 1.4-1.7x faster with this). The first two
// lines of the record this many places ahead are asked for early; a record's last bytes mostly
// share a line with the next one's first.
constexpr size_t kPrefetchAhead = 4;

inline void prefetch_start(const uint8_t* data, int64_t start, int64_t batch_end) {
  prefetch(data + start);
  if (start + 64 < batch_end) prefetch(data + start + 64);
}

}  // namespace

std::vector<Column> decode_examples(const uint8_t* data, const int64_t* offsets, size_t n,
                                    const std::vector<FieldSpec>& specs, bool sequence_examples,
                                    size_t num_threads, BufferPool* pool) {
  for (const FieldSpec& s : specs) check_spec(s);
  const size_t nspecs = specs.size();
  std::vector<Column> columns(nspecs);
  for (size_t k = 0; k < nspecs; ++k) {
    if (in_slots(specs[k])) {
      const size_t per_record = bytes_per_record(specs[k]);
      if (n != 0 && per_record > SIZE_MAX / n) throw std::bad_alloc();
      // Each part writes its records' slots: in the values (numbers, raw bytes), or in the
      // starts and ends (bytes values).
      if (pooled_values(specs[k])) {
        if (pool != nullptr && per_record * n >= kPooledColumnBytes) {
          columns[k].values = pool->take(per_record * n);
        }
        columns[k].values.reserve(per_record * n);
        columns[k].values.resize(per_record * n);
      } else {
        // (a length std::vector refuses is a MemoryError too, not its length_error)
        if (specs[k].count * n > columns[k].starts.max_size()) throw std::bad_alloc();
        columns[k].starts.resize(specs[k].count * n);
        columns[k].ends.resize(specs[k].count * n);
      }
    } else {
      start_column(columns[k], specs[k]);
      reserve_records(columns[k], specs[k], n);
    }
  }
  const Cut cut = cut_for(n, size_t(offsets[n] - offsets[0]), num_threads);
  const size_t parts = cut.parts;
  // Threads the parts could use but that sleep: woken (without work) for the next call.
  if (cut.threads < std::min(num_threads, parts)) wake_task_workers(num_threads - 1);
  // Part 0 appends to the batch's columns, each later part to its own, joined in order below.
  std::vector<std::vector<Column>> later(parts > 1 ? parts - 1 : 0);
  std::vector<std::exception_ptr> errors(parts);
  std::atomic<size_t> first_failed{parts};
  run_tasks(parts, cut.threads, [&](size_t part) {
    const size_t begin = part_begin(part, parts, n), end = part_begin(part + 1, parts, n);
    try {
      std::vector<Column*> targets(nspecs, nullptr);
      if (part > 0) later[part - 1].resize(nspecs);
      for (size_t k = 0; k < nspecs; ++k) {
        if (in_slots(specs[k])) {  // the batch's: only this part's slots are written
          targets[k] = &columns[k];
          continue;
        }
        if (part > 0) {
          start_column(later[part - 1][k], specs[k]);
          reserve_records(later[part - 1][k], specs[k], end - begin);
        }
        targets[k] = part == 0 ? &columns[k] : &later[part - 1][k];
      }
      Decoder decoder(data, data + offsets[n], specs, sequence_examples, begin, targets);
      for (size_t i = begin; i < end; ++i) {
        // After an earlier part failed, this one's columns are never used.
        if (first_failed.load(std::memory_order_relaxed) < part) return;
        if (i + kPrefetchAhead < end) {
          prefetch_start(data, offsets[i + kPrefetchAhead], offsets[n]);
        }
        decoder.record(i, Cursor{data + offsets[i], data + offsets[i + 1]});
      }
    } catch (...) {  // the first record that fails in the batch is the one reported
      errors[part] = std::current_exception();
      size_t seen = first_failed.load();
      while (part < seen && !first_failed.compare_exchange_weak(seen, part)) {
      }
    }
  });
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  for (size_t k = 0; k < nspecs; ++k) {
    if (!in_slots(specs[k])) {
      for (std::vector<Column>& part : later) join(columns[k], part[k]);
    }
  }
  return columns;
}

size_t records_for_pooled_column(const std::vector<FieldSpec>& specs) {
  size_t fewest = SIZE_MAX;
  for (const FieldSpec& s : specs) {
    if (!pooled_values(s)) continue;
    const size_t per_record = bytes_per_record(s);
    if (per_record == 0) continue;
    fewest = std::min(fewest, (kPooledColumnBytes + per_record - 1) / per_record);
  }
  return fewest;
}

size_t decode_threads_worth(size_t n, size_t bytes) {
  return std::max<size_t>(1, std::min(work_units(n, bytes) / kWorkPerThread, kMaxTaskThreads));
}

}  // namespace tfr
