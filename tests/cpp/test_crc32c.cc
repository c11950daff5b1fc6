// Standalone tests for the CRC32C backends: known vectors, masking, and agreement between every
// available backend across lengths, alignments, split points and long buffers.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "crc32c.h"

namespace {

int g_passed = 0;
int g_failed = 0;

void check(bool ok, const std::string& what) {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    std::printf("FAIL: %s\n", what.c_str());
  }
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// Bit-at-a-time reference, independent of every backend's tables and instructions.
uint32_t reference_extend(uint32_t crc, const uint8_t* p, size_t n) {
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ ((c & 1) ? 0x82f63b78u : 0);
  }
  return ~c;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

void test_known_vectors(const std::string& backend) {
  struct Vector {
    const char* name;
    std::vector<uint8_t> data;
    uint32_t crc;
  };
  std::vector<Vector> vectors = {
      {"32 x 0x00", std::vector<uint8_t>(32, 0x00), 0x8a9136aau},
      {"32 x 0xff", std::vector<uint8_t>(32, 0xff), 0x62a8ab43u},
      {"0..31", {}, 0x46dd794eu},
      {"31..0", {}, 0x113fdb5cu},
      {"123456789", {'1', '2', '3', '4', '5', '6', '7', '8', '9'}, 0xe3069283u},
  };
  for (uint8_t i = 0; i < 32; ++i) {
    vectors[2].data.push_back(i);
    vectors[3].data.push_back(static_cast<uint8_t>(31 - i));
  }
  for (const Vector& v : vectors) {
    const uint32_t got = tfr::crc32c_extend_with(backend, 0, v.data.data(), v.data.size());
    check(got == v.crc, backend + " " + v.name + ": got " + hex(got) + " want " + hex(v.crc));
  }
  const uint8_t empty = 0;
  check(tfr::crc32c_extend_with(backend, 0, &empty, 0) == 0, backend + " empty input");
  check(tfr::crc32c_extend_with(backend, 0x1234abcdu, &empty, 0) == 0x1234abcdu,
        backend + " empty extension keeps the CRC");
}

void test_public_api() {
  const uint8_t digits[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  check(tfr::crc32c(digits, sizeof(digits)) == 0xe3069283u, "crc32c() on 123456789");

  const std::vector<std::string> backends = tfr::crc32c_available_backends();
  bool has_portable = false, has_active = false;
  for (const std::string& b : backends) {
    has_portable |= b == "portable";
    has_active |= b == tfr::crc32c_backend();
  }
  check(has_portable, "available backends include portable");
  check(has_active, std::string("active backend '") + tfr::crc32c_backend() + "' is available");

  for (const char* name : {"no-such-backend", "", "avx512", "sse42", "arm64"}) {
    bool available = false;
    for (const std::string& b : backends) available |= b == name;
    if (available) continue;
    bool threw = false;
    try {
      tfr::crc32c_extend_with(name, 0, digits, sizeof(digits));
    } catch (const std::invalid_argument&) {
      threw = true;
    }
    check(threw, std::string("crc32c_extend_with('") + name + "') throws invalid_argument");
  }
}

void test_mask() {
  std::mt19937 rng(7);
  bool ok = true;
  for (int i = 0; i < 100000; ++i) {
    const uint32_t crc = static_cast<uint32_t>(rng());
    ok &= tfr::crc32c_unmask(tfr::crc32c_mask(crc)) == crc;
    ok &= tfr::crc32c_mask(tfr::crc32c_unmask(crc)) == crc;
  }
  for (uint32_t crc : {0u, 1u, 0xffffffffu, 0xe3069283u}) {
    ok &= tfr::crc32c_unmask(tfr::crc32c_mask(crc)) == crc && tfr::crc32c_mask(crc) != crc;
  }
  check(ok, "mask/unmask round trip");
}

// Every length 0..4096 at every alignment 0..15. Each input sits at the very end of its own heap
// block so that AddressSanitizer catches any read past the end.
void test_lengths_and_alignments(const std::vector<std::string>& backends) {
  constexpr size_t kMaxLen = 4096;
  const std::vector<uint8_t> src = random_bytes(kMaxLen, 1);
  std::vector<uint32_t> expected(kMaxLen + 1);
  expected[0] = 0;
  for (size_t len = 1; len <= kMaxLen; ++len) {
    expected[len] = reference_extend(expected[len - 1], &src[len - 1], 1);
  }
  for (const std::string& backend : backends) {
    int failures = 0;
    for (size_t align = 0; align < 16; ++align) {
      for (size_t len = 0; len <= kMaxLen; ++len) {
        std::vector<uint8_t> buf(align + len);
        if (len != 0) std::memcpy(buf.data() + align, src.data(), len);
        if (tfr::crc32c_extend_with(backend, 0, buf.data() + align, len) != expected[len] &&
            ++failures <= 5) {
          std::printf("  %s mismatch: len %zu align %zu\n", backend.c_str(), len, align);
        }
      }
    }
    check(failures == 0, backend + " lengths 0..4096 x alignments 0..15 (" +
                             std::to_string(failures) + " mismatches)");
  }
}

void test_split_points(const std::vector<std::string>& backends) {
  const std::vector<uint8_t> buf = random_bytes(2048, 2);
  const uint32_t whole = reference_extend(0, buf.data(), buf.size());
  for (const std::string& backend : backends) {
    int failures = 0;
    for (size_t split = 0; split <= buf.size(); ++split) {
      const uint32_t head = tfr::crc32c_extend_with(backend, 0, buf.data(), split);
      const uint32_t all =
          tfr::crc32c_extend_with(backend, head, buf.data() + split, buf.size() - split);
      failures += all != whole;
    }
    check(failures == 0,
          backend + " every split point of 2 KiB (" + std::to_string(failures) + " mismatches)");
  }
}

// Lengths just around multiples of 32 KiB up to 320 KiB, where wide backends switch between block
// loops, at head sizes 0, 1, 56 and 63 bytes before a 64-byte boundary; checked against portable.
void test_block_boundaries(const std::vector<std::string>& backends) {
  constexpr size_t kMaxBase = size_t{320} << 10;
  const std::vector<uint8_t> buf = random_bytes(kMaxBase + 2048, 3);
  const uint8_t* aligned =
      buf.data() + (-reinterpret_cast<uintptr_t>(buf.data()) & 63);  // 64-byte boundary
  std::vector<size_t> lengths;
  for (size_t base = size_t{32} << 10; base <= kMaxBase; base += size_t{32} << 10) {
    for (size_t delta : {0, 1, 63, 64, 255, 256, 257, 319, 320, 383, 511, 512, 1000}) {
      lengths.push_back(base + delta);
      lengths.push_back(base - 1 - delta);
    }
  }
  for (const std::string& backend : backends) {
    if (backend == "portable") continue;
    int failures = 0;
    for (size_t len : lengths) {
      for (size_t offset : {0, 1, 8, 63}) {
        const uint8_t* p = aligned + offset;
        if (tfr::crc32c_extend_with(backend, 0x5a5a5a5au, p, len) !=
                tfr::crc32c_extend_with("portable", 0x5a5a5a5au, p, len) &&
            ++failures <= 5) {
          std::printf("  %s mismatch: len %zu offset %zu\n", backend.c_str(), len, offset);
        }
      }
    }
    check(failures == 0, backend + " lengths around 32 KiB multiples (" + std::to_string(failures) +
                             " mismatches)");
  }
}

void test_long_buffers(const std::vector<std::string>& backends) {
  for (size_t n : {size_t{1} << 20, (size_t{64} << 20) + 7}) {
    const std::vector<uint8_t> buf = random_bytes(n, static_cast<uint32_t>(n));
    const uint32_t want = tfr::crc32c_extend_with("portable", 0, buf.data(), n);
    check(reference_extend(0, buf.data(), std::min<size_t>(n, 1 << 20)) ==
              tfr::crc32c_extend_with("portable", 0, buf.data(), std::min<size_t>(n, 1 << 20)),
          "portable matches bitwise reference on 1 MiB");
    for (const std::string& backend : backends) {
      // Whole, from an odd offset, and in uneven chunks that cross every block boundary kind.
      check(tfr::crc32c_extend_with(backend, 0, buf.data(), n) == want,
            backend + " " + std::to_string(n) + " bytes");
      const uint32_t tail = tfr::crc32c_extend_with(backend, 0, buf.data() + 3, n - 3);
      check(tfr::crc32c_extend_with(backend, tfr::crc32c_extend_with(backend, 0, buf.data(), 3),
                                    buf.data() + 3, n - 3) == want &&
                tail == tfr::crc32c_extend_with("portable", 0, buf.data() + 3, n - 3),
            backend + " " + std::to_string(n) + " bytes from offset 3");
      uint32_t crc = 0;
      size_t chunk = 1;
      for (size_t pos = 0; pos < n; chunk = chunk * 3 + 1) {
        const size_t len = std::min(chunk, n - pos);
        crc = tfr::crc32c_extend_with(backend, crc, buf.data() + pos, len);
        pos += len;
      }
      check(crc == want, backend + " " + std::to_string(n) + " bytes in growing chunks");
    }
  }
}

// crc32c_many (the active backend's) against the reference, on groups of short buffers such as a
// reader checks at once: all of one length (a multiple of 8 or not), lengths that differ by a few
// words and bytes, empty ones, and lengths past the short-buffer limit; every group size 0..17.
void test_many() {
  const std::vector<uint8_t> buf = random_bytes(8192, 77);
  std::mt19937 rng(5);
  size_t failures = 0, groups = 0;
  for (int kind = 0; kind < 5; ++kind) {
    for (size_t count = 0; count <= 17; ++count) {
      for (int round = 0; round < 40; ++round, ++groups) {
        std::vector<tfr::Crc32cSpan> spans;
        const size_t one = rng() % 300;
        for (size_t k = 0; k < count; ++k) {
          size_t len = kind == 0   ? one                 // one length
                       : kind == 1 ? (one & ~size_t(7))  // one length, whole words
                       : kind == 2 ? 40 + rng() % 51     // small records of varying size
                       : kind == 3 ? rng() % 9           // empty and tiny
                                   : rng() % 700;        // some past the short limit
          spans.push_back({buf.data() + rng() % 4096, len});
        }
        std::vector<uint32_t> got(count + 1, 0xdeadbeefu);
        tfr::crc32c_many(spans.data(), count, got.data());
        for (size_t k = 0; k < count; ++k) {
          failures += got[k] != reference_extend(0, spans[k].data, spans[k].size);
        }
        failures += got[count] != 0xdeadbeefu;  // nothing written past the last
      }
    }
  }
  check(failures == 0, std::string(tfr::crc32c_backend()) + " crc32c_many on " +
                           std::to_string(groups) + " groups (" + std::to_string(failures) +
                           " mismatches)");
}

}  // namespace

int main() {
  const std::vector<std::string> backends = tfr::crc32c_available_backends();
  std::printf("active backend: %s; available:", tfr::crc32c_backend());
  for (const std::string& b : backends) std::printf(" %s", b.c_str());
  std::printf("\n");

  for (const std::string& b : backends) test_known_vectors(b);
  test_public_api();
  test_mask();
  test_lengths_and_alignments(backends);
  test_split_points(backends);
  test_block_boundaries(backends);
  test_long_buffers(backends);
  test_many();

  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
