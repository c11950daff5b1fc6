// Runs of protobuf varints decoded many at a time: the values of packed int64 lists, and of
// unpacked ones (a tag byte before each value). Each instruction set has a backend in a file of
// its own (AVX-512, AVX2, NEON, portable), chosen once per process by what the CPU can run, as
// the CRC32C backends are; TFREC_FAST_VARINT=<name> asks for one ("auto": the fastest).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tfr {

// What decode_varints returns for bytes that are not whole valid varints, or hold too many.
constexpr size_t kBadVarints = SIZE_MAX;

// Decodes the varints filling [p, end) into out[0, room), as protobuf reads int64 values (bits
// past the 64th dropped, an 11th byte an error) (decode_wide_varints: through the backend always).
// Returns how many, or kBadVarints when a varint is cut short or too long, or more than `room`
// values are there (out[0, room) may then have been written). Never reads outside [p, end).
size_t decode_wide_varints(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room);
inline size_t decode_varints(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room) {
  // A few one-byte values (labels, class ids), the usual short list: inline, no call.
  const size_t n = size_t(end - p);
  if (n <= 16 && n <= room) {
    size_t i = 0;
    for (; i < n && p[i] < 0x80; ++i) out[i] = p[i];
    if (i == n) return n;
  }
  return decode_wide_varints(p, end, out, room);
}

// Decodes the run of unpacked values at *p: [tag][varint] pairs, for as long as they come and
// are valid (at most `room` of them), into out; moves *p past them and returns how many. What
// follows the run (another field, a bad varint) is the caller's to read. Never reads outside
// [*p, end).
size_t decode_tagged_varints(const uint8_t** p, const uint8_t* end, uint8_t tag, uint64_t* out,
                             size_t room);

// The backend in use: "avx512", "avx2", "neon" or "portable".
const char* varint_backend();

// The backends this build and CPU can run, fastest first ("portable" last), for tests.
std::vector<std::string> varint_available_backends();

// decode_varints and decode_tagged_varints with the named backend (for tests). Throws
// std::invalid_argument if it is unknown or unavailable.
size_t decode_varints_with(const std::string& backend, const uint8_t* p, const uint8_t* end,
                           uint64_t* out, size_t room);
size_t decode_tagged_varints_with(const std::string& backend, const uint8_t** p, const uint8_t* end,
                                  uint8_t tag, uint64_t* out, size_t room);

}  // namespace tfr
