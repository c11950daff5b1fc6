// Index files and random access: scan_index / format_index / parse_index, RandomAccessReader over
// files under $TMPDIR (in order, shuffled, duplicated, coalesced or not), indexes that are stale or
// belong to another file, damage, files that grow or shrink after opening, and check_fetched.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <thread>

#include "random_access.h"
#include "record_fixtures.h"

using fixtures::frames;
using fixtures::header_offsets;
using fixtures::numbered;
using tfr::LossReason;

namespace {

// A file under $TMPDIR (or /tmp), removed when the test is done with it.
class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/tfrec_random_access_XXXXXX";
    const int fd = ::mkstemp(&path_[0]);
    REQUIRE(fd >= 0) << "mkstemp in " << path_;
    ::close(fd);
    rewrite(contents);
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  void rewrite(const std::string& contents) { write(contents, O_TRUNC); }
  void append(const std::string& contents) { write(contents, O_APPEND); }

 private:
  void write(const std::string& contents, int mode) {
    const int fd = ::open(path_.c_str(), O_WRONLY | mode);
    REQUIRE(fd >= 0);
    REQUIRE_EQ(::write(fd, contents.data(), contents.size()), ssize_t(contents.size()));
    ::close(fd);
  }

  std::string path_;
};

struct Index {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
};

Index index_of(const std::vector<std::string>& payloads) {
  const auto starts = header_offsets(payloads);
  Index index;
  for (size_t i = 0; i < payloads.size(); ++i) {
    index.offsets.push_back(starts[i]);
    index.sizes.push_back(starts[i + 1] - starts[i]);
  }
  return index;
}

std::unique_ptr<tfr::RandomAccessReader> open(const TempFile& file, const Index& index,
                                              tfr::RandomAccessOptions options = {}) {
  return std::make_unique<tfr::RandomAccessReader>(file.path(), index.offsets, index.sizes,
                                                   options);
}

std::vector<std::string> payloads_of(const tfr::RecordBatch& batch) {
  std::vector<std::string> out;
  for (size_t i = 0; i < batch.size(); ++i) {
    out.emplace_back(reinterpret_cast<const char*>(batch.data.data()) + batch.offsets[i],
                     size_t(batch.offsets[i + 1] - batch.offsets[i]));
  }
  return out;
}

// Reads records `wanted` and checks the batch holds their payloads and positions, in that order.
void expect_read(const tfr::RandomAccessReader& reader, const std::vector<std::string>& payloads,
                 const std::vector<int64_t>& wanted, const std::string& context) {
  const auto starts = header_offsets(payloads);
  auto batch = reader.read(wanted.data(), wanted.size());
  REQUIRE_EQ(batch->size(), wanted.size()) << context;
  REQUIRE_EQ(batch->offsets.size(), wanted.size() + 1) << context;
  std::vector<std::string> want;
  std::vector<int64_t> positions;
  for (int64_t i : wanted) {
    want.push_back(payloads[size_t(i)]);
    positions.push_back(starts[size_t(i)]);
  }
  CHECK(payloads_of(*batch) == want) << context;
  CHECK(batch->positions == positions) << context;
}

std::vector<int64_t> all_indices(size_t n) {
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = int64_t(i);
  return out;
}

// Sizes that put records on both sides of read_one's single-read limit (4096 bytes).
std::vector<std::string> mixed_records() {
  std::vector<std::string> out = {
      "", "a", numbered(2, 4095), numbered(3, 4096), numbered(4, 4097), "", numbered(6, 100000),
      "z"};
  for (size_t i = out.size(); i < 40; ++i) out.push_back(numbered(i, (i * 131) % 3000));
  return out;
}

std::optional<tfr::DataLoss> loss_reading(const tfr::RandomAccessReader& reader,
                                          std::vector<int64_t> wanted) {
  return check::thrown<tfr::DataLoss>([&] { reader.read(wanted.data(), wanted.size()); });
}

}  // namespace

TEST(scan_format_and_parse_an_index) {
  const auto payloads = mixed_records();
  TempFile file(frames(payloads));
  const Index want = index_of(payloads);
  Index scanned;
  tfr::scan_index(file.path(), &scanned.offsets, &scanned.sizes);
  CHECK(scanned.offsets == want.offsets);
  CHECK(scanned.sizes == want.sizes);
  const std::string text =
      tfr::format_index(want.offsets.data(), want.sizes.data(), payloads.size());
  CHECK_EQ(text.substr(0, 14), std::string("0 16\n16 17\n33 "));
  Index parsed;
  tfr::parse_index(text.data(), text.size(), "idx", &parsed.offsets, &parsed.sizes);
  CHECK(parsed.offsets == want.offsets);
  CHECK(parsed.sizes == want.sizes);
}

