// What the Example decoder's parts share (internal to the decoder): the plan of each requested
// feature, worked out once per batch (how its values land in its column, and where), the one-byte
// tags the usual encodings write, and how a record's errors are reported.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "example_decoder.h"
#include "portable.h"
#include "protobuf_wire.h"

namespace tfr::decoding {

using wire::Cursor;

static_assert(uint32_t(Kind::kBytes) == wire::kBytesList &&
                  uint32_t(Kind::kFloat) == wire::kFloatList &&
                  uint32_t(Kind::kInt64) == wire::kInt64List,
              "Kind values are the Feature.kind field numbers");

// A Feature's list field (kBytesList..kInt64List) as a Kind.
inline Kind list_kind_of(uint32_t field) { return Kind(field); }

inline size_t value_size(Kind kind) { return kind == Kind::kInt64 ? 8 : 4; }

// The one-byte tags the usual encodings write.
constexpr uint8_t kFeaturesTag = wire::tag_byte(wire::kExampleFeatures, wire::kLengthDelimited);
constexpr uint8_t kEntryTag = wire::tag_byte(wire::kFeaturesEntry, wire::kLengthDelimited);
constexpr uint8_t kKeyTag = wire::tag_byte(wire::kMapKey, wire::kLengthDelimited);
constexpr uint8_t kValueTag = wire::tag_byte(wire::kMapValue, wire::kLengthDelimited);
// The tag of a list's packed values (or of one bytes value).
constexpr uint8_t kPackedTag = wire::tag_byte(wire::kListValue, wire::kLengthDelimited);

inline uint8_t list_tag(Kind kind) {
  return wire::tag_byte(uint32_t(kind), wire::kLengthDelimited);
}

// How a requested feature lands in its column.
enum class Handler : uint8_t { kVar, kFixedNumbers, kFixedBytes, kRawBytes, kSequence };

inline Handler handler_of(const FieldSpec& s) {
  if (s.sequence) return Handler::kSequence;
  switch (s.layout) {
    case Layout::kVar:
      return Handler::kVar;
    case Layout::kRawBytes:
      return Handler::kRawBytes;
    case Layout::kFixed:
      break;
  }
  return s.kind == Kind::kBytes ? Handler::kFixedBytes : Handler::kFixedNumbers;
}

// Whether a feature's records are written to their own slots in one buffer for the batch (fixed
// size: numbers and raw bytes in its values, bytes values in its starts and ends) rather than
// appended.
inline bool in_slots(const FieldSpec& s) { return !s.sequence && s.layout != Layout::kVar; }

// The bytes of a record's slot (for fixed bytes values: in its starts, and as many in its ends).
// Throws std::bad_alloc for a count no buffer could hold.
size_t bytes_per_record(const FieldSpec& s);

// Throws std::invalid_argument for a spec no record could satisfy.
void check_spec(const FieldSpec& s);

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
};

// The plan of each spec over `columns` (the batch's for slots, the part's for the others).
std::vector<Field> plan_fields(const std::vector<FieldSpec>& specs,
                               const std::vector<Column*>& columns);

// The ParseErrors of the record being decoded. Cold: errors never slow the usual record.
class RecordErrors {
 public:
  RecordErrors(const std::vector<FieldSpec>& specs, bool sequences)
      : specs_(specs), sequences_(sequences) {}

  size_t index = 0;  // of the record in the batch

  [[noreturn]] TFR_COLD void malformed(const char* what) const;
  [[noreturn]] TFR_COLD void wrong(size_t k, const std::string& what) const;
  [[noreturn]] TFR_COLD void wrong(size_t k, const char* what) const {
    wrong(k, std::string(what));
  }
  [[noreturn]] TFR_COLD void wrong_kind(size_t k, Kind kind) const;
  [[noreturn]] TFR_COLD void wrong_count(size_t k, size_t count) const;
  [[noreturn]] TFR_COLD void wrong_step_count(size_t k, int64_t step, size_t count) const;
  [[noreturn]] TFR_COLD void wrong_raw_values(size_t k, size_t count) const;
  [[noreturn]] TFR_COLD void wrong_raw_size(size_t k, size_t size) const;

