// The record reader over in-memory streams (after leveldb's log_test and TensorFlow's
// recordio_test): round trips through every source shape and buffer size, damage at each field
// of a record, truncation at every byte, skip_corrupt, and gzip/zlib streams cut or corrupted.
// Streams are framed by hand from record_format.h, so the writer is not needed to test the reader.
#include <random>

#include "record_fixtures.h"

using fixtures::expect_cut;
using fixtures::expect_records;
using fixtures::frame;
using fixtures::frames;
using fixtures::header_offsets;
using fixtures::numbered;
using fixtures::read_all;
using fixtures::Shape;
using tfr::LossReason;

namespace {

tfr::ReaderOptions buffer_of(size_t bytes) {
  tfr::ReaderOptions options;
  options.buffer_size = bytes;
  return options;
}

// Record sizes skewed towards small ones, up to 2^17 bytes (leveldb's RandomSkewedString).
std::vector<std::string> skewed_records(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    const size_t bits = rng() % 18;
    out.push_back(numbered(i, rng() % (size_t(1) << bits)));
  }
  return out;
}

const std::vector<std::string> kFourRecords = {"foo", "bar", "", "xxxx"};

}  // namespace

TEST(empty_stream_is_a_clean_end) {
  for (const auto& [name, shape] : fixtures::all_shapes()) {
    tfr::RecordReader reader(fixtures::source("", shape), {});
    CHECK_EQ(reader.read_batch(SIZE_MAX, SIZE_MAX)->size(), 0u) << name;
    CHECK_EQ(reader.read_batch(SIZE_MAX, SIZE_MAX)->size(), 0u)
        << name << ": reads at the end work";
    CHECK_EQ(reader.count(), 0u) << name;
    CHECK_EQ(reader.tell(), 0u) << name;
  }
}

TEST(read_write) {
  for (const auto& [name, shape] : fixtures::all_shapes()) {
    expect_records(frames(kFourRecords), kFourRecords, shape, {}, name);
  }
}

TEST(one_record_per_batch_and_reads_at_the_end) {
  tfr::RecordReader reader(fixtures::source(frames(kFourRecords)), {});
  for (const std::string& want : kFourRecords) {
    auto batch = reader.read_batch(1, SIZE_MAX);
    REQUIRE_EQ(batch->size(), 1u);
    CHECK_EQ(std::string(reinterpret_cast<const char*>(batch->data.data()), batch->data.size()),
             want);
  }
  CHECK_EQ(reader.read_batch(1, SIZE_MAX)->size(), 0u);
  CHECK_EQ(reader.read_batch(1, SIZE_MAX)->size(), 0u);
  CHECK_EQ(reader.records_read(), 4u);
  CHECK_EQ(reader.tell(), uint64_t(frames(kFourRecords).size()));
}

TEST(many_records_in_batches_of_every_kind) {
  std::vector<std::string> payloads;
  for (size_t i = 0; i < 100000; ++i) payloads.push_back(std::to_string(i) + ".");
  const std::string stream = frames(payloads);
  for (size_t max_records : {size_t(1), size_t(7), size_t(1000), SIZE_MAX}) {
    tfr::RecordReader reader(fixtures::source(stream), {});
    // A batch reserves room for max_bytes (up to 4 MiB): keep that small for small batches,
    // which AddressSanitizer would otherwise spend a minute poisoning.
    auto got = read_all(reader, max_records, max_records == SIZE_MAX ? SIZE_MAX : 1 << 16);
    CHECK(!got.loss);
    CHECK(got.records == payloads) << "max_records " << max_records;
    CHECK_EQ(got.batches,
             max_records == SIZE_MAX ? 1 : (payloads.size() + max_records - 1) / max_records);
  }
}

TEST(max_bytes_bounds_every_batch_but_a_lone_record) {
  std::vector<std::string> payloads(10, std::string(10, 'a'));
  payloads.insert(payloads.begin() + 5, std::string(100, 'b'));  // larger than max_bytes
  const std::string stream = frames(payloads);
  struct Case {
    size_t max_bytes;
    size_t batches;
  };
  // 25 bytes: [a a] [a a] [a] [b] [a a] [a a] [a]  (read_all checks each batch's limit)
  for (Case c : {Case{0, 11}, Case{25, 7}, Case{30, 5}, Case{SIZE_MAX, 1}}) {
    tfr::RecordReader reader(fixtures::source(stream), {});
    auto got = read_all(reader, SIZE_MAX, c.max_bytes);
    CHECK(got.records == payloads) << "max_bytes " << c.max_bytes;
    CHECK_EQ(got.batches, c.batches) << "max_bytes " << c.max_bytes;
  }
}

// Whole records in the buffer are checked a group of 8 at a time and copied by size class
// (below 8, 8..16, 16..32, 32..64 and larger bytes); a header checksum is computed once per
// length (then looked up). Every payload size around those classes, every batch limit around a
// group, and the same bytes whatever the shape of the source.
TEST(records_of_every_small_size_in_batches_of_every_limit) {
  for (size_t size : {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 300}) {
    std::vector<std::string> one_size, mixed;
    for (size_t i = 0; i < 40; ++i) {
      one_size.push_back(numbered(i, size));
      mixed.push_back(numbered(i, i % 3 == 0 ? size : (size * 7 + i) % 140));
    }
    for (const auto* payloads : {&one_size, &mixed}) {
      const std::string stream = frames(*payloads);
      for (size_t max_records :
           {size_t(1), size_t(7), size_t(8), size_t(9), size_t(17), SIZE_MAX}) {
        for (size_t max_bytes : {size_t(0), size, 8 * size + 1, 9 * size, SIZE_MAX}) {
          tfr::RecordReader reader(fixtures::source(stream), buffer_of(4096));
          auto got = read_all(reader, max_records, max_bytes);  // checks every batch's limits
          CHECK(!got.loss) << "size " << size;
          CHECK(got.records == *payloads)
              << "size " << size << ", max_records " << max_records << ", max_bytes " << max_bytes;
          auto offsets = header_offsets(*payloads);
          offsets.pop_back();
          CHECK(got.positions == offsets) << "size " << size;
        }
      }
    }
  }
}