TEST(scan_index_reports_damage_and_cuts) {
  const std::vector<std::string> payloads = {"first", "second", "third"};
  const auto starts = header_offsets(payloads);
  std::string damaged = frames(payloads);
  fixtures::increment_byte(damaged, size_t(starts[1]) + 2);
  TempFile file(damaged);
  Index index;
  auto loss = check::thrown<tfr::DataLoss>(
      [&] { tfr::scan_index(file.path(), &index.offsets, &index.sizes); });
  REQUIRE(loss);
  CHECK_EQ(loss->reason, LossReason::kLengthChecksum);
  CHECK_EQ(loss->offset, starts[1]);
  CHECK_EQ(loss->source, file.path());
  file.rewrite(frames(payloads).substr(0, size_t(starts[3]) - 1));
  loss = check::thrown<tfr::DataLoss>(
      [&] { tfr::scan_index(file.path(), &index.offsets, &index.sizes); });
  REQUIRE(loss);
  CHECK_EQ(loss->reason, LossReason::kTruncated);
  CHECK_EQ(loss->offset, starts[2]);
  auto missing = check::thrown<tfr::IoError>(
      [&] { tfr::scan_index(file.path() + ".missing", &index.offsets, &index.sizes); });
  REQUIRE(missing);
  CHECK_EQ(missing->err, ENOENT);
}

TEST(parse_index_accepts_the_text_other_tools_write) {
  struct Case {
    const char* text;
    std::vector<int64_t> offsets;
  };
  const Case cases[] = {
      {"", {}},
      {"\n\n", {}},
      {"0 16", {0}},                        // no final newline
      {"0 16\r\n16 20\r\n", {0, 16}},       // CRLF
      {"  0\t16  \n\n\t16 20\n", {0, 16}},  // blanks around, blank lines between
      {"922337203685477580 16\n", {922337203685477580}},
  };
  for (const Case& c : cases) {
    Index index;
    tfr::parse_index(c.text, std::strlen(c.text), "idx", &index.offsets, &index.sizes);
    CHECK(index.offsets == c.offsets) << check::show(c.text);
    CHECK_EQ(index.sizes.size(), c.offsets.size());
  }
}

TEST(parse_index_rejects_anything_else_naming_the_line) {
  for (const char* line : {"0", "0 16 5", "-1 16", "a b", "0 16x", "0x10 16", "1.5 16", "0,16",
                           "99999999999999999999 16", "0 9223372036854775808"}) {
    const std::string text = std::string("0 16\n") + line + "\n";
    Index index;
    auto error = check::thrown<std::invalid_argument>([&] {
      tfr::parse_index(text.data(), text.size(), "my.idx", &index.offsets, &index.sizes);
    });
    REQUIRE(error) << line;
    CHECK(std::string(error->what()).find("my.idx: line 2") == 0) << error->what();
  }
}

TEST(read_in_any_order) {
  const auto payloads = mixed_records();
  TempFile file(frames(payloads));
  auto reader = open(file, index_of(payloads));
  CHECK_EQ(reader->size(), payloads.size());
  auto order = all_indices(payloads.size());
  expect_read(*reader, payloads, order, "in order");
  std::reverse(order.begin(), order.end());
  expect_read(*reader, payloads, order, "reversed");
  std::mt19937 rng(5);
  std::shuffle(order.begin(), order.end(), rng);
  expect_read(*reader, payloads, order, "shuffled");
  expect_read(*reader, payloads, {6, 3, 6, 0, 6, 0, 39}, "duplicates");
  expect_read(*reader, payloads, {}, "nothing");
  for (size_t i = 0; i < payloads.size(); ++i) {
    CHECK_EQ(reader->payload_size(i), payloads[i].size());
    std::string one(payloads[i].size(), '\0');
    reader->read_one(i, reinterpret_cast<uint8_t*>(&one[0]));
    CHECK_EQ(one, payloads[i]) << "read_one " << i;
  }
}

