// The CPU probes of cpu_features.h: CPUID and XCR0 on x86-64, the auxiliary vector on Linux
// aarch64.
#include "cpu_features.h"

#include <cstdint>

#include "portable.h"  // TFR_MSVC_INTRINSICS

#if (defined(TFREC_HAVE_SSE42_BACKEND) || defined(TFREC_HAVE_AVX512_BACKEND)) && TFR_MSVC_INTRINSICS
#include <immintrin.h>
#include <intrin.h>
#elif defined(TFREC_HAVE_SSE42_BACKEND) || defined(TFREC_HAVE_AVX512_BACKEND)
#include <cpuid.h>
#endif
#if defined(TFREC_HAVE_ARM64_BACKEND) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace tfr {

#if defined(TFREC_HAVE_SSE42_BACKEND) || defined(TFREC_HAVE_AVX512_BACKEND)
namespace {

// CPUID leaf/subleaf -> eax, ebx, ecx, edx; false when the CPU has no such leaf.
bool cpuid(unsigned leaf, unsigned subleaf, unsigned regs[4]) {
#if TFR_MSVC_INTRINSICS
  int max[4], out[4];
  __cpuid(max, int(leaf & 0x80000000u));
  if (unsigned(max[0]) < leaf) return false;
  __cpuidex(out, int(leaf), int(subleaf));
  for (int i = 0; i < 4; ++i) regs[i] = unsigned(out[i]);
  return true;
#else
  return __get_cpuid_count(leaf, subleaf, &regs[0], &regs[1], &regs[2], &regs[3]) != 0;
#endif
}

// The register state the OS saves (XCR0); only read once CPUID says OSXSAVE.
uint64_t xcr0() {
#if TFR_MSVC_INTRINSICS
  return _xgetbv(0);
#else
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
#endif
}

constexpr unsigned kSse42 = 1u << 20, kPclmul = 1u << 1, kOsxsave = 1u << 27;   // leaf 1, ecx
constexpr unsigned kAvx2 = 1u << 5, kAvx512f = 1u << 16, kAvx512bw = 1u << 30;  // leaf 7, ebx
constexpr unsigned kVpclmulqdq = 1u << 10;                                      // leaf 7, ecx
constexpr uint64_t kYmmState = 0x6;                                             // XCR0: XMM and YMM
constexpr uint64_t kZmmState = 0xe6;  // XCR0: XMM, YMM, opmask and both ZMM register halves

// Whether the OS saves the register state `bits` of XCR0 on a context switch.
bool os_saves(uint64_t bits) {
  unsigned r[4] = {0, 0, 0, 0};
  return cpuid(1, 0, r) && (r[2] & kOsxsave) != 0 && (xcr0() & bits) == bits;
}

// Leaf 7's ebx and ecx (zero where the CPU has no leaf 7).
void leaf7(unsigned* ebx, unsigned* ecx) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!cpuid(7, 0, r)) r[1] = r[2] = 0;
  *ebx = r[1];
  *ecx = r[2];
}

}  // namespace

bool cpu_has_sse42_pclmul() {
  unsigned r[4] = {0, 0, 0, 0};
  return cpuid(1, 0, r) && (r[2] & kSse42) != 0 && (r[2] & kPclmul) != 0;
}

bool cpu_has_avx2() {
  unsigned ebx, ecx;
  leaf7(&ebx, &ecx);
  return (ebx & kAvx2) != 0 && os_saves(kYmmState);
}

bool cpu_has_avx512_vpclmul() {
  unsigned ebx, ecx;
  leaf7(&ebx, &ecx);
  return cpu_has_sse42_pclmul() && (ebx & kAvx512f) != 0 && (ecx & kVpclmulqdq) != 0 &&
         os_saves(kZmmState);
}

bool cpu_has_avx512bw() {
  unsigned ebx, ecx;
  leaf7(&ebx, &ecx);
  return (ebx & kAvx512f) != 0 && (ebx & kAvx512bw) != 0 && os_saves(kZmmState);
}
#endif

#if defined(TFREC_HAVE_ARM64_BACKEND)
bool cpu_has_arm64_crc() {
#if defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
#elif defined(__APPLE__)
  return true;  // every Apple arm64 CPU implements the CRC32 extension
#else
  return false;
#endif
}
#endif

}  // namespace tfr
