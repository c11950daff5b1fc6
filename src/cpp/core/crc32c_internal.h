// Backends behind the crc32c.h dispatcher, plus the polynomial arithmetic the hardware backends
// use to derive their constants at compile time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu_features.h"
#include "crc32c.h"

namespace tfr {

// Each backend has crc32c_extend's contract: plain running CRC in (start 0), plain CRC out.
uint32_t crc32c_portable_extend(uint32_t crc, const void* data, size_t n);

// Defined only in builds with TFREC_HAVE_SSE42_BACKEND (x86-64); needs SSE4.2 and PCLMULQDQ
// (cpu_features.h says which backends this CPU can run).
uint32_t crc32c_sse42_extend(uint32_t crc, const void* data, size_t n);
void crc32c_sse42_many(const Crc32cSpan* spans, size_t n, uint32_t* out);

// Defined only in builds with TFREC_HAVE_AVX512_BACKEND (x86-64); needs the SSE4.2 backend's
// features plus AVX-512F and VPCLMULQDQ with ZMM state enabled by the OS.
uint32_t crc32c_avx512_extend(uint32_t crc, const void* data, size_t n);

// Defined only in builds with TFREC_HAVE_ARM64_BACKEND (aarch64); needs the ARMv8 CRC32 extension.
uint32_t crc32c_arm64_extend(uint32_t crc, const void* data, size_t n);

// GF(2)[x] arithmetic modulo the Castagnoli polynomial P in the bit-reflected representation of CRC
// registers and the crc32 instruction: bit 31 holds the coefficient of x^0, bit 0 that of x^31.
namespace crc32c_gf {

constexpr uint32_t kPoly = 0x82f63b78u;

constexpr uint32_t mul_x(uint32_t a) { return (a >> 1) ^ ((a & 1) ? kPoly : 0); }

constexpr uint32_t mul_mod_p(uint32_t a, uint32_t b) {
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) {  // Horner's rule over a, from x^31 (bit 0) down to x^0
    r = mul_x(r);
    if ((a >> i) & 1) r ^= b;
  }
  return r;
}

constexpr uint32_t x_pow_mod_p(uint64_t e) {
  uint32_t result = 0x80000000u;  // x^0
  uint32_t base = 0x40000000u;    // x^1
  for (; e != 0; e >>= 1) {
    if (e & 1) result = mul_mod_p(result, base);
    base = mul_mod_p(base, base);
  }
  return result;
}

// x^32 = P - x^32 (mod P), the polynomial's low 32 terms: checks representation and exponentiation.
static_assert(x_pow_mod_p(32) == kPoly, "x^32 mod P must be the reflected polynomial");

}  // namespace crc32c_gf
}  // namespace tfr
