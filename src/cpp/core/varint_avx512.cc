// Varints with AVX-512 (F and BW): 64 bytes at a time. Compiled with AVX-512 enabled (x86-64
// only; the guard keeps the file an empty translation unit elsewhere); called only where
// cpu_has_avx512bw().
#if defined(__x86_64__) || defined(_M_X64)

#include <immintrin.h>

#include "varint_internal.h"

namespace tfr::varints {
namespace {

// Eight one-byte values at p, widened to int64s at out. (The zero-masked form with every lane
// kept: GCC 12's _mm512_cvtepu8_epi64 trips its own -Wmaybe-uninitialized.)
inline void widen8(const uint8_t* p, uint64_t* out) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  _mm512_storeu_si512(out, _mm512_maskz_cvtepu8_epi64(0xff, bytes));
}

}  // namespace

size_t decode_avx512(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room) {
  size_t n = 0;
  // A block writes at most one value per byte: 64 values of room is enough for any of them.
  while (end - p >= 64 && room - n >= 64) {
    const __m512i bytes = _mm512_loadu_si512(p);
    const uint64_t cont = _mm512_movepi8_mask(bytes);
    if (cont == 0) {  // 64 one-byte values
      for (int i = 0; i < 64; i += 8) widen8(p + i, out + n + i);
      n += 64;
      p += 64;
      continue;
    }
    const unsigned s = varints_in_block(p, cont, 56, out, &n);
    p += s;
    if (s <= 56 && !read_varint(p, end, out + n++)) return kBadVarints;  // 9 or 10 bytes
  }
  const size_t rest = decode_portable(p, end, out + n, room - n);
  return rest == kBadVarints ? kBadVarints : n + rest;
}

}  // namespace tfr::varints

#endif
