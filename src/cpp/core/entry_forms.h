// Entry-form learning (internal to the Example decoder): reads the entries of a Features map (or
// a FeatureLists map), finding the requested feature each one names. Records of one writer list
// their features in the same order and lay each entry out the same way, so for each position in
// the map the form of the entry there in the previous record is kept (its key, tags and which
// lengths are one or two bytes, signed as two words and a mask): the next record's entry at that
// position is then checked in a few word compares, and its key matched without a look at any
// spec name. An entry in another form is read field by field, and may teach its position a form.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "decode_plan.h"

namespace tfr::decoding {

// One map entry as read: its key and value (null cursors where the entry had none; the last of
// several values, and the whole entry to merge them), the usual Feature's payload when the
// entry's learned form showed it, and the spec its key names.
struct MapEntry {
  static constexpr int kNoSpec = -1;        // no requested feature has this name
  static constexpr int kSeveralSpecs = -2;  // several have (possible only through the C++ API)

  Cursor key{nullptr, nullptr};
  Cursor value{nullptr, nullptr};
  Cursor payload{nullptr, nullptr};
  Cursor merged{nullptr, nullptr};  // the whole entry, when its value field came more than once
  int spec = kNoSpec;

  EntryValue feature() const { return EntryValue{value, merged}; }
};

class EntryForms {
 public:
  // `data_end`: the end of the batch's records, how far a word compare may read.
  EntryForms(const std::vector<FieldSpec>& specs, const uint8_t* data_end,
             const RecordErrors& errors)
      : specs_(specs), data_end_(data_end), errors_(errors) {}

  // Reads the field of the map (`lists`: a FeatureLists map) at *features: a map entry, the
  // `*position`-th of this map in the record (true: `entry` filled, *position counts it), or any
  // other field, skipped (false). Throws the record's ParseError for a malformed one.
  TFR_INLINE bool next(Cursor* features, bool lists, size_t* position, MapEntry* entry) {
    const Cursor at = *features;  // where the entry starts
    const size_t pos = *position;
    *entry = MapEntry{};
    if (pos < known_[lists] &&
        known_entry(hints_[lists][pos], features, &entry->key, &entry->value, &entry->payload)) {
      entry->spec = hints_[lists][pos].spec;
    } else if (short_entry(features, &entry->key, &entry->value)) {
      entry->spec = match(lists, pos, entry->key, at, entry->value);
    } else {
      Cursor raw;
      if (!features->next_is(kEntryTag)) {
        uint32_t field, wire_type;
        if (!features->tag(&field, &wire_type)) errors_.malformed("a bad field tag in Features");
        if (field != wire::kFeaturesEntry || wire_type != wire::kLengthDelimited) {
          if (!features->skip(wire_type)) errors_.malformed("a truncated field in Features");
          return false;
        }
      }
      if (!features->sub(&raw)) errors_.malformed("a truncated feature map entry");
      if (!usual_entry(raw, &entry->key, &entry->value) &&
          read_entry(raw, &entry->key, &entry->value)) {
        entry->merged = raw;
      }
      const bool merged = entry->merged.p != nullptr;
      entry->spec =
          match(lists, pos, entry->key, at, merged ? Cursor{nullptr, nullptr} : entry->value);
    }
    *position = pos + 1;
    return true;
  }

 private:
  // How the entry at a map position was laid out in the previous record, for known_entry to check
  // the next record's against. Short: every length one byte. The usual Feature: one list of the
  // spec's kind holding one value field (packed numbers, or one bytes value).
  enum class Form : uint8_t {
    kNone,          // none of these: the entry is read field by field
    kShortEntry,    // a short entry
    kShortFeature,  // a short entry holding the usual Feature
    kLongFeature,   // the usual Feature with every length two bytes (a payload of 128 B to ~16 KB)
  };

  // The key seen at one map position in the previous record, the spec it named, and the form of
  // its entry (learned again, a few times a part, when the same key comes in another form: a
  // first record with an empty list must not slow the rest). For a form, the entry's bytes from
  // its key tag on, [key tag][key size] [key][value tag] (kShortFeature: and [value length]
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

  static constexpr uint8_t kRelearns = 4;  // bounds the cost of a form that keeps changing

  // The usual map entry when it is shorter than 128 bytes, so that every length in it is one
  // byte: [entry tag][n] [key tag][k][key] [value tag][n - k - 4][value]. Its key and value in a
  // few comparisons; false (nothing consumed) for anything else.
  static TFR_INLINE bool short_entry(Cursor* features, Cursor* key, Cursor* value) {
    const uint8_t* q = features->p;
    const size_t left = size_t(features->end - q);
    if (left < 6 || q[0] != kEntryTag || q[1] >= 0x80 || q[2] != kKeyTag || q[3] >= 0x80)
      return false;
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
    if (!two_byte_length(v + 1, &value_size) || value_size != n - h.size - 5 ||
        v[3] != h.list_tag || !two_byte_length(v + 4, &list_size) || list_size != value_size - 3 ||
        v[6] != kPackedTag || !two_byte_length(v + 7, &payload_size) ||
        payload_size != list_size - 3) {
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

  // Any other map entry: the last key wins, and the last value (returns whether the value came
  // more than once: protobuf merges them, see EntryValue).
  bool read_entry(Cursor entry, Cursor* key, Cursor* value) const;

  // Which requested feature (if any) a map key names. The answer for the entry at this position
  // in the previous record is checked first: one comparison per key instead of one per spec.
  // `at`: the map from the entry on; `value`: its value (none: a value given twice; a null key:
  // the entry had none).
  TFR_INLINE int match(bool lists, size_t position, Cursor key, Cursor at, Cursor value) {
    const size_t size = size_t(key.end - key.p);
    if (position < known_[lists]) {
      Hint& h = hints_[lists][position];
      if (h.size == size && h.relearns == 0 && same_bytes(h.key, key.p, size)) {
        h.key = key.p;
        return h.spec;
      }
    }
    return new_match(lists, position, key, at, value);
  }

  TFR_COLD int new_match(bool lists, size_t position, Cursor key, Cursor at, Cursor value);
  int relearn(Hint& h, Cursor at, Cursor value) const;
  void learn_form(Hint& h, Cursor at, Cursor value) const;
  static bool empty_feature(const Hint& h, Cursor value) {
    return h.spec >= 0 && value.p != nullptr && value.end - value.p <= 2;
  }

  const std::vector<FieldSpec>& specs_;
  const uint8_t* data_end_;
  const RecordErrors& errors_;
  std::vector<Hint> hints_[2];  // for the features (or context) map and the feature_lists map
  size_t known_[2] = {0, 0};    // hints_[i].size(), kept apart: no division in the hot loop
};

}  // namespace tfr::decoding