TEST(read_with_and_without_coalescing) {
  std::vector<std::string> payloads;
  for (size_t i = 0; i < 1500; ++i) payloads.push_back(numbered(i, i % 23));  // > 256 in a run
  payloads.push_back(numbered(1500, 1 << 20));
  TempFile file(frames(payloads));
  std::vector<int64_t> every_other;
  for (int64_t i = 0; i < int64_t(payloads.size()); i += 2) every_other.push_back(i);
  struct Options {
    uint64_t max_gap, max_read;
  };
  for (Options o : {Options{64 << 10, 8 << 20}, Options{0, 8 << 20}, Options{64 << 10, 1},
                    Options{100, 200}, Options{uint64_t(1) << 40, uint64_t(1) << 40}}) {
    tfr::RandomAccessOptions options;
    options.max_gap = o.max_gap;
    options.max_read = o.max_read;
    auto reader = open(file, index_of(payloads), options);
    const std::string context =
        "max_gap " + std::to_string(o.max_gap) + ", max_read " + std::to_string(o.max_read);
    expect_read(*reader, payloads, all_indices(payloads.size()), context);
    expect_read(*reader, payloads, every_other, context + ", every other record");
  }
}

TEST(indices_out_of_range) {
  const auto payloads = mixed_records();
  TempFile file(frames(payloads));
  auto reader = open(file, index_of(payloads));
  for (int64_t bad : {int64_t(-1), int64_t(payloads.size()), INT64_MAX, INT64_MIN}) {
    std::vector<int64_t> wanted = {0, bad};
    CHECK(check::thrown<std::out_of_range>([&] { reader->read(wanted.data(), wanted.size()); }))
        << bad;
  }
  std::string one(1, '\0');
  CHECK(check::thrown<std::out_of_range>(
      [&] { reader->read_one(payloads.size(), reinterpret_cast<uint8_t*>(&one[0])); }));
}

TEST(impossible_index_entries_are_refused) {
  TempFile file(frames({"abc"}));
  const Index cases[] = {
      {{0}, {}},                 // offsets without sizes
      {{-1}, {19}},              // negative offset
      {{0}, {15}},               // smaller than the framing
      {{INT64_MAX - 10}, {19}},  // offset + size overflows
  };
  for (const Index& index : cases) {
    CHECK(check::thrown<std::invalid_argument>([&] { open(file, index); }));
  }
  auto missing = check::thrown<tfr::IoError>(
      [&] { tfr::RandomAccessReader(file.path() + ".missing", {0}, {19}); });
  REQUIRE(missing);
  CHECK_EQ(missing->err, ENOENT);
}

TEST(an_index_from_before_records_were_appended) {
  const auto payloads = mixed_records();
  TempFile file(frames(payloads));
  file.append(frames({"appended"}));
  auto reader = open(file, index_of(payloads));
  for (std::vector<int64_t> wanted : {std::vector<int64_t>{0}, std::vector<int64_t>{5, 1}}) {
    auto loss = loss_reading(*reader, wanted);
    REQUIRE(loss);
    CHECK_EQ(loss->reason, LossReason::kIndexMismatch);
    CHECK_EQ(loss->record_index, payloads.size());
    CHECK(std::string(loss->what()).find("appended since") != std::string::npos) << loss->what();
    CHECK(std::string(loss->what()).find("rebuild it") != std::string::npos) << loss->what();
  }
  std::string one(1, '\0');
  CHECK(check::thrown<tfr::DataLoss>(
      [&] { reader->read_one(1, reinterpret_cast<uint8_t*>(&one[0])); }));
}

TEST(an_index_of_a_file_cut_since) {
  const auto payloads = mixed_records();
  const auto starts = header_offsets(payloads);
  TempFile file(frames(payloads).substr(0, size_t(starts[7]) + 3));
  auto reader = open(file, index_of(payloads));
  auto loss = loss_reading(*reader, {0});
  REQUIRE(loss);
  CHECK_EQ(loss->reason, LossReason::kIndexMismatch);
  CHECK_EQ(loss->record_index, 7u) << "the first record that does not fit";
  CHECK_EQ(loss->offset, starts[7]);
}

TEST(a_file_cut_after_the_reader_opened_it) {
  const auto payloads = mixed_records();
  const auto starts = header_offsets(payloads);
  TempFile file(frames(payloads));
  auto reader = open(file, index_of(payloads));
  file.rewrite(frames(payloads).substr(0, size_t(starts[10]) + 20));
  expect_read(*reader, payloads, {9, 0}, "records before the cut");
  for (int64_t i : {10, 11, 39}) {
    auto loss = loss_reading(*reader, {i});
    REQUIRE(loss) << i;
    CHECK_EQ(loss->reason, LossReason::kIndexMismatch) << i;
    CHECK_EQ(loss->record_index, size_t(i));
    CHECK_EQ(loss->offset, starts[size_t(i)]);
  }
  std::string one(payloads[10].size(), '\0');
  auto loss = check::thrown<tfr::DataLoss>(
      [&] { reader->read_one(10, reinterpret_cast<uint8_t*>(&one[0])); });
  REQUIRE(loss);
  CHECK_EQ(loss->reason, LossReason::kIndexMismatch);
}

