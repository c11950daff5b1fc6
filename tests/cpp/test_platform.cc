// The platform layer (src/cpp/core/platform.h) on this OS: reads at offsets, the scatter read and
// the one-read-per-span version Windows and macOS before 11 use (they must agree byte for byte),
// offsets past 4 GiB, writes, and the errors for bad paths. Files go under $TMPDIR (or /tmp).
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.h"
#include "errors.h"
#include "platform.h"

namespace platform = tfr::platform;

namespace {

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/tfrec_platform_" + name;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& data) {
  const platform::File file = platform::create_write(path);
  platform::write_all(file, data.data(), data.size(), path);
  platform::sync(file, path);
  platform::close(file, path);
}

// An open file, closed at the end of the scope.
struct Open {
  explicit Open(const std::string& p)
      : path(p), file(platform::open_read(p, platform::Access::kSequential)) {}
  ~Open() { platform::close_quietly(file); }
  Open(const Open&) = delete;
  Open& operator=(const Open&) = delete;
  std::string path;
  platform::File file;
};

// The bytes a scatter read leaves in spans of `sizes` from `offset`, and the count it returns.
template <class Read>
std::pair<size_t, std::vector<uint8_t>> scatter(const std::vector<size_t>& sizes, uint64_t offset,
                                                Read read) {
  size_t total = 0;
  for (size_t s : sizes) total += s;
  std::vector<uint8_t> out(total, 0xEE);
  std::vector<platform::Span> spans;
  size_t at = 0;
  for (size_t s : sizes) {
    spans.push_back(platform::Span{out.data() + at, s});
    at += s;
  }
  const size_t got = read(spans.data(), spans.size(), offset);
  return {got, out};
}

TEST(write_then_read_in_order_and_at_offsets) {
  const std::string path = temp_path("rw");
  const std::vector<uint8_t> data = random_bytes(300000, 1);
  write_file(path, data);
  Open f(path);
  const platform::FileInfo info = platform::info(f.file, path);
  CHECK(info.regular);
  CHECK_EQ(info.size, uint64_t(data.size()));
  std::vector<uint8_t> back(data.size());
  size_t done = 0;
  while (done < back.size()) {
    const size_t got = platform::read(f.file, back.data() + done, back.size() - done, path);
    if (got == 0) break;
    done += got;
  }
  CHECK(back == data) << done << " bytes read in order";
  uint8_t four[4];
  CHECK_EQ(platform::read(f.file, four, 4, path), size_t(0)) << "at the end";
  CHECK_EQ(platform::read_at(f.file, four, 4, 1000, path), size_t(4));
  CHECK(std::equal(four, four + 4, data.begin() + 1000));
  CHECK_EQ(platform::read_at(f.file, four, 4, data.size(), path), size_t(0));
  CHECK_EQ(platform::read_at(f.file, four, 4, data.size() - 2, path), size_t(2));
  std::remove(path.c_str());
}

// Zero-size spans, spans across the end of the file, a file end between spans, more spans than
// one call takes (IOV_MAX), and long runs: the one-by-one reads fill exactly what preadv fills.
TEST(one_read_per_span_agrees_with_the_scatter_read) {
  const std::string path = temp_path("scatter");
  const std::vector<uint8_t> data = random_bytes(3 << 20, 2);
  write_file(path, data);
  Open f(path);
  std::vector<std::vector<size_t>> layouts = {{},
                                              {0},
                                              {12, 0, 100, 4},
                                              {1 << 20, 12, 1 << 20, 4},
                                              {3 << 20},
                                              {(3 << 20) + 7},
                                              {5, (3 << 20) - 5, 10},
                                              std::vector<size_t>(1000, 3000),
                                              std::vector<size_t>(3000, 16)};
  std::mt19937 rng(3);
  for (int k = 0; k < 40; ++k) {
    std::vector<size_t> sizes(1 + rng() % 60);
    for (auto& s : sizes) s = rng() % 4 == 0 ? rng() % 200000 : rng() % 64;
    layouts.push_back(sizes);
  }
  for (size_t li = 0; li < layouts.size(); ++li) {
    for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{4095}, uint64_t{(3 << 20) - 100},
                            uint64_t{3 << 20}, uint64_t{(3 << 20) + 5}}) {
      const auto want = scatter(layouts[li], offset, [&](platform::Span* s, size_t n, uint64_t o) {
        return platform::read_spans_at(f.file, s, n, o, path);
      });
      const auto got = scatter(layouts[li], offset, [&](platform::Span* s, size_t n, uint64_t o) {
        return platform::read_spans_one_by_one(f.file, s, n, o, path);
      });
      CHECK(got == want) << "layout " << li << " at " << offset;
      const size_t expect =
          offset >= data.size() ? 0 : std::min<size_t>(want.second.size(), data.size() - offset);
      CHECK_EQ(want.first, expect) << "layout " << li << " at " << offset;
      CHECK(expect == 0 || std::equal(want.second.begin(), want.second.begin() + long(expect),
                                      data.begin() + long(offset)))
          << "layout " << li << " at " << offset;
    }
  }
  std::remove(path.c_str());
}

// A sparse file: only its last bytes take disk space.
TEST(offsets_past_4_gib) {
  const std::string path = temp_path("sparse");
  const uint64_t far = (uint64_t{5} << 30) + 3;
  const std::vector<uint8_t> tail = random_bytes(100, 4);
  {
    std::ofstream out(path, std::ios::binary);
    out.seekp(std::streamoff(far));
    out.write(reinterpret_cast<const char*>(tail.data()), std::streamsize(tail.size()));
    REQUIRE(bool(out)) << "writing " << path;
  }
  Open f(path);
  CHECK_EQ(platform::info(f.file, path).size, far + tail.size());
  uint8_t got[100];
  CHECK_EQ(platform::read_at(f.file, got, 100, far, path), size_t(100));
  CHECK(std::equal(got, got + 100, tail.begin()));
  uint8_t a[50], b[60];
  platform::Span spans[2] = {{a, 50}, {b, 60}};
  CHECK_EQ(platform::read_spans_at(f.file, spans, 2, far, path), size_t(100));
  CHECK(std::equal(a, a + 50, tail.begin()) && std::equal(b, b + 50, tail.begin() + 50));
  platform::Span again[2] = {{a, 50}, {b, 60}};
  CHECK_EQ(platform::read_spans_one_by_one(f.file, again, 2, far, path), size_t(100));
  std::remove(path.c_str());
}

TEST(bad_paths) {
  const std::string missing = temp_path("no such file");
  const auto io =
      check::thrown<tfr::IoError>([&] { platform::open_read(missing, platform::Access::kRandom); });
  REQUIRE(io.has_value());
  CHECK_EQ(io->err, ENOENT);
  CHECK(std::string(io->what()).find(missing) != std::string::npos) << io->what();
  const auto nul = check::thrown<std::invalid_argument>([&] {
    platform::open_read(missing + std::string(1, '\0') + "x", platform::Access::kRandom);
  });
  CHECK(nul.has_value()) << "a NUL in the path";
  CHECK(check::thrown<std::invalid_argument>([&] {
          platform::create_write(missing + std::string(1, '\0'));
        }).has_value());
  const auto no_dir =
      check::thrown<tfr::IoError>([&] { platform::create_write(temp_path("no such dir") + "/x"); });
  REQUIRE(no_dir.has_value());
  CHECK_EQ(no_dir->err, ENOENT);
}

}  // namespace

RUN_ALL_TESTS()
