// CRC32C (Castagnoli), as used by TFRecord framing, with run-time selection of a hardware backend.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tfr {

// One buffer of a crc32c_many() call.
struct Crc32cSpan {
  const uint8_t* data;
  size_t size;
};

namespace detail {
using Crc32cFn = uint32_t (*)(uint32_t, const void*, size_t);
using Crc32cManyFn = void (*)(const Crc32cSpan*, size_t, uint32_t*);
extern std::atomic<Crc32cManyFn> crc32c_many;
// The chosen backend's entry points, for short and for long buffers (wide-vector code does not pay
// off on a few bytes). Both start as a resolver that picks the backend on first use.
extern std::atomic<Crc32cFn> crc32c_short;
extern std::atomic<Crc32cFn> crc32c_long;
constexpr size_t kCrc32cShort = 256;
}  // namespace detail

// Extends the CRC32C `crc` of some prefix with the next `n` bytes. `crc` is the plain CRC value
// (start with 0), so crc32c_extend(crc32c_extend(0, a, na), b, nb) is the CRC of a followed by b.
// Inline so that the per-record checksums of small records cost one indirect call.
inline uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n) {
  const auto& fn = n < detail::kCrc32cShort ? detail::crc32c_short : detail::crc32c_long;
  return fn.load(std::memory_order_relaxed)(crc, data, n);
}

inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }

// out[i] = crc32c(spans[i]) for n buffers. On hardware backends short buffers are computed as
// interleaved independent streams, so the crc instruction's latency overlaps across buffers
// instead of adding up: what the headers and payloads of many small records need.
inline void crc32c_many(const Crc32cSpan* spans, size_t n, uint32_t* out) {
  detail::crc32c_many.load(std::memory_order_relaxed)(spans, n, out);
}

// TFRecord stores masked CRCs so that the CRC of data that itself contains CRCs stays well behaved.
inline uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t crc32c_unmask(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

// The backend crc32c_extend uses: "avx512", "sse42", "arm64" or "portable".
const char* crc32c_backend();

// The backends this build and CPU can run; always contains "portable".
std::vector<std::string> crc32c_available_backends();

// Runs the named backend (for tests and benchmarks). Throws std::invalid_argument if the name is
// unknown or the backend is not available.
uint32_t crc32c_extend_with(const std::string& backend, uint32_t crc, const void* data, size_t n);

}  // namespace tfr