TEST(records_of_one_size_damaged_at_every_byte) {
  // The lengths' checksums known must never pass a damaged header: every byte of records at
  // either end of a group, after several records of the same size (so their length is known).
  for (size_t size : {0, 5, 8, 16, 33, 64, 100}) {
    const std::vector<std::string> payloads(20, std::string(size, 'x'));
    const auto offsets = header_offsets(payloads);
    for (size_t victim : {size_t(0), size_t(7), size_t(8), size_t(13), size_t(19)}) {
      for (size_t byte = 0; byte < tfr::kFramingSize + size; ++byte) {
        std::string stream = frames(payloads);
        stream[size_t(offsets[victim]) + byte] ^= char(1 << (byte % 8));
        for (const auto& [name, shape] : fixtures::all_shapes()) {
          auto got = read_all(stream, shape);
          const std::string context = std::string(name) + ", size " + std::to_string(size) +
                                      ", record " + std::to_string(victim) + ", byte " +
                                      std::to_string(byte);
          CHECK(got.records == fixtures::first(payloads, victim)) << context;
          REQUIRE(got.loss) << context;
          CHECK_EQ(got.loss->reason, byte < tfr::kHeaderSize ? LossReason::kLengthChecksum
                                                             : LossReason::kDataChecksum)
              << context;
          CHECK_EQ(got.loss->offset, offsets[victim]) << context;
          CHECK_EQ(got.loss->record_index, victim) << context;
        }
      }
    }
  }
}

TEST(a_damaged_empty_record_header_after_good_ones) {
  // The known lengths start out as length 0 with its true checksum: a damaged empty record's
  // header holds another checksum, so it is refused, whether it comes first or later.
  const std::vector<std::string> payloads = {"", "", "abc", "", ""};
  const auto offsets = header_offsets(payloads);
  for (size_t victim : {size_t(0), size_t(1), size_t(3)}) {
    for (size_t byte = 0; byte < tfr::kFramingSize; ++byte) {
      std::string stream = frames(payloads);
      stream[size_t(offsets[victim]) + byte] ^= 0x10;
      auto got = read_all(stream);
      CHECK(got.records == fixtures::first(payloads, victim)) << "record " << victim;
      REQUIRE(got.loss) << "record " << victim << ", byte " << byte;
      CHECK_EQ(got.loss->record_index, victim);
      CHECK_EQ(got.loss->offset, offsets[victim]);
    }
  }
}

TEST(lengths_sharing_a_slot_of_the_known_checksums) {
  // Lengths 256 apart share a slot of the table of known length checksums: alternating them
  // replaces the entry again and again, and a header is only passed when its length is the one
  // in the slot and its checksum is that length's. A damaged length field that names another
  // known length, or a damaged checksum of a known length, is refused at its record.
  std::vector<std::string> payloads;
  for (size_t i = 0; i < 60; ++i)
    payloads.push_back(numbered(i, i % 3 == 0 ? 10 : 266 + 256 * (i % 2)));
  const auto offsets = header_offsets(payloads);
  expect_records(frames(payloads), payloads, {}, {}, "alternating lengths");
  for (size_t victim : {size_t(20), size_t(21), size_t(33), size_t(50)}) {
    for (int how = 0; how < 3; ++how) {
      std::string stream = frames(payloads);
      uint8_t* header = reinterpret_cast<uint8_t*>(&stream[size_t(offsets[victim])]);
      const uint64_t length = tfr::load_le64(header);
      if (how == 0) tfr::store_le64(header, length == 10 ? 266 : 10);  // another known length
      if (how == 1) header[8] ^= 0x40;                                 // its checksum
      if (how == 2) tfr::store_le64(header, length + 256);             // the same slot
      auto got = read_all(stream);
      const std::string context =
          "record " + std::to_string(victim) + ", how " + std::to_string(how);
      CHECK(got.records == fixtures::first(payloads, victim)) << context;
      REQUIRE(got.loss) << context;
      CHECK_EQ(got.loss->reason, LossReason::kLengthChecksum) << context;
      CHECK_EQ(got.loss->offset, offsets[victim]) << context;
      CHECK_EQ(got.loss->record_index, victim) << context;
    }
  }
}

TEST(zero_length_records) {
  const std::vector<std::string> empties(1000, "");
  for (const auto& [name, shape] : fixtures::all_shapes()) {
    expect_records(frames(empties), empties, shape, {}, name);
    // A batch limit of zero payload bytes still takes empty records.
    auto got = read_all(frames(empties), shape, {}, SIZE_MAX, 0);
    CHECK_EQ(got.records.size(), 1000u) << name;
  }
  std::vector<std::string> mixed = {"", "a", "", "", "bc", ""};
  for (const auto& [name, shape] : fixtures::all_shapes()) {
    expect_records(frames(mixed), mixed, shape, {}, name);
  }
}

TEST(fragmentation_small_medium_large) {
  const std::vector<std::string> payloads = {
      "small", fixtures::big_string("medium", 50000), fixtures::big_string("large", 100000),
      fixtures::big_string("huge", (size_t(3) << 20) + 5), "tail"};
  for (const auto& [name, shape] : fixtures::all_shapes()) {
    for (size_t buffer : {size_t(1), size_t(4096), size_t(65536), size_t(1) << 20}) {
      expect_records(frames(payloads), payloads, shape, buffer_of(buffer),
                     std::string(name) + ", buffer " + std::to_string(buffer));
    }
  }
}