// An index of only some records is not checked as a whole; one reaching past the end of the file
// at open is read once the file has grown.
TEST(a_partial_index_and_a_growing_file) {
  const auto payloads = mixed_records();
  const auto full = index_of(payloads);
  Index partial;
  for (size_t i = 1; i < payloads.size(); i += 3) {
    partial.offsets.push_back(full.offsets[i]);
    partial.sizes.push_back(full.sizes[i]);
  }
  const std::string stream = frames(payloads);
  TempFile file(stream.substr(0, size_t(full.offsets[37]) + 5));  // the last entry is cut
  auto reader = open(file, partial);
  auto loss = loss_reading(*reader, {int64_t(partial.offsets.size()) - 1});
  REQUIRE(loss);
  CHECK_EQ(loss->reason, LossReason::kIndexMismatch);
  file.rewrite(stream);
  auto batch = reader->read(all_indices(partial.offsets.size()).data(), partial.offsets.size());
  std::vector<std::string> want;
  for (size_t i = 1; i < payloads.size(); i += 3) want.push_back(payloads[i]);
  CHECK(payloads_of(*batch) == want);
}

TEST(an_index_of_another_file) {
  const auto payloads = mixed_records();
  TempFile file(frames(payloads));
  // Shifted by a byte: no header where each entry says.
  Index shifted = index_of(payloads);
  for (int64_t& offset : shifted.offsets) offset += 1;
  shifted.offsets.pop_back();
  shifted.sizes.pop_back();
  auto reader = open(file, shifted);
  for (int64_t i : {0, 3, 7}) {
    auto loss = loss_reading(*reader, {i});
    REQUIRE(loss) << i;
    CHECK_EQ(loss->reason, LossReason::kIndexMismatch) << i;
    CHECK_EQ(loss->record_index, size_t(i));
    CHECK_EQ(loss->offset, shifted.offsets[size_t(i)]);
    CHECK(std::string(loss->what()).find("no valid record header there") != std::string::npos)
        << loss->what();
  }
  // The right offsets with another file's sizes: the headers disagree.
  Index resized = index_of(payloads);
  std::swap(resized.sizes[0], resized.sizes[1]);
  resized.offsets[1] = resized.offsets[0] + resized.sizes[0];
  reader = open(file, resized);
  auto loss = loss_reading(*reader, {0});
  REQUIRE(loss);
  CHECK_EQ(loss->reason, LossReason::kIndexMismatch);
  CHECK(std::string(loss->what()).find("its header says 0 bytes of data") != std::string::npos)
      << loss->what();
  tfr::RandomAccessOptions unverified;
  unverified.verify = false;
  reader = open(file, resized, unverified);
  loss = loss_reading(*reader, {0});
  REQUIRE(loss) << "the length field is checked even without verify";
  CHECK_EQ(loss->reason, LossReason::kIndexMismatch);
}

TEST(damage_is_named_by_its_record_within_a_coalesced_read) {
  const auto payloads = mixed_records();
  const auto starts = header_offsets(payloads);
  for (size_t damaged : {size_t(1), size_t(4), size_t(6), size_t(39)}) {
    std::string stream = frames(payloads);
    fixtures::increment_byte(stream, size_t(starts[damaged + 1]) - 5);  // the payload's last byte
    TempFile file(stream);
    auto reader = open(file, index_of(payloads));
    auto loss = loss_reading(*reader, all_indices(payloads.size()));
    REQUIRE(loss) << "record " << damaged;
    CHECK_EQ(loss->reason, LossReason::kDataChecksum) << "record " << damaged;
    CHECK_EQ(loss->record_index, damaged);
    CHECK_EQ(loss->offset, starts[damaged]);
    std::string one(payloads[damaged].size(), '\0');
    loss = check::thrown<tfr::DataLoss>(
        [&] { reader->read_one(damaged, reinterpret_cast<uint8_t*>(&one[0])); });
    REQUIRE(loss) << "read_one " << damaged;
    CHECK_EQ(loss->reason, LossReason::kDataChecksum);
    // Without verify the bytes come back as they are.
    tfr::RandomAccessOptions unverified;
    unverified.verify = false;
    auto lenient = open(file, index_of(payloads), unverified);
    std::vector<int64_t> wanted = {int64_t(damaged)};
    auto batch = lenient->read(wanted.data(), 1);
    CHECK(payloads_of(*batch)[0] != payloads[damaged]);
    CHECK_EQ(payloads_of(*batch)[0].size(), payloads[damaged].size());
  }
}

