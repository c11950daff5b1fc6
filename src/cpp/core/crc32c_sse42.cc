// CRC32C with the SSE4.2 crc32 instruction. Compiled with -msse4.2 -mpclmul (x86-64 builds only).
//
// One crc32 instruction has a latency of 3 cycles but a throughput of 1 per cycle, so long inputs
// are cut into three adjacent blocks whose CRC registers are computed as independent streams and
// then merged:
//   crc(A|B|C) = crc(A) * x^(16L) + crc(B) * x^(8L) + crc(C)   (mod P, L = block length in bytes)
// where streams B and C start from 0. The two shifts are carry-less multiplications (PCLMULQDQ) by
// constants derived at compile time below, followed by one crc32 to reduce the product mod P.
#include <nmmintrin.h>
#include <wmmintrin.h>

#include <algorithm>
#include <cstring>

#include "crc32c_internal.h"

namespace tfr {
namespace {

using crc32c_gf::x_pow_mod_p;

// Multiplier that shifts a CRC over `len` zero bytes, i.e. by x^(8*len). The reflected 32x32-bit
// carry-less product of crc and K represents crc*K*x (it lands one bit low in the 64-bit lane), and
// crc32(0, v) computes v*x^32 mod P, so K = x^(8*len - 33) gives crc*x^(8*len) mod P overall.
constexpr uint64_t shift_constant(size_t len) { return x_pow_mod_p(8 * uint64_t{len} - 33); }

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Consumes as many 3*kBlock-byte chunks from (p, n) as possible, three streams at a time.
template <size_t kBlock>
uint64_t crc_3way(uint64_t c, const uint8_t*& p, size_t& n) {
  static_assert(kBlock % 8 == 0, "blocks are whole 8-byte words");
  constexpr uint64_t kShift1 = shift_constant(kBlock), kShift2 = shift_constant(2 * kBlock);
  const __m128i k =
      _mm_set_epi64x(static_cast<long long>(kShift1), static_cast<long long>(kShift2));
  for (; n >= 3 * kBlock; p += 3 * kBlock, n -= 3 * kBlock) {
    uint64_t a = c, b = 0, d = 0;
    for (size_t i = 0; i < kBlock; i += 8) {
      a = _mm_crc32_u64(a, load64(p + i));
      b = _mm_crc32_u64(b, load64(p + kBlock + i));
      d = _mm_crc32_u64(d, load64(p + 2 * kBlock + i));
    }
    const __m128i ab = _mm_set_epi64x(static_cast<long long>(b), static_cast<long long>(a));
    const __m128i prod =
        _mm_xor_si128(_mm_clmulepi64_si128(ab, k, 0x00), _mm_clmulepi64_si128(ab, k, 0x11));
    c = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(prod))) ^ d;
  }
  return c;
}

// Extends the CRC register c (inverted, as the instruction keeps it) with n bytes, a word at a
// time, then the last few bytes.
inline uint32_t crc_words(uint64_t c, const uint8_t* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) c = _mm_crc32_u64(c, load64(p));
  auto c32 = static_cast<uint32_t>(c);
  if (n & 4) {
    uint32_t v;
    std::memcpy(&v, p, sizeof(v));
    c32 = _mm_crc32_u32(c32, v);
    p += 4;
  }
  if (n & 2) {
    uint16_t v;
    std::memcpy(&v, p, sizeof(v));
    c32 = _mm_crc32_u16(c32, v);
    p += 2;
  }
  if (n & 1) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

}  // namespace

uint32_t crc32c_sse42_extend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;

  if (n >= 8) {  // align p to 8 bytes so the word loads below never split a cache line
    const auto head = static_cast<size_t>(-reinterpret_cast<uintptr_t>(p) & 7);
    if (head & 1) {
      c = _mm_crc32_u8(static_cast<uint32_t>(c), *p);
      p += 1, n -= 1;
    }
    if (head & 2) {
      uint16_t v;
      std::memcpy(&v, p, sizeof(v));
      c = _mm_crc32_u16(static_cast<uint32_t>(c), v);
      p += 2, n -= 2;
    }
    if (head & 4) {
      uint32_t v;
      std::memcpy(&v, p, sizeof(v));
      c = _mm_crc32_u32(static_cast<uint32_t>(c), v);
      p += 4, n -= 4;
    }
  }

  // Long blocks make the merge cost negligible; the short ones keep mid-sized inputs 3-way too.
  c = crc_3way<8192>(c, p, n);
  c = crc_3way<256>(c, p, n);
  return ~crc_words(c, p, n);
}

void crc32c_sse42_many(const Crc32cSpan* spans, size_t n, uint32_t* out) {
  // Four buffers at a time, word by word in lockstep over the words all four have: four
  // independent dependency chains keep the crc32 unit busy (its latency is 3 cycles, its
  // throughput 1 per cycle). Each buffer's remaining bytes and any leftover buffers go the usual
  // way (short tails inline, so the four tails can still overlap), as do long buffers, which
  // crc32c_sse42_extend already splits into three streams.
  constexpr size_t kWays = 4;
  size_t i = 0;
  for (; i + kWays <= n; i += kWays) {
    const Crc32cSpan* s = spans + i;
    size_t common = s[0].size;
    for (size_t j = 1; j < kWays; ++j) common = std::min(common, s[j].size);
    if (common >= detail::kCrc32cShort) break;
    common &= ~size_t(7);
    uint64_t c0 = 0xffffffffu, c1 = 0xffffffffu, c2 = 0xffffffffu, c3 = 0xffffffffu;
    for (size_t k = 0; k < common; k += 8) {
      c0 = _mm_crc32_u64(c0, load64(s[0].data + k));
      c1 = _mm_crc32_u64(c1, load64(s[1].data + k));
      c2 = _mm_crc32_u64(c2, load64(s[2].data + k));
      c3 = _mm_crc32_u64(c3, load64(s[3].data + k));
    }
    const uint64_t c[kWays] = {c0, c1, c2, c3};
    if ((s[0].size | s[1].size | s[2].size | s[3].size) == common) {  // all of equal length
      for (size_t j = 0; j < kWays; ++j) out[i + j] = ~static_cast<uint32_t>(c[j]);
      continue;
    }
    for (size_t j = 0; j < kWays; ++j) {
      out[i + j] = ~crc_words(c[j], s[j].data + common, s[j].size - common);
    }
  }
  for (; i < n; ++i) out[i] = crc32c_sse42_extend(0, spans[i].data, spans[i].size);
}

}  // namespace tfr
