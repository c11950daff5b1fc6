// The few pieces of the protobuf wire format that tf.train.Example uses, written down once for the
// decoder and the encoder. Readers are bounds-checked and report failure instead of reading past
// the end; nothing here allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "portable.h"
#include "record_format.h"

namespace tfr::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// A cursor over [p, end). Every read returns false (and leaves the cursor unusable) on malformed
// or truncated input.
struct Cursor {
  const uint8_t* p = nullptr;
  const uint8_t* end = nullptr;

  bool done() const { return p >= end; }

  TFR_INLINE bool varint(uint64_t* out) {
    if (p < end && *p < 0x80) {  // one byte: most tags, lengths and small values
      *out = *p++;
      return true;
    }
    return end - p >= 10 ? long_varint(out) : varint_near_end(out);
  }

  TFR_INLINE bool tag(uint32_t* field, uint32_t* wire_type) {
    uint64_t t;
    if (!varint(&t) || (t >> 3) == 0 || (t >> 3) > UINT32_MAX) return false;
    *field = uint32_t(t >> 3);
    *wire_type = uint32_t(t & 7);
    return true;
  }

  // Consumes `byte` if it comes next: the one-byte tags of the usual encodings.
  TFR_INLINE bool next_is(uint8_t byte) {
    if (p < end && *p == byte) {
      ++p;
      return true;
    }
    return false;
  }

  // A length-delimited field's payload, as a cursor of its own.
  TFR_INLINE bool sub(Cursor* out) {
    uint64_t length;
    if (!varint(&length) || length > uint64_t(end - p)) return false;
    *out = Cursor{p, p + length};
    p += length;
    return true;
  }

  bool fixed32(uint32_t* out) {  // in host byte order
    if (end - p < 4) return false;
    *out = load_le32(p);
    p += 4;
    return true;
  }

  // A varint of 2 to 10 bytes with at least 10 bytes left: no bounds check per byte, one branch
  // per byte. Each byte is added with its continuation bit, which the next step takes back out
  // (so adding is or-ing). Bits past the 64th are dropped, as protobuf does; an 11th byte is an
  // error.
  bool long_varint(uint64_t* out) {
    const uint8_t* q = p;
    uint64_t value = uint64_t(q[0]) - 0x80;  // the caller saw its continuation bit
    for (int i = 1; i < 10; ++i) {
      const uint64_t byte = q[i];
      value += byte << (7 * i);
      if (byte < 0x80) {
        p = q + i + 1;
        *out = value;
        return true;
      }
      value -= uint64_t(0x80) << (7 * i);
    }
    return false;
  }

  // The same, byte by byte with bounds checks, where fewer than 10 bytes are left.
  bool varint_near_end(uint64_t* out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) return false;
      const uint8_t byte = *p++;
      value |= uint64_t(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *out = value;
        return true;
      }
    }
    return false;  // more than 10 bytes
  }

  // Skips a field we do not want. Groups (wire types 3 and 4) are not used by these messages
  // and are rejected rather than skipped.
  bool skip(uint32_t wire_type) {
    uint64_t ignored;
    Cursor sub_cursor;
    switch (wire_type) {
      case kVarint:
        return varint(&ignored);
      case kFixed64:
        if (end - p < 8) return false;
        p += 8;
        return true;
      case kLengthDelimited:
        return sub(&sub_cursor);
      case kFixed32:
        if (end - p < 4) return false;
        p += 4;
        return true;
      default:
        return false;
    }
  }
};

// Field numbers of tf.train.Example & co (tensorflow/core/example/{example,feature}.proto).
constexpr uint32_t kExampleFeatures = 1;                            // Example.features
constexpr uint32_t kFeaturesEntry = 1;                              // Features.feature (map entry)
constexpr uint32_t kMapKey = 1, kMapValue = 2;                      // map entry
constexpr uint32_t kBytesList = 1, kFloatList = 2, kInt64List = 3;  // Feature.kind
constexpr uint32_t kListValue = 1;                                  // {Bytes,Float,Int64}List.value
constexpr uint32_t kSequenceContext = 1;                            // SequenceExample.context
constexpr uint32_t kSequenceFeatureLists = 2;                       // SequenceExample.feature_lists
constexpr uint32_t kFeatureListsEntry = 1;   // FeatureLists.feature_list (map entry)
constexpr uint32_t kFeatureListFeature = 1;  // FeatureList.feature

// The tag of a field numbered below 16, which is one byte: what serializers write for these.
constexpr uint8_t tag_byte(uint32_t field, WireType wire_type) {
  return uint8_t(field << 3 | wire_type);
}

}  // namespace tfr::wire
