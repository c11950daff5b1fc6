// Picks the CRC32C backend once per process and forwards every call through a cached pointer.
#include "crc32c.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "crc32c_internal.h"
#include "portable.h"  // TFR_MSVC_INTRINSICS

#if (defined(TFREC_HAVE_SSE42_BACKEND) || defined(TFREC_HAVE_AVX512_BACKEND)) && \
    TFR_MSVC_INTRINSICS
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

constexpr unsigned kSse42 = 1u << 20, kPclmul = 1u << 1, kOsxsave = 1u << 27;  // leaf 1, ecx
constexpr unsigned kAvx512f = 1u << 16;                                       // leaf 7, ebx
constexpr unsigned kVpclmulqdq = 1u << 10;                                    // leaf 7, ecx

}  // namespace

bool cpu_has_sse42_pclmul() {
  unsigned r[4] = {0, 0, 0, 0};
  return cpuid(1, 0, r) && (r[2] & kSse42) != 0 && (r[2] & kPclmul) != 0;
}
#endif

#if defined(TFREC_HAVE_AVX512_BACKEND)
bool cpu_has_avx512_vpclmul() {
  unsigned r[4] = {0, 0, 0, 0};
  if (!cpu_has_sse42_pclmul() || !cpuid(1, 0, r) || (r[2] & kOsxsave) == 0) return false;
  // The OS must save XMM, YMM, opmask and both ZMM register halves (XCR0 bits 1, 2, 5, 6, 7).
  if ((xcr0() & 0xe6u) != 0xe6u) return false;
  return cpuid(7, 0, r) && (r[1] & kAvx512f) != 0 && (r[2] & kVpclmulqdq) != 0;
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

namespace {

using ExtendFn = uint32_t (*)(uint32_t, const void*, size_t);

struct Backend {
  const char* name;
  ExtendFn fn;
  ExtendFn short_fn;  // what fn itself would use below detail::kCrc32cShort bytes
};

constexpr Backend kPortable{"portable", crc32c_portable_extend, crc32c_portable_extend};

// Backends that are built in and supported by this CPU, most preferred first; portable is last.
const std::vector<Backend>& runnable_backends() {
  static const std::vector<Backend> backends = [] {
    std::vector<Backend> out;
#if defined(TFREC_HAVE_AVX512_BACKEND)
    if (cpu_has_avx512_vpclmul()) {
      out.push_back({"avx512", crc32c_avx512_extend, crc32c_sse42_extend});
    }
#endif
#if defined(TFREC_HAVE_SSE42_BACKEND)
    if (cpu_has_sse42_pclmul()) {
      out.push_back({"sse42", crc32c_sse42_extend, crc32c_sse42_extend});
    }
#endif
#if defined(TFREC_HAVE_ARM64_BACKEND)
    if (cpu_has_arm64_crc()) out.push_back({"arm64", crc32c_arm64_extend, crc32c_arm64_extend});
#endif
    out.push_back(kPortable);
    return out;
  }();
  return backends;
}

// Guards against a miscompiled or mis-detected fast backend (as leveldb does): compares it with the
// portable one on lengths and alignments that reach its head, tail, short- and long-block paths.
bool agrees_with_portable(ExtendFn fn) {
  constexpr size_t kRandom = 30000 + 64;
  constexpr size_t kLongest = 140000;  // past the avx512 backend's 128 KiB region groups
  std::vector<uint8_t> buf(kLongest + 64);
  uint32_t state = 0x12345678u;
  for (size_t i = 0; i < kRandom; ++i) {
    state = state * 1664525u + 1013904223u;
    buf[i] = static_cast<uint8_t>(state >> 24);
  }
  for (size_t i = kRandom; i < buf.size(); i += kRandom) {  // repeats are fine past the random part
    std::memcpy(&buf[i], buf.data(), std::min(kRandom, buf.size() - i));
  }
  const size_t lengths[] = {0,   1,   3,    7,    8,    9,     31,    100,
                            318, 319, 767, 768, 1000, 4095, 24576, 30000};
  for (size_t offset : {0, 1, 7, 63}) {
    for (size_t len : lengths) {
      const uint8_t* p = buf.data() + offset;
      if (fn(0x9e3779b9u, p, len) != crc32c_portable_extend(0x9e3779b9u, p, len)) return false;
    }
  }
  // Checked against two calls that each stay below the region groups, on paths the loop above has
  // covered: as strict as comparing with portable, which would take several times longer here.
  const uint8_t* p = buf.data() + 5;
  constexpr size_t kHalf = kLongest / 2;
  return fn(0x9e3779b9u, p, kLongest) == fn(fn(0x9e3779b9u, p, kHalf), p + kHalf, kLongest - kHalf);
}

// TFREC_FAST_CRC32C=<name> restricts the choice to that backend; if it is unavailable (or fails the
// self-check) the portable one is used ("auto" or empty: the fastest that checks out). The Python
// package warns about a value that names no backend.
Backend choose_backend() {
  const char* requested = std::getenv("TFREC_FAST_CRC32C");
  const bool forced =
      requested != nullptr && *requested != '\0' && std::strcmp(requested, "auto") != 0;
  for (const Backend& b : runnable_backends()) {
    if (forced && std::strcmp(requested, b.name) != 0) continue;
    if (b.fn == kPortable.fn || agrees_with_portable(b.fn)) return b;
  }
  return kPortable;
}

const Backend& active_backend() {
  static const Backend backend = choose_backend();
  return backend;
}

// The first call through either pointer lands here and installs the chosen backend. Two threads
// may both do so; they store the same values.
uint32_t resolve_short(uint32_t crc, const void* data, size_t n);
uint32_t resolve_long(uint32_t crc, const void* data, size_t n);

void install() {
  const Backend& b = active_backend();
  detail::crc32c_short.store(b.short_fn, std::memory_order_relaxed);
  detail::crc32c_long.store(b.fn, std::memory_order_relaxed);
}

uint32_t resolve_short(uint32_t crc, const void* data, size_t n) {
  install();
  return active_backend().short_fn(crc, data, n);
}

uint32_t resolve_long(uint32_t crc, const void* data, size_t n) {
  install();
  return active_backend().fn(crc, data, n);
}

}  // namespace

namespace detail {
std::atomic<Crc32cFn> crc32c_short{resolve_short};
std::atomic<Crc32cFn> crc32c_long{resolve_long};
}  // namespace detail

const char* crc32c_backend() { return active_backend().name; }

std::vector<std::string> crc32c_available_backends() {
  std::vector<std::string> names;
  for (const Backend& b : runnable_backends()) names.emplace_back(b.name);
  return names;
}

uint32_t crc32c_extend_with(const std::string& backend, uint32_t crc, const void* data, size_t n) {
  for (const Backend& b : runnable_backends()) {
    if (backend == b.name) return b.fn(crc, data, n);
  }
  throw std::invalid_argument("unknown or unavailable CRC32C backend: '" + backend + "'");
}

}  // namespace tfr