TEST(random_skewed_sizes) {
  const auto payloads = skewed_records(500, 301);
  const std::string stream = frames(payloads);
  for (const auto& [name, shape] : fixtures::all_shapes()) {
    for (size_t buffer : {size_t(4096), size_t(4103), size_t(65536), size_t(1) << 20}) {
      expect_records(stream, payloads, shape, buffer_of(buffer),
                     std::string(name) + ", buffer " + std::to_string(buffer));
      tfr::RecordReader reader(fixtures::source(stream, shape), buffer_of(buffer));
      auto got = read_all(reader, 13, 70000);
      CHECK(got.records == payloads) << name << ", batches of <= 13 records / 70000 bytes";
    }
  }
}

// The next header, payload and footer straddle the end of the read buffer at every split point;
// records on either side of the direct-read size (32 KiB) and of the unknown-size growth step.
TEST(records_around_every_buffer_size) {
  for (size_t buffer : {size_t(4096), size_t(4103), size_t(65536)}) {
    for (size_t first = buffer - 40; first <= buffer + 8; ++first) {
      const std::vector<std::string> payloads = {numbered(0, first), "second", "",
                                                 numbered(3, 100)};
      const std::string stream = frames(payloads);
      for (const auto& [name, shape] : fixtures::all_shapes()) {
        if (shape.max_read == 1) continue;  // one byte a read needs no buffer to straddle
        expect_records(stream, payloads, shape, buffer_of(buffer),
                       std::string(name) + ", buffer " + std::to_string(buffer) + ", first " +
                           std::to_string(first));
      }
    }
  }
  std::vector<size_t> lengths = {4095,  4096,  4097,  8191,  8192,  8193,
                                 32767, 32768, 32769, 65535, 65536, 65537};
  for (size_t length : lengths) {
    const std::vector<std::string> payloads = {"a", numbered(1, length), numbered(2, length), "z"};
    for (const auto& [name, shape] : fixtures::all_shapes()) {
      expect_records(frames(payloads), payloads, shape, buffer_of(4096),
                     std::string(name) + ", length " + std::to_string(length));
    }
  }
  Shape unsized;
  unsized.size_known = false;
  for (size_t length :
       {(size_t(1) << 20) - 1, size_t(1) << 20, (size_t(1) << 20) + 1, (size_t(2) << 20) + 3}) {
    const std::vector<std::string> payloads = {numbered(0, length), "b"};
    expect_records(frames(payloads), payloads, unsized, {},
                   "unsized, length " + std::to_string(length));
  }
}

TEST(damaged_length_field) {
  const std::vector<std::string> payloads = {"first", "second", "third"};
  const auto offsets = header_offsets(payloads);
  for (size_t byte = 0; byte < 8; ++byte) {
    std::string stream = frames(payloads);
    fixtures::increment_byte(stream, size_t(offsets[1]) + byte, 100);
    for (const auto& [name, shape] : fixtures::all_shapes()) {
      auto got = read_all(stream, shape);
      CHECK(got.records == fixtures::first(payloads, 1)) << name << ", byte " << byte;
      REQUIRE(got.loss) << name << ", byte " << byte;
      CHECK_EQ(got.loss->reason, LossReason::kLengthChecksum) << name << ", byte " << byte;
      CHECK_EQ(got.loss->offset, offsets[1]);
      CHECK_EQ(got.loss->record_index, 1u);
      CHECK_EQ(got.loss->source, std::string("<test>"));
      CHECK_EQ(std::string(got.loss->what()), "corrupted record at " + std::to_string(offsets[1]) +
                                                  ": the length field does not match its checksum");
    }
  }
}

TEST(damaged_length_checksum) {
  const std::vector<std::string> payloads = {"first", "second", "third"};
  const auto offsets = header_offsets(payloads);
  for (size_t byte = 8; byte < 12; ++byte) {
    std::string stream = frames(payloads);
    fixtures::increment_byte(stream, size_t(offsets[2]) + byte);
    auto got = read_all(stream);
    CHECK(got.records == fixtures::first(payloads, 2)) << "byte " << byte;
    REQUIRE(got.loss);
    CHECK_EQ(got.loss->reason, LossReason::kLengthChecksum);
    CHECK_EQ(got.loss->offset, offsets[2]);
    CHECK_EQ(got.loss->record_index, 2u);
  }
}

TEST(damaged_data_and_data_checksum) {
  const std::vector<std::string> payloads = {"first", "second", "third"};
  const auto offsets = header_offsets(payloads);
  // Every payload byte, then every byte of the data checksum.
  for (size_t byte = tfr::kHeaderSize; byte < tfr::kFramingSize + payloads[1].size(); ++byte) {
    std::string stream = frames(payloads);
    fixtures::increment_byte(stream, size_t(offsets[1]) + byte);
    for (const auto& [name, shape] : fixtures::all_shapes()) {
      auto got = read_all(stream, shape);
      CHECK(got.records == fixtures::first(payloads, 1)) << name << ", byte " << byte;
      REQUIRE(got.loss) << name << ", byte " << byte;
      CHECK_EQ(got.loss->reason, LossReason::kDataChecksum) << name << ", byte " << byte;
      CHECK_EQ(got.loss->offset, offsets[1]) << "the record's header";
      CHECK_EQ(got.loss->record_index, 1u);
      CHECK_EQ(std::string(got.loss->what()), "corrupted record at " +
                                                  std::to_string(offsets[1] + 12) +
                                                  ": the data does not match its checksum");
    }
  }
}

TEST(damage_in_a_large_record_read_past_the_buffer) {
  const std::vector<std::string> payloads = {"a", fixtures::big_string("large", 200000), "c"};
  const auto offsets = header_offsets(payloads);
  for (size_t at : {size_t(12), size_t(5000), size_t(199999 + 12), size_t(200000 + 12 + 3)}) {
    std::string stream = frames(payloads);
    fixtures::increment_byte(stream, size_t(offsets[1]) + at);
    for (const auto& [name, shape] : fixtures::all_shapes()) {
      auto got = read_all(stream, shape, buffer_of(4096));
      CHECK(got.records == fixtures::first(payloads, 1)) << name << ", byte " << at;
      REQUIRE(got.loss);
      CHECK_EQ(got.loss->reason, LossReason::kDataChecksum) << name << ", byte " << at;
    }
  }
}

