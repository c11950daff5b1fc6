// The spec-free kind scan (feature_kinds): which features the records hold, and of what kind.
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "decode_plan.h"
#include "example_decoder.h"

namespace tfr {
namespace {

using decoding::Cursor;

class KindScanner {
 public:
  explicit KindScanner(bool sequence_examples) : sequences_(sequence_examples) {}

  // Adds what record `index` holds. A record that is not a valid message throws ParseError and
  // adds nothing, not even in part.
  void record(size_t index, Cursor message) {
    index_ = index;
    entries_.clear();
    in_record_.clear();
    uint32_t field, wire_type;
    while (!message.done()) {
      if (!message.tag(&field, &wire_type)) malformed("a bad field tag");
      Cursor features;
      // Example.features and SequenceExample.context are both field 1 (given twice, the maps
      // merge: one map for the record).
      if (field == wire::kExampleFeatures && wire_type == wire::kLengthDelimited) {
        if (!message.sub(&features)) malformed("a truncated Features message");
        scan(features);
      } else if (!message.skip(wire_type)) {
        malformed("a truncated or unsupported field");
      }
    }
    for (const Entry& e : entries_) note(e);
  }

  std::vector<FeatureKind> take() { return std::move(found_); }

 private:
  // A feature of the current record: its name, and the kind of its last entry (protobuf keeps
  // the last entry of a map key, whole).
  struct Entry {
    std::string_view name;
    std::optional<Kind> kind;
  };

  [[noreturn]] void malformed(const std::string& what) const {
    throw ParseError(index_, false, "",
                     std::string("not a valid tf.train.") +
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
      Cursor key{nullptr, nullptr};
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
          key = value;
        } else if (field == wire::kMapValue) {
          // A value given again merges into the first (protobuf): a part with no list keeps the
          // kind, a list of another kind replaces it.
          if (const std::optional<Kind> part_kind = list_kind(value)) kind = part_kind;
        }
      }
      const std::string_view name(reinterpret_cast<const char*>(key.p), size_t(key.end - key.p));
      const auto [at, added] = in_record_.emplace(name, entries_.size());
      if (added) {
        entries_.push_back(Entry{name, kind});
      } else {
        entries_[at->second].kind = kind;  // the key again: its last entry counts
      }
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
        kind = decoding::list_kind_of(field);
      }
      if (!feature.skip(wire_type)) malformed("a truncated field in a Feature");
    }
    return kind;
  }

  void note(const Entry& e) {
    const auto [at, added] = index_of_.emplace(std::string(e.name), found_.size());
    if (added) {
      found_.push_back(FeatureKind{at->first, e.kind, index_});
    } else if (!found_[at->second].kind) {
      found_[at->second].kind = e.kind;
    }
  }

  bool sequences_;
  size_t index_ = 0;
  std::vector<FeatureKind> found_;                          // in the order first seen
  std::unordered_map<std::string, size_t> index_of_;        // name -> its place in found_
  std::vector<Entry> entries_;                              // the current record's features
  std::unordered_map<std::string_view, size_t> in_record_;  // name -> its place in entries_
};

}  // namespace

std::vector<FeatureKind> feature_kinds(const uint8_t* data, const int64_t* offsets, size_t n,
                                       bool sequence_examples, bool strict) {
  KindScanner scanner(sequence_examples);
  for (size_t i = 0; i < n; ++i) {
    try {
      scanner.record(i, Cursor{data + offsets[i], data + offsets[i + 1]});
    } catch (const ParseError&) {
      if (strict) throw;
      break;  // decode_examples then reports the first damaged record
    }
  }
  return scanner.take();
}

}  // namespace tfr
