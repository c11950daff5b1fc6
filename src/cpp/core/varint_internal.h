// The varint backends behind varint_decode.h, and the scalar pieces they share. Those pieces have
// internal linkage: each backend file, compiled for its own instruction set, gets its own copy,
// never one that another file compiled with wider instructions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "portable.h"
#include "varint_decode.h"

namespace tfr::varints {

using DecodeFn = size_t (*)(const uint8_t*, const uint8_t*, uint64_t*, size_t);
using TaggedFn = size_t (*)(const uint8_t**, const uint8_t*, uint8_t, uint64_t*, size_t);

size_t decode_portable(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room);
size_t tagged_portable(const uint8_t** p, const uint8_t* end, uint8_t tag, uint64_t* out,
                       size_t room);

// Defined only in builds with TFREC_HAVE_X86_VARINTS (x86-64); need AVX2 / AVX-512F+BW.
size_t decode_avx2(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room);
size_t tagged_avx2(const uint8_t** p, const uint8_t* end, uint8_t tag, uint64_t* out, size_t room);
size_t decode_avx512(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room);

// Defined only in builds with TFREC_HAVE_NEON_VARINTS (aarch64, where NEON is the baseline).
size_t decode_neon(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room);
size_t tagged_neon(const uint8_t** p, const uint8_t* end, uint8_t tag, uint64_t* out, size_t room);

namespace {

inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return TFR_BIG_ENDIAN ? byteswap64(v) : v;
}

constexpr uint64_t kHighBits = 0x8080808080808080ull;

// The value of a varint of `len` bytes (1..8) whose bytes are the low bytes of `word` (loaded
// little-endian): their low 7 bits, packed in three steps of pairs.
inline uint64_t pack7(uint64_t word, unsigned len) {
  const uint64_t keep = len >= 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * len)) - 1;
  uint64_t x = word & keep & 0x7f7f7f7f7f7f7f7full;
  x = ((x & 0x7f007f007f007f00ull) >> 1) | (x & 0x007f007f007f007full);
  x = ((x & 0x3fff00003fff0000ull) >> 2) | (x & 0x00003fff00003fffull);
  x = ((x & 0x0fffffff00000000ull) >> 4) | (x & 0x000000000fffffffull);
  return x;
}

// One varint at p (bounds-checked): false when it is cut short by `end` or longer than 10 bytes
// (nothing consumed then). Bits past the 64th are dropped, as protobuf does.
inline bool read_varint(const uint8_t*& p, const uint8_t* end, uint64_t* out) {
  uint64_t value = 0;
  for (int i = 0; i < 10; ++i) {
    if (p + i >= end) return false;
    const uint8_t byte = p[i];
    value |= uint64_t(byte & 0x7f) << (7 * i);
    if (byte < 0x80) {
      *out = value;
      p += i + 1;
      return true;
    }
  }
  return false;
}

// The varints that start in the first `last + 1` bytes of a block at p whose continuation bits
// are `cont` (bit i: byte i continues), into out[*n...]; the block's bytes from p + last to
// p + last + 7 must be readable, and every varint of 8 bytes or fewer starting there ends in the
// block. The loop walks the varints' last bytes (the clear bits of `cont`): each iteration only
// clears the lowest of them, so no iteration waits on the one before it to know where it starts,
// and nothing branches on a value's width. Stops before a varint of more than 8 bytes. Returns
// the bytes consumed.
inline unsigned varints_in_block(const uint8_t* p, uint64_t cont, unsigned last, uint64_t* out,
                                 size_t* n) {
  uint64_t ends = ~cont;
  unsigned start = 0;
  size_t k = *n;
  while (start <= last) {
    const unsigned end = unsigned(trailing_zeros64(ends));
    if (end - start >= 8) break;  // over 8 bytes
    out[k++] = pack7(load_le64(p + start), end - start + 1);
    start = end + 1;
    ends &= ends - 1;
  }
  *n = k;
  return start;
}

}  // namespace
}  // namespace tfr::varints
