// Picks the CRC32C backend once per process and forwards every call through a cached pointer.
#include "crc32c.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "crc32c_internal.h"

namespace tfr {

namespace {

using ExtendFn = uint32_t (*)(uint32_t, const void*, size_t);

using ManyFn = detail::Crc32cManyFn;

// crc32c_many for backends without an interleaved version: one buffer after the other.
template <ExtendFn kExtend>
void many_in_turn(const Crc32cSpan* spans, size_t n, uint32_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = kExtend(0, spans[i].data, spans[i].size);
}

struct Backend {
  const char* name;
  ExtendFn fn;
  ExtendFn short_fn;  // what fn itself would use below detail::kCrc32cShort bytes
  ManyFn many;
};

constexpr Backend kPortable{"portable", crc32c_portable_extend, crc32c_portable_extend,
                            many_in_turn<crc32c_portable_extend>};

// Backends that are built in and supported by this CPU, most preferred first; portable is last.
const std::vector<Backend>& runnable_backends() {
  static const std::vector<Backend> backends = [] {
    std::vector<Backend> out;
#if defined(TFREC_HAVE_AVX512_BACKEND)
    if (cpu_has_avx512_vpclmul()) {
      out.push_back({"avx512", crc32c_avx512_extend, crc32c_sse42_extend, crc32c_sse42_many});
    }
#endif
#if defined(TFREC_HAVE_SSE42_BACKEND)
    if (cpu_has_sse42_pclmul()) {
      out.push_back({"sse42", crc32c_sse42_extend, crc32c_sse42_extend, crc32c_sse42_many});
    }
#endif
#if defined(TFREC_HAVE_ARM64_BACKEND)
    if (cpu_has_arm64_crc()) {
      out.push_back(
          {"arm64", crc32c_arm64_extend, crc32c_arm64_extend, many_in_turn<crc32c_arm64_extend>});
    }
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
  const size_t lengths[] = {0,   1,   3,   7,   8,    9,    31,    100,
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

// The backend's crc32c_many against its own single-buffer CRCs, on buffers of every length up to
// past the short limit, in groups that share a common prefix and groups that do not.
bool many_agrees(const Backend& b) {
  constexpr size_t kCount = 2 * detail::kCrc32cShort + 8;
  std::vector<uint8_t> buf(detail::kCrc32cShort + 64);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 131 + 7);
  std::vector<Crc32cSpan> spans;
  for (size_t i = 0; i < kCount; ++i) {
    const size_t len = i < kCount / 2 ? i : (i * 37) % (detail::kCrc32cShort + 9);
    spans.push_back({buf.data() + i % 13, len});
  }
  std::vector<uint32_t> got(spans.size());
  b.many(spans.data(), spans.size(), got.data());
  for (size_t i = 0; i < spans.size(); ++i) {
    if (got[i] != b.fn(0, spans[i].data, spans[i].size)) return false;
  }
  return true;
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
    if (b.fn == kPortable.fn || (agrees_with_portable(b.fn) && many_agrees(b))) return b;
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
  detail::crc32c_many.store(b.many, std::memory_order_relaxed);
}

void resolve_many(const Crc32cSpan* spans, size_t n, uint32_t* out) {
  install();
  active_backend().many(spans, n, out);
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
std::atomic<Crc32cManyFn> crc32c_many{resolve_many};
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
