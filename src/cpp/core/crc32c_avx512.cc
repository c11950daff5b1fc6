// CRC32C by carry-less folding with 512-bit VPCLMULQDQ. Compiled with -mavx512f -mvpclmulqdq
// -msse4.2 -mpclmul (x86-64 builds only); used only after a cpuid+xgetbv check.
//
// The crc32 instruction tops out at 8 bytes per cycle. Folding instead treats the input as 128-bit
// chunks: a chunk X = LO*x^64 + HI that starts D bytes before another chunk contributes X*x^(8D)
// there, which is congruent to LO*(x^(8D+64) mod P) + HI*(x^(8D) mod P): two carry-less products
// that fit in 128 bits and are XORed into that later chunk. Four 512-bit accumulators (16 chunks)
// advance 256 bytes per step; at the end they are folded into one chunk, which the crc32
// instruction reduces mod P. Short inputs, the unaligned head and the last < 16 bytes go through
// the SSE4.2 backend.
//
// Long inputs are first consumed in groups of kRegions separate regions, each folded by its own
// accumulator and then merged by folding over a region's length. The fold rate is the same, but
// from RAM a single sequential stream is limited by how far ahead the hardware prefetchers run
// (measured: even plain 512-bit loads of one stream read a 64 MiB buffer more slowly than the
// 3-stream crc32 code); eight concurrent streams keep many more cache lines in flight.
#include <immintrin.h>

#include "crc32c_internal.h"

// MSVC has no unroll pragma (and warns about one it does not know: an error with /WX).
#if defined(__GNUC__) || defined(__clang__)
#define TFREC_UNROLL_8 _Pragma("GCC unroll 8")
#else
#define TFREC_UNROLL_8
#endif

namespace tfr {
namespace {

// In a 128-bit lane, the reflected carry-less product of a 64-bit half A and a 32-bit K represents
// A*K*x^33 (bit m of the lane is x^(127-m)); so the multiplier for A*x^e is x^(e-33) mod P.
// Returns {low-half multiplier, high-half multiplier} for folding a chunk forward by `bytes`.
struct FoldConstants {
  long long lo, hi;
};
constexpr FoldConstants fold_constants(uint64_t bytes) {
  return {static_cast<long long>(crc32c_gf::x_pow_mod_p(8 * bytes + 64 - 33)),
          static_cast<long long>(crc32c_gf::x_pow_mod_p(8 * bytes - 33))};
}
constexpr FoldConstants kFold16 = fold_constants(16), kFold32 = fold_constants(32),
                        kFold48 = fold_constants(48), kFold64 = fold_constants(64),
                        kFold256 = fold_constants(256);

// 8 x 16 KiB measured best on a memory-bound 64 MiB buffer (4 regions, or 4-8 KiB ones, gained
// less); in cache the eight 64-byte fold chains are as fast as the interleaved loop below.
constexpr int kRegions = 8;
constexpr size_t kRegionLen = 16384;
constexpr size_t kGroupLen = kRegions * kRegionLen;
constexpr FoldConstants kFoldRegion = fold_constants(kRegionLen);

inline __m512i broadcast(FoldConstants k) { return _mm512_set4_epi64(k.hi, k.lo, k.hi, k.lo); }

// Returns fold(x) ^ y, where k holds the multipliers for the distance between x and y.
inline __m512i fold512(__m512i x, __m512i k, __m512i y) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                   _mm512_clmulepi64_epi128(x, k, 0x11), y, 0x96);
}

inline __m128i fold128(__m128i x, FoldConstants kc, __m128i y) {
  const __m128i k = _mm_set_epi64x(kc.hi, kc.lo);
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), y);
}

inline __m512i load512(const uint8_t* p) { return _mm512_loadu_si512(p); }

// The zero-masking form because GCC 12 warns (-Wmaybe-uninitialized) inside the plain extract.
template <int kLane>
__m128i lane(__m512i x) {
  return _mm512_maskz_extracti32x4_epi32(0xf, x, kLane);
}