TEST(one_reader_serves_many_threads) {
  const auto payloads = mixed_records();
  TempFile file(frames(payloads));
  auto reader = open(file, index_of(payloads));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng{static_cast<uint32_t>(t)};
      for (int round = 0; round < 200; ++round) {
        std::vector<int64_t> wanted(1 + rng() % 8);
        for (int64_t& i : wanted) i = int64_t(rng() % payloads.size());
        auto batch = reader->read(wanted.data(), wanted.size());
        const auto got = payloads_of(*batch);
        for (size_t k = 0; k < wanted.size(); ++k)
          mismatches[t] += got[k] != payloads[size_t(wanted[k])];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST(check_fetched_checks_like_read) {
  const std::vector<std::string> payloads = {"first", "", numbered(2, 5000), "last"};
  const auto starts = header_offsets(payloads);
  // Fetched as two ranges laid side by side in one buffer, with junk before and between.
  const std::string stream = frames(payloads);
  const std::string buffer =
      "junk" + stream.substr(0, size_t(starts[2])) + "gap" + stream.substr(size_t(starts[2]));
  auto fetched = [&](size_t i) {
    const int64_t start = 4 + starts[i] + (i >= 2 ? 3 : 0);
    return tfr::FetchedRecord{start, i, starts[i], starts[i + 1] - starts[i]};
  };
  std::vector<tfr::FetchedRecord> records = {fetched(3), fetched(0), fetched(2), fetched(1),
                                             fetched(3)};
  auto batch = tfr::check_fetched("s3://bucket/f", fixtures::bytes(buffer), buffer.size(),
                                  records.data(), records.size(), true);
  CHECK(payloads_of(*batch) ==
        (std::vector<std::string>{"last", "first", payloads[2], "", "last"}));
  CHECK(batch->positions ==
        (std::vector<int64_t>{starts[3], starts[0], starts[2], starts[1], starts[3]}));
  CHECK_EQ(
      tfr::check_fetched("x", fixtures::bytes(buffer), buffer.size(), nullptr, 0, true)->size(),
      0u);

  std::string damaged = buffer;
  fixtures::increment_byte(damaged, size_t(fetched(2).start) + 100);
  auto loss = check::thrown<tfr::DataLoss>([&] {
    tfr::check_fetched("s3://bucket/f", fixtures::bytes(damaged), damaged.size(), records.data(),
                       records.size(), true);
  });
  REQUIRE(loss);
  CHECK_EQ(loss->reason, LossReason::kDataChecksum);
  CHECK_EQ(loss->record_index, 2u);
  CHECK_EQ(loss->offset, starts[2]);
  CHECK_EQ(loss->source, std::string("s3://bucket/f"));
  CHECK(!check::thrown<tfr::DataLoss>([&] {
    tfr::check_fetched("x", fixtures::bytes(damaged), damaged.size(), records.data(),
                       records.size(), false);
  })) << "without verify";

  tfr::FetchedRecord wrong_size = fetched(0);
  wrong_size.size += 1;
  loss = check::thrown<tfr::DataLoss>([&] {
    tfr::check_fetched("x", fixtures::bytes(buffer), buffer.size(), &wrong_size, 1, true);
  });
  REQUIRE(loss);
  CHECK_EQ(loss->reason, LossReason::kIndexMismatch);

  for (tfr::FetchedRecord outside :
       {tfr::FetchedRecord{-1, 0, 0, 21}, tfr::FetchedRecord{int64_t(buffer.size()) - 20, 3, 0, 21},
        tfr::FetchedRecord{0, 0, 0, 15}, tfr::FetchedRecord{int64_t(buffer.size()) + 1, 0, 0, 16},
        tfr::FetchedRecord{4, 0, 0, INT64_MAX}}) {
    CHECK(check::thrown<std::invalid_argument>([&] {
      tfr::check_fetched("x", fixtures::bytes(buffer), buffer.size(), &outside, 1, true);
    })) << "start "
        << outside.start << ", size " << outside.size;
  }
}

RUN_ALL_TESTS()