TEST(without_verify_damaged_bytes_pass_through) {
  const std::vector<std::string> payloads = {"first", "second", "third"};
  const auto offsets = header_offsets(payloads);
  std::string stream = frames(payloads);
  fixtures::increment_byte(stream, size_t(offsets[1]) + 12);  // data
  fixtures::increment_byte(stream, size_t(offsets[2]) + 9);   // length checksum
  fixtures::increment_byte(stream, size_t(offsets[3]) - 1);   // data checksum
  tfr::ReaderOptions options;
  options.verify = false;
  auto got = read_all(stream, {}, options);
  CHECK(!got.loss);
  CHECK(got.records == (std::vector<std::string>{"first", "tecond", "third"}));
}

// The length field changed and its checksum fixed to match, so only the length lies.
TEST(lying_length_field) {
  const std::vector<std::string> payloads = {"first", "second", "third"};
  const auto offsets = header_offsets(payloads);
  Shape unsized;
  unsized.size_known = false;
  struct Case {
    size_t record;
    uint64_t length;
    Shape shape;
    LossReason reason;
  };
  const Case cases[] = {
      {1, 7, {}, LossReason::kDataChecksum},  // one more: the footer is off
      {1, 5, {}, LossReason::kDataChecksum},  // one less
      {2, 6, {}, LossReason::kTruncated},     // the last record: past the end
      {2, 6, unsized, LossReason::kTruncated},
      {1, uint64_t(1) << 40, {}, LossReason::kLengthTooLarge},        // more than the whole file
      {1, uint64_t(1) << 40, unsized, LossReason::kTruncated},        // a pipe could hold it
      {1, (uint64_t(1) << 48) + 1, {}, LossReason::kLengthTooLarge},  // more than any record
      {1, (uint64_t(1) << 48) + 1, unsized, LossReason::kLengthTooLarge},
      {1, UINT64_MAX, unsized, LossReason::kLengthTooLarge},
      {1, 1000, {}, LossReason::kTruncated},  // plausible: a cut file
  };
  for (const Case& c : cases) {
    std::string stream = frames(payloads);
    fixtures::set_length(stream, size_t(offsets[c.record]), c.length);
    auto got = read_all(stream, c.shape);
    CHECK(got.records == fixtures::first(payloads, c.record)) << "length " << c.length;
    REQUIRE(got.loss) << "length " << c.length;
    CHECK_EQ(got.loss->reason, c.reason) << "length " << c.length << ", size known "
                                         << c.shape.size_known << ": " << got.loss->what();
    CHECK_EQ(got.loss->offset, offsets[c.record]) << "length " << c.length;
    CHECK_EQ(got.loss->record_index, c.record);
  }
}

TEST(truncation_at_every_byte) {
  const std::vector<std::string> payloads = {"abcde", "", numbered(2, 40), "z"};
  const std::string stream = frames(payloads);
  for (const auto& [name, shape] : fixtures::all_shapes()) {
    for (size_t cut = 0; cut <= stream.size(); ++cut) {
      expect_cut(stream, payloads, cut, shape, {}, name);
    }
  }
}

TEST(truncation_at_every_byte_across_a_buffer_refill) {
  const std::vector<std::string> payloads = {numbered(0, 4096 - 30), numbered(1, 20), "",
                                             numbered(3, 5000)};
  const std::string stream = frames(payloads);
  for (const auto& [name, shape] : fixtures::all_shapes()) {
    if (shape.max_read == 1) continue;
    for (size_t cut = 4096 - 60; cut <= stream.size(); cut += cut < 4096 + 60 ? 1 : 97) {
      expect_cut(stream, payloads, cut, shape, buffer_of(4096), name);
    }
  }
}

TEST(truncation_inside_a_large_payload_of_unknown_size) {
  const std::vector<std::string> payloads = {"a", numbered(1, (size_t(3) << 20) + 11)};
  const std::string stream = frames(payloads);
  Shape unsized;
  unsized.size_known = false;
  for (size_t cut : {size_t(17 + 12), size_t(17 + 12 + 1), size_t(17) + (size_t(1) << 20) + 12,
                     size_t(17) + (size_t(2) << 20), stream.size() - 4, stream.size() - 1}) {
    expect_cut(stream, payloads, cut, unsized, {}, "unsized");
    expect_cut(stream, payloads, cut, {}, {}, "sized");
  }
}

TEST(count_and_scan_read_only_headers) {
  const auto payloads = skewed_records(200, 7);
  const auto offsets = header_offsets(payloads);
  std::string stream = frames(payloads);
  fixtures::increment_byte(stream, size_t(offsets[10]) + 13);  // payload damage: not looked at
  for (const auto& [name, shape] : fixtures::all_shapes()) {
    tfr::RecordReader counter(fixtures::source(stream, shape), {});
    CHECK_EQ(counter.count(), payloads.size()) << name;
    CHECK_EQ(counter.records_read(), payloads.size()) << name;
    CHECK_EQ(counter.read_batch(SIZE_MAX, SIZE_MAX)->size(), 0u) << name << ": at the end";

    tfr::RecordReader scanner(fixtures::source(stream, shape), {});
    std::vector<int64_t> starts, sizes;
    scanner.scan(&starts, &sizes);
    REQUIRE_EQ(starts.size(), payloads.size()) << name;
    for (size_t i = 0; i < payloads.size(); ++i) {
      CHECK_EQ(starts[i], offsets[i]) << name << ", record " << i;
      CHECK_EQ(sizes[i], offsets[i + 1] - offsets[i]) << name << ", record " << i;
    }
  }
  // After two records were read, count() counts the rest.
  tfr::RecordReader reader(fixtures::source(stream), {});
  CHECK_EQ(reader.read_batch(2, SIZE_MAX)->size(), 2u);
  CHECK_EQ(reader.count(), payloads.size() - 2);
}

