// The varint backends (varint_decode.h), each one this CPU can run, against a plain decoder: runs
// of varints of every length (1 to 10 bytes, values with their top bits set), at every alignment
// and length (so that every block size meets every boundary), with too little room, cut short,
// overlong, and unpacked runs broken by other bytes. Each input sits in a heap block of exactly
// its size, so AddressSanitizer sees any read past its end.
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "varint_decode.h"

namespace {

void put_varint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out.push_back(uint8_t(v));
}

// The plain decoder the backends are held to: protobuf's int64 reading, one byte at a time.
size_t reference(const uint8_t* p, const uint8_t* end, uint64_t* out, size_t room) {
  size_t n = 0;
  while (p < end) {
    uint64_t value = 0;
    int i = 0;
    for (;; ++i) {
      if (i == 10 || p + i >= end) return tfr::kBadVarints;
      value |= uint64_t(p[i] & 0x7f) << (7 * i);
      if (p[i] < 0x80) break;
    }
    if (n == room) return tfr::kBadVarints;
    out[n++] = value;
    p += i + 1;
  }
  return n;
}

// A value whose varint is `bytes` long (1..10), random below that.
uint64_t value_of_length(std::mt19937_64& rng, int bytes) {
  if (bytes == 10) return rng() | (uint64_t(1) << 63);
  const uint64_t low = bytes == 1 ? 0 : uint64_t(1) << (7 * (bytes - 1));
  return low + rng() % ((uint64_t(1) << (7 * bytes)) - low);
}

// The bytes copied into a block of exactly their size.
std::unique_ptr<uint8_t[]> exact(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<uint8_t[]> block(new uint8_t[std::max<size_t>(bytes.size(), 1)]);
  if (!bytes.empty()) std::memcpy(block.get(), bytes.data(), bytes.size());
  return block;
}

// Mostly one-byte values (long runs, as token ids below 128 and labels are), some of every length.
std::vector<uint8_t> mixed_varints(std::mt19937_64& rng, size_t count) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < count; ++i) {
    const int len = rng() % 4 == 0 ? 1 + int(rng() % 10) : 1;
    put_varint(out, value_of_length(rng, len));
  }
  return out;
}

}  // namespace

TEST(the_active_backend_is_one_of_those_available) {
  const std::vector<std::string> names = tfr::varint_available_backends();
  REQUIRE(!names.empty());
  CHECK_EQ(names.back(), std::string("portable"));
  bool found = false;
  for (const std::string& name : names) found = found || name == tfr::varint_backend();
  CHECK(found) << tfr::varint_backend();
  CHECK(check::thrown<std::invalid_argument>([] {
    uint64_t out[1];
    tfr::decode_varints_with("no-such-backend", nullptr, nullptr, out, 1);
  }));
}

TEST(every_backend_decodes_as_protobuf_does) {
  std::mt19937_64 rng(5);
  for (const std::string& backend : tfr::varint_available_backends()) {
    for (int round = 0; round < 300; ++round) {
      const std::vector<uint8_t> bytes = mixed_varints(rng, rng() % 200);
      const auto block = exact(bytes);
      for (size_t from = 0; from < std::min<size_t>(bytes.size(), 9); ++from) {
        const uint8_t* p = block.get() + from;
        const uint8_t* end = block.get() + bytes.size();
        std::vector<uint64_t> want(bytes.size() + 1), got(bytes.size() + 1);
        const size_t n = reference(p, end, want.data(), want.size());
        const size_t m = tfr::decode_varints_with(backend, p, end, got.data(), got.size());
        REQUIRE_EQ(m, n) << backend << " round " << round << " from " << from;
        // The entry point (inline for short runs, then the chosen backend) agrees too.
        std::vector<uint64_t> front(bytes.size() + 1);
        CHECK_EQ(tfr::decode_varints(p, end, front.data(), front.size()), n);
        CHECK(n == tfr::kBadVarints || std::memcmp(want.data(), front.data(), n * 8) == 0);
        CHECK(n == tfr::kBadVarints || std::memcmp(want.data(), got.data(), n * 8) == 0) << backend;
        if (n == tfr::kBadVarints || n == 0) continue;
        // Room for exactly the values; one less is refused, without writing past the room.
        std::vector<uint64_t> tight(n + 4, 0x5a5a5a5a5a5a5a5aull);
        CHECK_EQ(tfr::decode_varints_with(backend, p, end, tight.data(), n), n) << backend;
        CHECK(std::memcmp(want.data(), tight.data(), n * 8) == 0) << backend;
        std::fill(tight.begin(), tight.end(), 0x5a5a5a5a5a5a5a5aull);
        CHECK_EQ(tfr::decode_varints_with(backend, p, end, tight.data(), n - 1), tfr::kBadVarints)
            << backend;
        for (size_t i = n - 1; i < tight.size(); ++i) {
          CHECK_EQ(tight[i], 0x5a5a5a5a5a5a5a5aull) << backend << ": wrote past the room at " << i;
        }
      }
    }
  }
}

