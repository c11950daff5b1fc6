// Compiler differences, written down once: byte order, byte swaps, bit width (GCC/Clang builtins,
// MSVC intrinsics).
#pragma once

#include <cstdint>

// cl.exe has no GCC builtins, only intrinsics (clang-cl has both and takes the builtins). MinGW
// declares the same intrinsics, so tools/cross_check.sh compiles this branch there as well
// (-DTFR_MSVC_INTRINSICS=1): the nearest check of MSVC's code there is without MSVC's headers.
#ifndef TFR_MSVC_INTRINSICS
#if defined(_MSC_VER) && !defined(__clang__)
#define TFR_MSVC_INTRINSICS 1
#else
#define TFR_MSVC_INTRINSICS 0
#endif
#endif

#if TFR_MSVC_INTRINSICS
#include <intrin.h>
#include <stdlib.h>
#endif

// Windows runs little-endian only; elsewhere the compiler says.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define TFR_BIG_ENDIAN 1
#else
#define TFR_BIG_ENDIAN 0
#endif

// Inlining hints for the per-byte paths of the Example decoder: the compiler's own choice leaves
// calls to small functions in loops that run a few times per value. COLD keeps error paths out of
// the hot code.
#if TFR_MSVC_INTRINSICS
#define TFR_INLINE __forceinline
#define TFR_COLD __declspec(noinline)
#elif defined(__GNUC__) || defined(__clang__)
#define TFR_INLINE inline __attribute__((always_inline))
#define TFR_COLD __attribute__((noinline, cold))
#else
#define TFR_INLINE inline
#define TFR_COLD
#endif

namespace tfr {

inline uint64_t byteswap64(uint64_t v) {
#if TFR_MSVC_INTRINSICS
  return _byteswap_uint64(v);
#else
  return __builtin_bswap64(v);
#endif
}

inline uint32_t byteswap32(uint32_t v) {
#if TFR_MSVC_INTRINSICS
  return _byteswap_ulong(v);
#else
  return __builtin_bswap32(v);
#endif
}

// Bits needed to write v (at least 1).
inline int bit_width64(uint64_t v) {
#if TFR_MSVC_INTRINSICS
  unsigned long top = 0;
  _BitScanReverse64(&top, v | 1);
  return int(top) + 1;
#else
  return 64 - __builtin_clzll(v | 1);
#endif
}

// The number of zero bits below the lowest set bit of v (64 for 0).
TFR_INLINE int trailing_zeros64(uint64_t v) {
  if (v == 0) return 64;
#if TFR_MSVC_INTRINSICS
  unsigned long low = 0;
  _BitScanForward64(&low, v);
  return int(low);
#else
  return __builtin_ctzll(v);
#endif
}

// Asks for the cache line holding p before it is read (a hint: it never faults).
inline void prefetch(const void* p) {
#if TFR_MSVC_INTRINSICS && defined(_M_ARM64)
  __prefetch(p);
#elif TFR_MSVC_INTRINSICS
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
#else
  __builtin_prefetch(p);
#endif
}

}  // namespace tfr
