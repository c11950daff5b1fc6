// Varints with AVX2: 32 bytes at a time. Compiled with AVX2 enabled (x86-64 only; the guard
// keeps the file an empty translation unit elsewhere); called only where cpu_has_avx2().
#if defined(__x86_64__) || defined(_M_X64)

#include <immintrin.h>

#include "varint_internal.h"

namespace tfr::varints {
namespace {

// Eight one-byte values at p, widened to int64s at out.
inline void widen8(const uint8_t* p, uint64_t* out) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_cvtepu8_epi64(bytes));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4),
                      _mm256_cvtepu8_epi64(_mm_srli_si128(bytes, 4)));
}

}  // namespace

size_t decode_avx2(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room) {
  size_t n = 0;
  // A block writes at most one value per byte: 32 values of room is enough for any of them.
  while (end - p >= 32 && room - n >= 32) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const uint64_t cont = uint32_t(_mm256_movemask_epi8(bytes));
    if (cont == 0) {  // 32 one-byte values
      for (int i = 0; i < 32; i += 8) widen8(p + i, out + n + i);
      n += 32;
      p += 32;
      continue;
    }
    const unsigned s = varints_in_block(p, cont, 24, out, &n);
    p += s;
    if (s <= 24 && !read_varint(p, end, out + n++)) return kBadVarints;  // 9 or 10 bytes
  }
  const size_t rest = decode_portable(p, end, out + n, room - n);
  return rest == kBadVarints ? kBadVarints : n + rest;
}

size_t tagged_avx2(const uint8_t** at, const uint8_t* end, uint8_t tag, uint64_t* out,
                   size_t room) {
  const uint8_t* p = *at;
  size_t n = 0;
  const __m256i tags = _mm256_set1_epi8(char(tag));
  // The odd bytes (the values) of each 16-byte lane, to the lane's low 8 bytes.
  const __m256i odd = _mm256_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1, 1,
                                       3, 5, 7, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1);
  while (end - p >= 32 && room - n >= 16) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const uint32_t is_tag = uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(bytes, tags)));
    const uint32_t high = uint32_t(_mm256_movemask_epi8(bytes));
    if ((is_tag & 0x55555555u) == 0x55555555u && (high & 0xaaaaaaaau) == 0) {
      // 16 pairs of [tag][one-byte value]
      const __m256i values = _mm256_shuffle_epi8(bytes, odd);
      const __m128i low = _mm256_castsi256_si128(values),
                    upper = _mm256_extracti128_si256(values, 1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + n), _mm256_cvtepu8_epi64(low));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + n + 4),
                          _mm256_cvtepu8_epi64(_mm_srli_si128(low, 4)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + n + 8), _mm256_cvtepu8_epi64(upper));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + n + 12),
                          _mm256_cvtepu8_epi64(_mm_srli_si128(upper, 4)));
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