TEST(long_runs_of_one_byte_values_at_every_length) {
  for (const std::string& backend : tfr::varint_available_backends()) {
    for (size_t size = 0; size < 300; ++size) {
      std::vector<uint8_t> bytes(size);
      for (size_t i = 0; i < size; ++i) bytes[i] = uint8_t((i * 37) % 128);
      if (size > 70) bytes[size - 70] = 0x81;  // a two-byte value late in the run
      const auto block = exact(bytes);
      std::vector<uint64_t> want(size + 1), got(size + 1);
      const size_t n = reference(block.get(), block.get() + size, want.data(), want.size());
      REQUIRE_EQ(tfr::decode_varints_with(backend, block.get(), block.get() + size, got.data(),
                                          got.size()),
                 n)
          << backend << " size " << size;
      CHECK(std::memcmp(want.data(), got.data(), n * 8) == 0) << backend << " size " << size;
    }
  }
}

TEST(cut_short_and_overlong_varints_are_refused) {
  for (const std::string& backend : tfr::varint_available_backends()) {
    for (size_t lead = 0; lead < 70; lead += 7) {
      std::vector<uint8_t> ok(lead, 1);
      for (const std::vector<uint8_t>& tail :
           {std::vector<uint8_t>{0x80}, std::vector<uint8_t>(9, 0xff),
            std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                 0x01}}) {
        std::vector<uint8_t> bytes = ok;
        bytes.insert(bytes.end(), tail.begin(), tail.end());
        const auto block = exact(bytes);
        std::vector<uint64_t> out(bytes.size() + 1);
        CHECK_EQ(tfr::decode_varints_with(backend, block.get(), block.get() + bytes.size(),
                                          out.data(), out.size()),
                 tfr::kBadVarints)
            << backend << " lead " << lead << " tail " << tail.size();
        if (tail.size() == 11) {  // the same followed by more: still refused
          bytes.insert(bytes.end(), 40, 3);
          const auto longer = exact(bytes);
          out.resize(bytes.size() + 1);
          CHECK_EQ(tfr::decode_varints_with(backend, longer.get(), longer.get() + bytes.size(),
                                            out.data(), out.size()),
                   tfr::kBadVarints)
              << backend;
        }
      }
    }
    // The largest values: ten bytes, bits past the 64th dropped as protobuf does.
    const std::vector<uint8_t> big = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    const auto block = exact(big);
    uint64_t v = 0;
    CHECK_EQ(tfr::decode_varints_with(backend, block.get(), block.get() + big.size(), &v, 1), 1u);
    CHECK_EQ(v, ~uint64_t(0)) << backend;
  }
}

TEST(unpacked_runs_stop_where_the_pairs_do) {
  std::mt19937_64 rng(9);
  for (const std::string& backend : tfr::varint_available_backends()) {
    for (int round = 0; round < 400; ++round) {
      std::vector<uint8_t> bytes;
      std::vector<uint64_t> values;
      const size_t pairs = rng() % 80;
      for (size_t i = 0; i < pairs; ++i) {
        bytes.push_back(8);
        values.push_back(value_of_length(rng, rng() % 6 == 0 ? 1 + int(rng() % 10) : 1));
        put_varint(bytes, values.back());
      }
      switch (rng() % 4) {  // what ends the run
        case 0:
          break;  // the end
        case 1:
          bytes.insert(bytes.end(), {0x10, 1});
          break;  // another field
        case 2:
          bytes.insert(bytes.end(), {8, 0x80});
          break;  // a value cut short
        case 3:
          bytes.insert(bytes.end(),
                       {8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 8, 1});
      }
      const auto block = exact(bytes);
      for (size_t room : {pairs, pairs + 3, pairs / 2}) {
        std::vector<uint64_t> got(room + 1);
        const uint8_t* p = block.get();
        const size_t n = tfr::decode_tagged_varints_with(backend, &p, block.get() + bytes.size(), 8,
                                                         got.data(), room);
        const size_t want = std::min(pairs, room);
        REQUIRE_EQ(n, want) << backend << " round " << round << " room " << room;
        CHECK(n == 0 || std::memcmp(got.data(), values.data(), n * 8) == 0) << backend;
        // *p is just past the n-th pair
        const uint8_t* q = block.get();
        for (size_t i = 0; i < n; ++i) {
          ++q;
          while (*q >= 0x80) ++q;
          ++q;
        }
        CHECK(p == q) << backend << " round " << round;
      }
    }
  }
}

RUN_ALL_TESTS()