 private:
  const std::vector<FieldSpec>& specs_;
  bool sequences_;
};

// Copies n bytes: up to 32 inline with overlapping words (a memcpy of a size known only at run
// time is a call into libc, which costs more than a few floats).
TFR_INLINE void copy_bytes(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n > 32) {
    std::memcpy(dst, src, n);
  } else if (n >= 16) {
    uint8_t a[16], b[16];
    std::memcpy(a, src, 16);
    std::memcpy(b, src + n - 16, 16);
    std::memcpy(dst, a, 16);
    std::memcpy(dst + n - 16, b, 16);
  } else if (n >= 8) {
    uint64_t a, b;
    std::memcpy(&a, src, 8);
    std::memcpy(&b, src + n - 8, 8);
    std::memcpy(dst, &a, 8);
    std::memcpy(dst + n - 8, &b, 8);
  } else if (n >= 4) {
    uint32_t a, b;
    std::memcpy(&a, src, 4);
    std::memcpy(&b, src + n - 4, 4);
    std::memcpy(dst, &a, 4);
    std::memcpy(dst + n - 4, &b, 4);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

// Whether a[0, n) and b[0, n) hold the same bytes. Feature names are short: compared inline
// (overlapping words) instead of calling memcmp.
template <typename Word>
TFR_INLINE bool same_words(const uint8_t* a, const uint8_t* b, size_t n) {
  Word a0, b0, a1, b1;
  std::memcpy(&a0, a, sizeof(Word));
  std::memcpy(&b0, b, sizeof(Word));
  std::memcpy(&a1, a + n - sizeof(Word), sizeof(Word));
  std::memcpy(&b1, b + n - sizeof(Word), sizeof(Word));
  return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

TFR_INLINE bool same_bytes(const uint8_t* a, const uint8_t* b, size_t n) {
  if (n > 16) return std::memcmp(a, b, n) == 0;
  if (n >= 8) return same_words<uint64_t>(a, b, n);  // two overlapping words cover 8..16 bytes
  if (n >= 4) return same_words<uint32_t>(a, b, n);
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// A map entry's value (a Feature, or a FeatureList): its value field, or, in an entry that holds
// that field more than once, each of them in turn, which protobuf merges as if their bytes were
// one message (a list's values concatenate; a later list of another kind replaces it).
struct EntryValue {
  Cursor value{nullptr, nullptr};  // the value field (none: null); for several, the last
  Cursor entry{nullptr, nullptr};  // the whole map entry, when it holds several (else null)

  bool merged() const { return entry.p != nullptr; }

  // Calls part(Cursor) for each value field, in order. The entry was read whole before (its
  // fields are well formed): nothing here fails (a failure would end the walk).
  template <typename F>
  void each_part(F part) const {
    if (!merged()) return part(value);
    uint32_t field, wire_type;
    for (Cursor c = entry; !c.done();) {
      Cursor bytes;
      if (!c.tag(&field, &wire_type)) return;
      if (field == wire::kMapValue && wire_type == wire::kLengthDelimited) {
        if (!c.sub(&bytes)) return;
        part(bytes);
      } else if (!c.skip(wire_type)) {
        return;
      }
    }
  }
};

// Whether a map key names spec `s` (a Features key for an Example or context spec, a
// FeatureLists key (`lists`) for a feature-list spec).
inline bool names(const FieldSpec& s, bool lists, Cursor key) {
  const size_t size = size_t(key.end - key.p);
  return s.sequence == lists && s.name.size() == size &&
         same_bytes(reinterpret_cast<const uint8_t*>(s.name.data()), key.p, size);
}

}  // namespace tfr::decoding