TEST(count_and_scan_stop_at_damaged_headers_and_cuts) {
  const std::vector<std::string> payloads = {"abcde", "", numbered(2, 40), "z"};
  const auto offsets = header_offsets(payloads);
  std::string damaged = frames(payloads);
  fixtures::increment_byte(damaged, size_t(offsets[2]) + 3);
  {
    tfr::RecordReader reader(fixtures::source(damaged), {});
    auto loss = check::thrown<tfr::DataLoss>([&] { reader.count(); });
    REQUIRE(loss);
    CHECK_EQ(loss->reason, LossReason::kLengthChecksum);
    CHECK_EQ(loss->offset, offsets[2]);
    CHECK_EQ(loss->record_index, 2u);
    CHECK(check::thrown<tfr::DataLoss>([&] { reader.count(); })) << "the error sticks";
  }
  const std::string stream = frames(payloads);
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    size_t whole = 0;
    while (whole < payloads.size() && uint64_t(offsets[whole + 1]) <= cut) ++whole;
    tfr::RecordReader reader(fixtures::source(stream.substr(0, cut)), {});
    std::vector<int64_t> starts, sizes;
    auto loss = check::thrown<tfr::DataLoss>([&] { reader.scan(&starts, &sizes); });
    CHECK_EQ(starts.size(), whole) << "cut at " << cut;
    CHECK_EQ(bool(loss), uint64_t(offsets[whole]) != cut) << "cut at " << cut;
    if (loss) {
      CHECK_EQ(loss->reason, LossReason::kTruncated) << "cut at " << cut;
      CHECK_EQ(loss->offset, offsets[whole]) << "cut at " << cut;
    }
  }
}

TEST(tell_and_records_read_follow_the_batches) {
  const auto offsets = header_offsets(kFourRecords);
  tfr::RecordReader reader(fixtures::source(frames(kFourRecords)), {});
  CHECK_EQ(reader.tell(), 0u);
  auto batch = reader.read_batch(2, SIZE_MAX);
  CHECK_EQ(batch->size(), 2u);
  CHECK_EQ(reader.tell(), uint64_t(offsets[2]));
  CHECK_EQ(reader.records_read(), 2u);
  CHECK_EQ(reader.read_batch(SIZE_MAX, SIZE_MAX)->size(), 2u);
  CHECK_EQ(reader.tell(), uint64_t(offsets[4]));
}

TEST(a_record_cut_by_a_growing_file_is_read_once_complete) {
  const std::vector<std::string> payloads = {"first", numbered(1, 3000), "third"};
  const std::string stream = frames(payloads);
  const auto offsets = header_offsets(payloads);
  for (size_t cut : {size_t(offsets[1]) + 5, size_t(offsets[1]) + 100, size_t(offsets[2]) - 1}) {
    for (bool rewindable : {true, false}) {
      auto data = std::make_shared<std::string>(stream.substr(0, cut));
      Shape shape;
      shape.rewindable = rewindable;
      tfr::RecordReader reader(std::make_unique<fixtures::StringSource>(data, shape), {});
      auto got = read_all(reader);
      CHECK(got.records == fixtures::first(payloads, 1));
      REQUIRE(got.loss);
      CHECK_EQ(got.loss->reason, LossReason::kTruncated);
      *data = stream;  // the writer finished the record
      got = read_all(reader);
      if (rewindable) {
        CHECK(!got.loss) << "cut at " << cut;
        CHECK(got.records == (std::vector<std::string>{payloads[1], payloads[2]}))
            << "cut at " << cut;
        CHECK(got.positions == (std::vector<int64_t>{offsets[1], offsets[2]}));
      } else {  // a pipe cannot go back: the error stays
        CHECK(got.records.empty());
        REQUIRE(got.loss);
        CHECK_EQ(got.loss->offset, offsets[1]);
      }
    }
  }
}

TEST(read_errors_come_after_the_records_before_them_and_stick) {
  const std::vector<std::string> payloads = {"first", "second", "third"};
  const auto offsets = header_offsets(payloads);
  for (uint64_t fail_at = 0; fail_at < uint64_t(offsets[3]); fail_at += 3) {
    Shape shape;
    shape.fail_at = fail_at;
    tfr::RecordReader reader(fixtures::source(frames(payloads), shape), {});
    std::vector<std::string> got;
    auto error = check::thrown<tfr::IoError>([&] {
      for (;;) {
        auto batch = reader.read_batch(SIZE_MAX, SIZE_MAX);
        if (batch->size() == 0) break;
        for (size_t i = 0; i < batch->size(); ++i) {
          got.emplace_back(reinterpret_cast<const char*>(batch->data.data()) + batch->offsets[i],
                           size_t(batch->offsets[i + 1] - batch->offsets[i]));
        }
      }
    });
    REQUIRE(error) << "fail at " << fail_at << ": an I/O error is not the end of the stream";
    CHECK_EQ(error->err, EIO);
    size_t whole = 0;
    while (uint64_t(offsets[whole + 1]) <= fail_at) ++whole;
    CHECK(got == fixtures::first(payloads, whole)) << "fail at " << fail_at;
    CHECK(check::thrown<tfr::IoError>([&] { reader.read_batch(SIZE_MAX, SIZE_MAX); }))
        << "fail at " << fail_at << ": the error sticks";
  }
}

