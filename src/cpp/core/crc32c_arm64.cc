// CRC32C with the ARMv8 CRC32 extension. Compiled with -march=armv8-a+crc on aarch64 only; the
// guard keeps the file an empty translation unit elsewhere.
#if defined(__aarch64__)

#include <arm_acle.h>

#include <cstring>

#include "crc32c_internal.h"
#include "portable.h"

namespace tfr {

uint32_t crc32c_arm64_extend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, sizeof(word));  // unaligned-safe load
#if defined(__AARCH64EB__)
    word = byteswap64(word);  // the instruction consumes the register's low byte first
#endif
    c = __crc32cd(c, word);
  }
  for (; n != 0; ++p, --n) c = __crc32cb(c, *p);
  return ~c;
}

}  // namespace tfr

#endif  // defined(__aarch64__)
