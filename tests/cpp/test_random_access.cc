// RandomAccessReader over a real file: records in any order with repeats, the index of a
// header scan, stale and foreign indexes, damaged payloads, out-of-range positions.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.h"
#include "errors.h"
#include "random_access.h"
#include "record_format.h"
#include "record_writer.h"
#include "sinks.h"

namespace {

using Bytes = std::vector<uint8_t>;

struct TempFile {
  std::string path;
  TempFile() {
    char name[] = "/tmp/tfrec_ra_XXXXXX";
    const int fd = mkstemp(name);
    if (fd < 0) throw std::runtime_error("mkstemp");
    close(fd);
    path = name;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

Bytes record(size_t i) {
  Bytes r(i * 37 % 5000);  // sizes from 0 to ~5 KB
  for (size_t k = 0; k < r.size(); ++k) r[k] = uint8_t(i * 31 + k);
  return r;
}

void write_file(const std::string& path, size_t n) {
  tfr::RecordWriter writer(std::make_unique<tfr::FileSink>(path), 1 << 16);
  for (size_t i = 0; i < n; ++i) {
    const Bytes r = record(i);
    writer.write(r.data(), r.size());
  }
  writer.close();
}

Bytes at(const tfr::RecordBatch& b, size_t k) {
  return Bytes(b.data.data() + b.offsets[k], b.data.data() + b.offsets[k + 1]);
}

void flip_byte(const std::string& path, long offset) {
  FILE* f = std::fopen(path.c_str(), "r+b");
  std::fseek(f, offset, SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, offset, SEEK_SET);
  std::fputc(c ^ 0x20, f);
  std::fclose(f);
}

TEST(reads_any_order_with_repeats) {
  TempFile file;
  write_file(file.path, 300);
  std::vector<int64_t> offsets, sizes;
  tfr::scan_index(file.path, &offsets, &sizes);
  CHECK(offsets.size() == 300);
  tfr::RandomAccessOptions options;
  for (uint64_t gap : {uint64_t(0), uint64_t(64) << 10}) {
    options.max_gap = gap;
    tfr::RandomAccessReader reader(file.path, offsets, sizes, options);
    const std::vector<int64_t> want = {299, 0, 5, 5, 150, 1, 298, 0};
    auto batch = reader.read(want.data(), want.size());
    CHECK(batch->size() == want.size());
    for (size_t k = 0; k < want.size() && k < batch->size(); ++k) {
      CHECK_MSG(at(*batch, k) == record(size_t(want[k])), "record " + std::to_string(want[k]));
      CHECK(batch->positions[k] == offsets[size_t(want[k])]);
    }
    Bytes one(reader.payload_size(42));
    reader.read_one(42, one.data());
    CHECK(one == record(42));
  }
}

TEST(out_of_range_position) {
  TempFile file;
  write_file(file.path, 3);
  std::vector<int64_t> offsets, sizes;
  tfr::scan_index(file.path, &offsets, &sizes);
  tfr::RandomAccessReader reader(file.path, offsets, sizes);
  const int64_t bad[] = {3};
  EXPECT_THROW(reader.read(bad, 1), std::out_of_range, [](const std::out_of_range&) {});
}

TEST(impossible_entries_are_refused) {
  TempFile file;
  write_file(file.path, 2);
  EXPECT_THROW(tfr::RandomAccessReader(file.path, {0, -5}, {16, 16}), std::invalid_argument,
               [](const std::invalid_argument&) {});
  EXPECT_THROW(tfr::RandomAccessReader(file.path, {0}, {15}), std::invalid_argument,
               [](const std::invalid_argument&) {});
}

TEST(stale_or_foreign_index_is_index_mismatch) {
  TempFile file, other;
  write_file(file.path, 50);
  write_file(other.path, 60);
  std::vector<int64_t> offsets, sizes;
  tfr::scan_index(other.path, &offsets, &sizes);  // the index of another file
  tfr::RandomAccessReader reader(file.path, offsets, sizes);
  const int64_t want[] = {55};
  EXPECT_THROW(reader.read(want, 1), tfr::DataLoss, [](const tfr::DataLoss& e) {
    CHECK(e.reason == tfr::LossReason::kIndexMismatch);
  });
  // An entry pointing into the middle of a record.
  std::vector<int64_t> shifted = {offsets[1] + 4};
  std::vector<int64_t> one_size = {sizes[1]};
  tfr::RandomAccessReader inside(file.path, shifted, one_size);
  const int64_t first[] = {0};
  EXPECT_THROW(inside.read(first, 1), tfr::DataLoss, [&](const tfr::DataLoss& e) {
    CHECK(e.reason == tfr::LossReason::kIndexMismatch);
    CHECK(e.record_index == 0 && e.offset == uint64_t(shifted[0]));
  });
}

TEST(damaged_payload_is_data_checksum) {
  TempFile file;
  write_file(file.path, 20);
  std::vector<int64_t> offsets, sizes;
  tfr::scan_index(file.path, &offsets, &sizes);
  flip_byte(file.path, long(offsets[7] + 12 + 3));
  tfr::RandomAccessReader reader(file.path, offsets, sizes);
  const int64_t fine[] = {6, 8};
  CHECK(reader.read(fine, 2)->size() == 2);
  const int64_t bad[] = {8, 7};
  EXPECT_THROW(reader.read(bad, 2), tfr::DataLoss, [&](const tfr::DataLoss& e) {
    CHECK(e.reason == tfr::LossReason::kDataChecksum);
    CHECK(e.record_index == 7 && e.offset == uint64_t(offsets[7]));
  });
}

TEST(index_text_round_trip) {
  const std::vector<int64_t> offsets = {0, 30, 1000};
  const std::vector<int64_t> sizes = {30, 970, 16};
  const std::string text = tfr::format_index(offsets.data(), sizes.data(), 3);
  CHECK(text == "0 30\n30 970\n1000 16\n");
}

}  // namespace

CHECK_MAIN