TEST(skip_corrupt_drops_a_record_with_bad_data) {
  const std::vector<std::string> payloads = {"r0", "r1", "r2", "r3", "r4", "r5"};
  const auto offsets = header_offsets(payloads);
  std::string stream = frames(payloads);
  fixtures::increment_byte(stream, size_t(offsets[1]) + 12);
  fixtures::increment_byte(stream, size_t(offsets[4]) - 1);  // record 3's data checksum
  tfr::ReaderOptions options;
  options.skip_corrupt = true;
  for (const auto& [name, shape] : fixtures::all_shapes()) {
    auto got = read_all(stream, shape, options);
    CHECK(!got.loss) << name;
    CHECK(got.records == (std::vector<std::string>{"r0", "r2", "r4", "r5"})) << name;
    CHECK(got.positions == (std::vector<int64_t>{offsets[0], offsets[2], offsets[4], offsets[5]}));
    REQUIRE_EQ(got.skipped.size(), 2u) << name;
    CHECK_EQ(got.skipped[0].reason, LossReason::kDataChecksum);
    CHECK_EQ(got.skipped[0].offset, offsets[1]);
    CHECK_EQ(got.skipped[0].record_index, 1u);
    CHECK_EQ(got.skipped[1].offset, offsets[3]);
    CHECK_EQ(got.skipped[1].record_index, 3u) << "skipped records keep their place in the count";
  }
}

TEST(skip_corrupt_resynchronises_after_a_bad_header) {
  const std::vector<std::string> payloads = {"r0", numbered(1, 50), "r2", "r3"};
  const auto offsets = header_offsets(payloads);
  tfr::ReaderOptions options;
  options.skip_corrupt = true;
  for (size_t byte = 0; byte < 12; ++byte) {
    std::string stream = frames(payloads);
    fixtures::increment_byte(stream, size_t(offsets[1]) + byte);
    for (const auto& [name, shape] : fixtures::all_shapes()) {
      auto got = read_all(stream, shape, options);
      CHECK(!got.loss) << name << ", byte " << byte;
      CHECK(got.records == (std::vector<std::string>{"r0", "r2", "r3"}))
          << name << ", byte " << byte;
      REQUIRE_EQ(got.skipped.size(), 1u) << name << ", byte " << byte;
      CHECK_EQ(got.skipped[0].reason, LossReason::kLengthChecksum);
      CHECK_EQ(got.skipped[0].offset, offsets[1]);
      CHECK(got.skipped[0].detail.find("resumed at the next valid header, offset " +
                                       std::to_string(offsets[2])) != std::string::npos)
          << got.skipped[0].detail;
    }
  }
  // Damage in the last header: nothing valid follows, and the stream ends there.
  std::string stream = frames(payloads);
  fixtures::increment_byte(stream, size_t(offsets[3]));
  auto got = read_all(stream, {}, options);
  CHECK(!got.loss);
  CHECK(got.records == fixtures::first(payloads, 3));
  REQUIRE_EQ(got.skipped.size(), 1u);
  CHECK(got.skipped[0].detail.find("no valid record header follows") != std::string::npos)
      << got.skipped[0].detail;
}

TEST(skip_corrupt_drops_a_large_damaged_record) {
  const std::vector<std::string> payloads = {"r0", numbered(1, 200000), "r2", numbered(3, 40000)};
  const auto offsets = header_offsets(payloads);
  std::string stream = frames(payloads);
  fixtures::increment_byte(stream, size_t(offsets[1]) + 100000);
  fixtures::increment_byte(stream, size_t(offsets[4]) - 1);
  tfr::ReaderOptions options = buffer_of(4096);
  options.skip_corrupt = true;
  for (const auto& [name, shape] : fixtures::all_shapes()) {
    auto got = read_all(stream, shape, options);
    CHECK(!got.loss) << name;
    CHECK(got.records == (std::vector<std::string>{"r0", "r2"})) << name;
    REQUIRE_EQ(got.skipped.size(), 2u) << name;
    CHECK_EQ(got.skipped[0].offset, offsets[1]);
    CHECK_EQ(got.skipped[1].offset, offsets[3]);
  }
}

TEST(skip_corrupt_ends_at_a_truncated_tail) {
  const std::vector<std::string> payloads = {"r0", "r1", numbered(2, 30)};
  const std::string stream = frames(payloads);
  const auto offsets = header_offsets(payloads);
  tfr::ReaderOptions options;
  options.skip_corrupt = true;
  for (size_t cut = size_t(offsets[2]) + 1; cut < stream.size(); ++cut) {
    tfr::RecordReader reader(fixtures::source(stream.substr(0, cut)), options);
    auto got = read_all(reader);
    CHECK(!got.loss) << "cut at " << cut;
    CHECK(got.records == fixtures::first(payloads, 2)) << "cut at " << cut;
    REQUIRE_EQ(got.skipped.size(), 1u) << "cut at " << cut;
    CHECK_EQ(got.skipped[0].reason, LossReason::kTruncated);
    CHECK_EQ(got.skipped[0].offset, offsets[2]);
    CHECK_EQ(reader.read_batch(SIZE_MAX, SIZE_MAX)->size(), 0u) << "the end stays the end";
  }
}

TEST(compressed_input_read_as_plain_says_so) {
  const std::string stream = frames(kFourRecords);
  for (auto [compression, word] :
       {std::pair{tfr::Compression::kGzip, "gzip"}, std::pair{tfr::Compression::kZlib, "zlib"}}) {
    const std::string packed = fixtures::compress(stream, compression);
    tfr::ReaderOptions options;
    options.hint_compression = true;
    for (const auto& [name, shape] : fixtures::all_shapes()) {  // the first read may be 1 byte
      auto got = read_all(packed, shape, options);
      REQUIRE(got.loss) << word << ", " << name;
      CHECK_EQ(got.loss->offset, 0u);
      CHECK(std::string(got.loss->what()).find(std::string("starts like a ") + word + " stream") !=
            std::string::npos)
          << name << ": " << got.loss->what();
    }
    options.hint_compression = false;
    auto got = read_all(packed, {}, options);
    REQUIRE(got.loss) << word;
    CHECK(std::string(got.loss->what()).find("stream") == std::string::npos) << got.loss->what();
  }
}

namespace {

std::unique_ptr<tfr::RecordReader> compressed_reader(const std::string& packed,
                                                     tfr::Compression compression, Shape shape,
                                                     tfr::ReaderOptions options = {}) {
  return std::make_unique<tfr::RecordReader>(
      tfr::maybe_inflate(fixtures::source(packed, shape), compression), options);
}

const tfr::Compression kCompressions[] = {tfr::Compression::kGzip, tfr::Compression::kZlib};

}  // namespace

