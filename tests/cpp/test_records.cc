// The record writer and reader, in memory (in the style of leveldb's log_test and TensorFlow's
// record_reader_writer_test): round trips over sizes around every buffer size, damage at each
// field of a record, truncation at every byte, compressed streams cut or corrupted.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "crc32c.h"
#include "errors.h"
#include "record_format.h"
#include "record_reader.h"
#include "record_writer.h"
#include "sinks.h"
#include "sources.h"

namespace {

using tfr::Compression;
using tfr::DataLoss;
using tfr::LossReason;
using Bytes = std::vector<uint8_t>;

// Collects what the writer pushes.
class VectorSink final : public tfr::Sink {
 public:
  explicit VectorSink(Bytes* out) : Sink("<vector>"), out_(out) {}
  void write(const uint8_t* data, size_t n) override { out_->insert(out_->end(), data, data + n); }
  void flush(bool) override {}
  void close() override {}

 private:
  Bytes* out_;
};

Bytes payload(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes out(n);
  for (uint8_t& b : out) b = uint8_t(rng());
  return out;
}

Bytes write_all(const std::vector<Bytes>& records, Compression compression = Compression::kNone,
                size_t buffer_size = 1 << 16) {
  Bytes out;
  tfr::RecordWriter writer(tfr::maybe_deflate(std::make_unique<VectorSink>(&out), compression, -1),
                           buffer_size);
  for (const Bytes& r : records) writer.write(r.data(), r.size());
  writer.close();
  return out;
}

std::unique_ptr<tfr::RecordReader> reader_over(const Bytes& data,
                                               Compression compression = Compression::kNone,
                                               size_t buffer_size = 1 << 16) {
  tfr::ReaderOptions options;
  options.buffer_size = buffer_size;
  auto source = std::make_unique<tfr::MemorySource>(data.data(), data.size());
  return std::make_unique<tfr::RecordReader>(tfr::maybe_inflate(std::move(source), compression),
                                             options);
}

// Every record until the end, one batch call at a time (at most `per_batch` records each).
std::vector<Bytes> read_all(tfr::RecordReader& reader, size_t per_batch = 3) {
  std::vector<Bytes> out;
  for (;;) {
    auto batch = reader.read_batch(per_batch, size_t(1) << 30);
    if (batch->size() == 0) return out;
    for (size_t i = 0; i < batch->size(); ++i) {
      const uint8_t* start = batch->data.data() + batch->offsets[i];
      out.emplace_back(start, start + (batch->offsets[i + 1] - batch->offsets[i]));
    }
  }
}

std::vector<Bytes> sample_records() {
  std::vector<Bytes> records;
  const size_t sizes[] = {0, 1, 11, 12, 13, 100, 4095, 4096, 4097, 32767, 32768, 65535, 65536,
                          65537, (1 << 20) + 3, 0, 7};
  uint32_t seed = 1;
  for (size_t n : sizes) records.push_back(payload(n, seed++));
  return records;
}

TEST(round_trip_every_buffer_size_and_compression) {
  const auto records = sample_records();
  for (Compression c : {Compression::kNone, Compression::kGzip, Compression::kZlib}) {
    for (size_t write_buffer : {size_t(16), size_t(4096), size_t(1) << 16, size_t(1) << 20}) {
      const Bytes file = write_all(records, c, write_buffer);
      for (size_t read_buffer : {size_t(16), size_t(4096), size_t(1) << 20}) {
        auto reader = reader_over(file, c, read_buffer);
        const auto back = read_all(*reader);
        CHECK_MSG(back == records, "round trip, compression " + std::to_string(int(c)) +
                                       ", buffers " + std::to_string(write_buffer) + "/" +
                                       std::to_string(read_buffer));
        CHECK(reader->records_read() == records.size());
      }
    }
  }
}

TEST(framing_is_tensorflows) {
  const Bytes file = write_all({Bytes{'a', 'b', 'c'}});
  CHECK(file.size() == 3 + tfr::kFramingSize);
  CHECK(tfr::load_le64(file.data()) == 3);
  CHECK(tfr::load_le32(file.data() + 8) == tfr::crc32c_mask(tfr::crc32c(file.data(), 8)));
  CHECK(tfr::load_le32(file.data() + 15) ==
        tfr::crc32c_mask(tfr::crc32c(file.data() + 12, 3)));
}

TEST(count_and_scan_agree_with_the_records) {
  const auto records = sample_records();
  const Bytes file = write_all(records);
  CHECK(reader_over(file)->count() == records.size());
  std::vector<int64_t> offsets, sizes;
  reader_over(file)->scan(&offsets, &sizes);
  CHECK(offsets.size() == records.size());
  int64_t at = 0;
  for (size_t i = 0; i < records.size() && i < offsets.size(); ++i) {
    CHECK(offsets[i] == at);
    CHECK(size_t(sizes[i]) == records[i].size() + tfr::kFramingSize);
    at += sizes[i];
  }
}

// Record k of three 10-byte records starts at 26 * k; the fields of a record, by offset in it.
struct Field {
  size_t at;
  LossReason reason;
  const char* name;
};

TEST(damage_at_each_field_names_the_record_and_offset) {
  const std::vector<Bytes> records = {payload(10, 1), payload(10, 2), payload(10, 3)};
  const Field fields[] = {{0, LossReason::kLengthChecksum, "length"},
                          {8, LossReason::kLengthChecksum, "length crc"},
                          {12, LossReason::kDataChecksum, "data"},
                          {22, LossReason::kDataChecksum, "data crc"}};
  for (size_t k = 0; k < records.size(); ++k) {
    for (const Field& f : fields) {
      Bytes file = write_all(records);
      const size_t start = k * (10 + tfr::kFramingSize);
      file[start + f.at] ^= 0x40;
      auto reader = reader_over(file);
      std::vector<Bytes> before;
      EXPECT_THROW(
          for (;;) {
            auto batch = reader->read_batch(1, 1 << 20);
            if (batch->size() == 0) break;
            before.push_back(records[before.size()]);
          },
          DataLoss, [&](const DataLoss& e) {
            CHECK_MSG(e.reason == f.reason, std::string("reason for damage in the ") + f.name);
            CHECK_MSG(e.record_index == k, std::string("record index, ") + f.name);
            CHECK_MSG(e.offset == start, std::string("offset, ") + f.name);
          });
      CHECK_MSG(before.size() == k, std::string("records before the damage, ") + f.name);
    }
  }
}

TEST(unverified_reads_ignore_data_crcs_only) {
  const std::vector<Bytes> records = {payload(10, 1), payload(10, 2)};
  Bytes file = write_all(records);
  file[22] ^= 1;  // record 0's data crc
  tfr::ReaderOptions options;
  options.verify = false;
  tfr::RecordReader reader(std::make_unique<tfr::MemorySource>(file.data(), file.size()), options);
  CHECK(read_all(reader) == records);
}

TEST(truncation_at_every_byte) {
  const std::vector<Bytes> records = {payload(5, 1), Bytes{}, payload(40, 3)};
  const Bytes file = write_all(records);
  std::vector<size_t> ends = {0};
  for (const Bytes& r : records) ends.push_back(ends.back() + r.size() + tfr::kFramingSize);
  for (size_t cut = 0; cut < file.size(); ++cut) {
    const Bytes part(file.begin(), file.begin() + long(cut));
    size_t whole = 0;
    while (whole + 1 < ends.size() && ends[whole + 1] <= cut) ++whole;
    auto reader = reader_over(part, Compression::kNone, 16);
    std::vector<Bytes> got;
    bool lost = false;
    try {
      got = read_all(*reader, 1);
    } catch (const DataLoss& e) {
      lost = true;
      CHECK_MSG(e.reason == LossReason::kTruncated, "cut at " + std::to_string(cut));
      CHECK_MSG(e.record_index == whole && e.offset == ends[whole],
                "cut at " + std::to_string(cut) + ": record and offset");
    }
    const bool at_boundary = cut == ends[whole];
    CHECK_MSG(lost != at_boundary, "cut at " + std::to_string(cut) +
                                       ": a clean end only at a record boundary");
    if (at_boundary) CHECK(got.size() == whole);
  }
}

TEST(absurd_length_is_not_an_allocation) {
  Bytes file = write_all({payload(10, 1)});
  // A length of 2^62 with a matching length CRC: larger than anything the source holds.
  const uint64_t huge = uint64_t(1) << 62;
  for (int i = 0; i < 8; ++i) file[size_t(i)] = uint8_t(huge >> (8 * i));
  const uint32_t crc = tfr::crc32c_mask(tfr::crc32c(file.data(), 8));
  for (int i = 0; i < 4; ++i) file[size_t(8 + i)] = uint8_t(crc >> (8 * i));
  auto reader = reader_over(file);
  EXPECT_THROW(read_all(*reader), DataLoss, [](const DataLoss& e) {
    CHECK(e.reason == LossReason::kLengthTooLarge || e.reason == LossReason::kTruncated);
    CHECK(e.record_index == 0 && e.offset == 0);
  });
}

// A compressed stream that merely lacks its end (what a writer that flushed and is still open
// leaves) ends where its data ends, as in TensorFlow: cleanly at a record boundary (a cut inside
// the stream header or trailer), as `truncated` inside a record. Damage is always an error.
TEST(compressed_streams_cut_or_damaged) {
  const auto records = sample_records();
  for (Compression c : {Compression::kGzip, Compression::kZlib}) {
    const Bytes file = write_all(records, c);
    const std::string name = "compression " + std::to_string(int(c));
    // (MemorySource borrows its bytes: each cut lives as long as its reader)
    const Bytes header(file.begin(), file.begin() + 2);
    const Bytes no_trailer(file.begin(), file.end() - 1);
    const Bytes half(file.begin(), file.begin() + long(file.size() / 2));
    auto in_header = reader_over(header, c);
    CHECK_MSG(read_all(*in_header).empty(), name + ": cut in the header reads as empty");
    auto in_trailer = reader_over(no_trailer, c);
    CHECK_MSG(read_all(*in_trailer) == records, name + ": cut in the trailer keeps every record");
    auto in_data = reader_over(half, c);
    EXPECT_THROW(read_all(*in_data), DataLoss, [&](const DataLoss& e) {
      CHECK_MSG(e.reason == LossReason::kTruncated, name + ": cut inside a record");
    });
    Bytes damaged = file;
    damaged[damaged.size() / 2] ^= 0xff;
    auto reader = reader_over(damaged, c);
    EXPECT_THROW(read_all(*reader), DataLoss, [](const DataLoss&) {});
  }
}

TEST(skip_corrupt_drops_only_the_damaged_record) {
  const std::vector<Bytes> records = {payload(10, 1), payload(10, 2), payload(10, 3)};
  Bytes file = write_all(records);
  file[26 + 14] ^= 1;  // record 1's payload
  tfr::ReaderOptions options;
  options.skip_corrupt = true;
  tfr::RecordReader reader(std::make_unique<tfr::MemorySource>(file.data(), file.size()), options);
  const auto got = read_all(reader);
  CHECK(got.size() == 2 && got[0] == records[0] && got[1] == records[2]);
  const auto skipped = reader.take_skipped();
  CHECK(skipped.size() == 1 && skipped[0].record_index == 1 && skipped[0].offset == 26);
}

TEST(writer_keeps_order_around_its_buffer) {
  // Records larger than half the buffer between small ones: the order must hold.
  std::vector<Bytes> records;
  for (size_t n : {10, 3000, 5, 5000, 1, 2047, 2049, 4096, 0}) records.push_back(payload(n, 9));
  const Bytes file = write_all(records, Compression::kNone, 4096);
  auto reader = reader_over(file);
  CHECK(read_all(*reader) == records);
}

TEST(closed_writer_refuses_writes) {
  Bytes out;
  tfr::RecordWriter writer(std::make_unique<VectorSink>(&out), 64);
  writer.close();
  const uint8_t byte = 1;
  EXPECT_THROW(writer.write(&byte, 1), std::logic_error, [](const std::logic_error&) {});
}

}  // namespace

CHECK_MAIN