// Consumes whole groups of kRegions regions from (p, n) while at least 256 bytes remain after
// them. x0 is the 64-byte block at p with everything before it (and the CRC preset) already folded
// in; the block at the new p is returned in the same form.
inline __m512i fold_regions(__m512i x0, const uint8_t*& p, size_t& n) {
  const __m512i k64 = broadcast(kFold64);
  const __m512i k_region = broadcast(kFoldRegion);
  for (; n >= kGroupLen + 256; p += kGroupLen, n -= kGroupLen) {
    __m512i x[kRegions];
    x[0] = x0;
    TFREC_UNROLL_8
    for (int r = 1; r < kRegions; ++r) x[r] = load512(p + r * kRegionLen);
    for (size_t i = 64; i < kRegionLen; i += 64) {
      TFREC_UNROLL_8
      for (int r = 0; r < kRegions; ++r) x[r] = fold512(x[r], k64, load512(p + r * kRegionLen + i));
    }
    // Each region's last block lies exactly kRegionLen bytes before the next region's.
    TFREC_UNROLL_8
    for (int r = 1; r < kRegions; ++r) x[r] = fold512(x[r - 1], k_region, x[r]);
    x0 = fold512(x[kRegions - 1], k64, load512(p + kGroupLen));
  }
  return x0;
}

// A full 256-byte block must remain after aligning the head; shorter inputs are also where the
// SSE4.2 backend is as fast anyway.
constexpr size_t kMinLength = 256 + 63;

}  // namespace

uint32_t crc32c_avx512_extend(uint32_t crc, const void* data, size_t n) {
  if (n < kMinLength) return crc32c_sse42_extend(crc, data, n);
  const auto* p = static_cast<const uint8_t*>(data);

  // Bring p to a 64-byte boundary so no vector load splits a cache line.
  const auto head = static_cast<size_t>(-reinterpret_cast<uintptr_t>(p) & 63);
  crc = crc32c_sse42_extend(crc, p, head);
  p += head, n -= head;

  // A CRC register preset to c equals a zero preset with c XORed into the first 32 message bits.
  const __m128i preset = _mm_cvtsi32_si128(static_cast<int>(~crc));
  __m512i x0 = _mm512_xor_si512(load512(p), _mm512_zextsi128_si512(preset));
  x0 = fold_regions(x0, p, n);
  __m512i x1 = load512(p + 64);
  __m512i x2 = load512(p + 128);
  __m512i x3 = load512(p + 192);
  p += 256, n -= 256;

  const __m512i k256 = broadcast(kFold256);
  for (; n >= 256; p += 256, n -= 256) {
    x0 = fold512(x0, k256, load512(p));
    x1 = fold512(x1, k256, load512(p + 64));
    x2 = fold512(x2, k256, load512(p + 128));
    x3 = fold512(x3, k256, load512(p + 192));
  }

  const __m512i k64 = broadcast(kFold64);
  x1 = fold512(x0, k64, x1);
  x2 = fold512(x1, k64, x2);
  x3 = fold512(x2, k64, x3);
  for (; n >= 64; p += 64, n -= 64) x3 = fold512(x3, k64, load512(p));

  // Lanes 0, 1 and 2 of x3 start 48, 32 and 16 bytes before lane 3.
  __m128i v = fold128(lane<0>(x3), kFold48, lane<3>(x3));
  v = fold128(lane<1>(x3), kFold32, v);
  v = fold128(lane<2>(x3), kFold16, v);
  for (; n >= 16; p += 16, n -= 16) {
    v = fold128(v, kFold16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }

  // crc32 over the 16 bytes of v from a zero register gives v*x^32 mod P: the CRC register value.
  const uint64_t reg = _mm_crc32_u64(_mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(v))),
                                     static_cast<uint64_t>(_mm_extract_epi64(v, 1)));
  return crc32c_sse42_extend(~static_cast<uint32_t>(reg), p, n);
}

}  // namespace tfr