TEST(compressed_round_trip) {
  const auto payloads = skewed_records(300, 11);
  const std::string stream = frames(payloads);
  for (tfr::Compression compression : kCompressions) {
    for (int level : {0, 1, 9}) {
      const std::string packed = fixtures::compress(stream, compression, level);
      for (const auto& [name, shape] : fixtures::all_shapes()) {
        if (shape.max_read == 1 && level != 1) continue;
        auto reader = compressed_reader(packed, compression, shape, buffer_of(4096));
        auto got = read_all(*reader, 17, 100000);
        CHECK(!got.loss) << name << ", level " << level;
        CHECK(got.records == payloads) << name << ", level " << level;
      }
    }
  }
}

TEST(compressed_empty_file_and_empty_stream) {
  for (tfr::Compression compression : kCompressions) {
    auto got = read_all(*compressed_reader("", compression, {}));
    CHECK(!got.loss && got.records.empty()) << "a 0-byte file is an empty stream";
    got = read_all(*compressed_reader(fixtures::compress("", compression), compression, {}));
    CHECK(!got.loss && got.records.empty()) << "a member holding nothing";
  }
}

TEST(gzip_members_are_read_one_after_another) {
  const std::vector<std::string> payloads = {"first", numbered(1, 5000), "", "last"};
  const std::string stream = frames(payloads);
  // Members split inside records and headers, with empty members between them.
  for (size_t split : {size_t(3), size_t(12), size_t(20), size_t(2000), stream.size() - 2}) {
    const std::string packed =
        fixtures::compress(stream.substr(0, split), tfr::Compression::kGzip) +
        fixtures::compress("", tfr::Compression::kGzip) +
        fixtures::compress(stream.substr(split), tfr::Compression::kGzip);
    for (const auto& [name, shape] : fixtures::all_shapes()) {
      auto got = read_all(*compressed_reader(packed, tfr::Compression::kGzip, shape));
      CHECK(!got.loss) << name << ", split at " << split;
      CHECK(got.records == payloads) << name << ", split at " << split;
    }
  }
}

TEST(gzip_read_as_zlib_and_back) {
  const std::string stream = frames(kFourRecords);
  for (auto [written, read] : {std::pair{tfr::Compression::kGzip, tfr::Compression::kZlib},
                               std::pair{tfr::Compression::kZlib, tfr::Compression::kGzip}}) {
    auto got = read_all(*compressed_reader(fixtures::compress(stream, written), read, {}));
    CHECK(got.records.empty());
    REQUIRE(got.loss);
    CHECK_EQ(got.loss->reason, LossReason::kCompressedStream);
    CHECK_EQ(got.loss->offset, 0u);
    CHECK_EQ(got.loss->record_index, 0u);
  }
}

TEST(garbage_after_the_last_gzip_member) {
  const std::string stream = frames(kFourRecords);
  for (tfr::Compression compression : kCompressions) {
    const std::string packed = fixtures::compress(stream, compression) + "garbage!";
    auto got = read_all(*compressed_reader(packed, compression, {}));
    CHECK(got.records == kFourRecords);
    REQUIRE(got.loss);
    CHECK_EQ(got.loss->reason, LossReason::kCompressedStream);
    CHECK_EQ(got.loss->offset, uint64_t(stream.size()));
    CHECK_EQ(got.loss->record_index, 4u);
  }
}

// Cut after every byte, a compressed stream gives the records zlib can inflate from what is left
// and then, if that ends inside a record, kTruncated: never a partial or a wrong record.
TEST(compressed_stream_cut_at_every_byte) {
  const std::vector<std::string> payloads = {"abcde", "", numbered(2, 300), "z", numbered(4, 70)};
  const std::string stream = frames(payloads);
  const auto offsets = header_offsets(payloads);
  for (tfr::Compression compression : kCompressions) {
    const std::string packed = fixtures::compress(stream, compression, 1);
    for (size_t cut = 0; cut <= packed.size(); ++cut) {
      const std::string part = packed.substr(0, cut);
      const size_t available = fixtures::inflatable_prefix(part, compression).size();
      size_t whole = 0;
      while (whole < payloads.size() && uint64_t(offsets[whole + 1]) <= available) ++whole;
      for (Shape shape : {Shape{}, Shape{false, 3}}) {
        auto got = read_all(*compressed_reader(part, compression, shape));
        CHECK(got.records == fixtures::first(payloads, whole)) << "cut at " << cut;
        if (uint64_t(offsets[whole]) == available) {
          CHECK(!got.loss) << "cut at " << cut;
          continue;
        }
        REQUIRE(got.loss) << "cut at " << cut;
        CHECK_EQ(got.loss->reason, LossReason::kTruncated) << "cut at " << cut;
        CHECK_EQ(got.loss->offset, offsets[whole]) << "cut at " << cut;
      }
    }
  }
}

// A changed byte anywhere in a compressed stream: the records before the damage, then DataLoss;
// all of them and a clean end only where zlib too reads the original (gzip's unused header bits).
TEST(compressed_stream_corrupted_at_every_byte) {
  const std::vector<std::string> payloads = {"abcde", "", numbered(2, 300), "z", numbered(4, 70)};
  const std::string stream = frames(payloads);
  for (tfr::Compression compression : kCompressions) {
    const std::string packed = fixtures::compress(stream, compression, 6);
    for (size_t at = 0; at < packed.size(); ++at) {
      for (int delta : {1, 0x80}) {
        std::string bad = packed;
        fixtures::increment_byte(bad, at, delta);
        auto got = read_all(*compressed_reader(bad, compression, {}));
        REQUIRE(got.records.size() <= payloads.size());
        CHECK(got.records == fixtures::first(payloads, got.records.size()))
            << "byte " << at << " + " << delta << ": only intact records";
        const auto zlib_reads = fixtures::decompress(bad, compression);
        if (zlib_reads && *zlib_reads == stream) {
          CHECK(!got.loss && got.records.size() == payloads.size()) << "byte " << at;
        } else {
          CHECK(got.loss) << "byte " << at << " + " << delta << ": damage must be reported";
        }
      }
    }
  }
}

