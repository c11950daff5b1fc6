// The TFRecord framing, written down once; the reader, the writer and the index share it.
//
//   u64  length              little-endian
//   u32  masked_crc32c(the 8 length bytes)
//   u8   data[length]
//   u32  masked_crc32c(data)
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "portable.h"

namespace tfr {

constexpr size_t kHeaderSize = 12;  // length + length CRC
constexpr size_t kFooterSize = 4;   // data CRC
constexpr size_t kFramingSize = kHeaderSize + kFooterSize;

// Unaligned little-endian loads as single instructions (memcpy), swapped on big-endian hosts.
inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
#if TFR_BIG_ENDIAN
  v = byteswap64(v);
#endif
  return v;
}

inline uint32_t load_le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
#if TFR_BIG_ENDIAN
  v = byteswap32(v);
#endif
  return v;
}

inline void store_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}

inline void store_le32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}

}  // namespace tfr
