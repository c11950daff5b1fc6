// Varints with NEON: 16 bytes at a time (aarch64 only, where NEON is the baseline: no flags; the
// guard keeps the file an empty translation unit elsewhere). A block of 16 one-byte values is
// widened at once; any other block decodes its first varint the scalar way.
#if defined(__aarch64__) || defined(_M_ARM64)

#include <arm_neon.h>

#include "varint_internal.h"

namespace tfr::varints {
namespace {

// Sixteen one-byte values, widened to int64s at out.
inline void widen16(uint8x16_t bytes, uint64_t* out) {
  const uint16x8_t halves[2] = {vmovl_u8(vget_low_u8(bytes)), vmovl_high_u8(bytes)};
  for (int h = 0; h < 2; ++h) {
    const uint32x4_t words[2] = {vmovl_u16(vget_low_u16(halves[h])), vmovl_high_u16(halves[h])};
    for (int w = 0; w < 2; ++w) {
      vst1q_u64(out + 8 * h + 4 * w, vmovl_u32(vget_low_u32(words[w])));
      vst1q_u64(out + 8 * h + 4 * w + 2, vmovl_high_u32(words[w]));
    }
  }
}

}  // namespace

size_t decode_neon(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room) {
  size_t n = 0;
  while (end - p >= 16 && room - n >= 16) {
    const uint8x16_t bytes = vld1q_u8(p);
    if (vmaxvq_u8(bytes) < 0x80) {
      widen16(bytes, out + n);
      n += 16;
      p += 16;
    } else if (!read_varint(p, end, out + n++)) {
      return kBadVarints;
    }
  }
  const size_t rest = decode_portable(p, end, out + n, room - n);
  return rest == kBadVarints ? kBadVarints : n + rest;
}

size_t tagged_neon(const uint8_t** at, const uint8_t* end, uint8_t tag, uint64_t* out,
                   size_t room) {
  const uint8_t* p = *at;
  size_t n = 0;
  const uint8x16_t tags = vdupq_n_u8(tag);
  while (end - p >= 32 && room - n >= 16) {
    const uint8x16x2_t pairs = vld2q_u8(p);  // [0]: the even bytes (tags), [1]: the values
    if (vminvq_u8(vceqq_u8(pairs.val[0], tags)) == 0xff && vmaxvq_u8(pairs.val[1]) < 0x80) {
      widen16(pairs.val[1], out + n);
      n += 16;
      p += 32;
      continue;
    }
    const uint8_t* q = p + 1;  // one pair the scalar way, or the end of the run
    if (*p != tag || !read_varint(q, end, out + n)) break;
    ++n;
    p = q;
  }
  *at = p;
  return n + tagged_portable(at, end, tag, out + n, room - n);
}

}  // namespace tfr::varints

#endif