// The compressed file fails to read part way: the records inflated before it come first, then
// the IoError, again on every later call.
TEST(a_read_error_under_a_compressed_stream) {
  std::vector<std::string> payloads;
  for (size_t i = 0; i < 100; ++i) payloads.push_back(numbered(i, 10 + i));
  const std::string stream = frames(payloads);
  for (tfr::Compression compression : kCompressions) {
    const std::string packed = fixtures::compress(stream, compression, 1);
    for (uint64_t fail_at = 0; fail_at < packed.size(); fail_at += 1 + fail_at / 4) {
      Shape shape;
      shape.fail_at = fail_at;
      shape.max_read = 64;  // so the inflater refills often
      auto reader = compressed_reader(packed, compression, shape);
      std::vector<std::string> got;
      auto error = check::thrown<tfr::IoError>([&] {
        for (auto batch = reader->read_batch(7, SIZE_MAX); batch->size() > 0;
             batch = reader->read_batch(7, SIZE_MAX)) {
          for (size_t i = 0; i < batch->size(); ++i) {
            got.emplace_back(reinterpret_cast<const char*>(batch->data.data()) + batch->offsets[i],
                             size_t(batch->offsets[i + 1] - batch->offsets[i]));
          }
        }
      });
      REQUIRE(error) << "fail at " << fail_at;
      const size_t available =
          fixtures::inflatable_prefix(packed.substr(0, fail_at), compression).size();
      const auto offsets = header_offsets(payloads);
      size_t whole = 0;
      while (whole < payloads.size() && uint64_t(offsets[whole + 1]) <= available) ++whole;
      CHECK(got == fixtures::first(payloads, whole)) << "fail at " << fail_at;
      CHECK(check::thrown<tfr::IoError>([&] { reader->read_batch(7, SIZE_MAX); }))
          << "fail at " << fail_at << ": the error sticks";
    }
  }
}

// A compressed file still being written, flushed at record boundaries: each read takes what has
// arrived, ends cleanly, and reads on once more arrives.
TEST(a_growing_compressed_file) {
  for (tfr::Compression compression : kCompressions) {
    z_stream z{};
    deflateInit2(&z, 6, Z_DEFLATED,
                 compression == tfr::Compression::kGzip ? 16 + MAX_WBITS : MAX_WBITS, 8,
                 Z_DEFAULT_STRATEGY);
    auto file = std::make_shared<std::string>();
    auto flush_in = [&](const std::string& raw, int mode) {
      std::string out(raw.size() + 1024, '\0');
      z.next_in = const_cast<Bytef*>(fixtures::bytes(raw));
      z.avail_in = uInt(raw.size());
      z.next_out = reinterpret_cast<Bytef*>(&out[0]);
      z.avail_out = uInt(out.size());
      deflate(&z, mode);
      out.resize(out.size() - z.avail_out);
      *file += out;
    };
    tfr::RecordReader reader(
        tfr::maybe_inflate(std::make_unique<fixtures::StringSource>(file, Shape{}), compression),
        {});
    std::vector<std::string> all;
    for (size_t round = 0; round < 5; ++round) {
      std::vector<std::string> payloads;
      for (size_t i = 0; i <= round; ++i) payloads.push_back(numbered(10 * round + i, 100 * i));
      flush_in(frames(payloads), round == 4 ? Z_FINISH : Z_SYNC_FLUSH);
      auto got = read_all(reader);
      CHECK(!got.loss) << "round " << round << ": " << (got.loss ? got.loss->what() : "");
      CHECK(got.records == payloads) << "round " << round;
      all.insert(all.end(), payloads.begin(), payloads.end());
    }
    deflateEnd(&z);
    CHECK_EQ(reader.records_read(), all.size());
    CHECK(fixtures::decompress(*file, compression) == frames(all));
  }
}

TEST(skip_corrupt_ends_at_damage_in_a_compressed_stream) {
  const std::vector<std::string> payloads = {"r0", numbered(1, 3000), "r2"};
  const std::string stream = frames(payloads);
  tfr::ReaderOptions options;
  options.skip_corrupt = true;
  for (tfr::Compression compression : kCompressions) {
    const std::string packed = fixtures::compress(stream, compression, 6) + "garbage!";
    auto reader = compressed_reader(packed, compression, {}, options);
    auto got = read_all(*reader);
    CHECK(!got.loss);
    CHECK(got.records == payloads);
    REQUIRE_EQ(got.skipped.size(), 1u);
    CHECK_EQ(got.skipped[0].reason, LossReason::kCompressedStream);
    CHECK_EQ(reader->read_batch(SIZE_MAX, SIZE_MAX)->size(), 0u) << "the end stays the end";
  }
}

// A writer that flushed (Z_SYNC_FLUSH) and is still open: the data so far reads as complete.
TEST(compressed_stream_without_its_end) {
  const std::vector<std::string> payloads = {"first", "second"};
  const std::string stream = frames(payloads);
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string packed(1024, '\0');
  z.next_in = const_cast<Bytef*>(fixtures::bytes(stream));
  z.avail_in = uInt(stream.size());
  z.next_out = reinterpret_cast<Bytef*>(&packed[0]);
  z.avail_out = uInt(packed.size());
  CHECK_EQ(deflate(&z, Z_SYNC_FLUSH), Z_OK);
  packed.resize(z.total_out);
  deflateEnd(&z);
  auto got = read_all(*compressed_reader(packed, tfr::Compression::kGzip, {}));
  CHECK(!got.loss);
  CHECK(got.records == payloads);
}

RUN_ALL_TESTS()
