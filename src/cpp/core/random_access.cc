#include "random_access.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "crc32c.h"
#include "errors.h"
#include "record_format.h"

namespace tfr {
namespace {

// Spans per scatter read (the platform layer splits them further where the OS needs it).
constexpr size_t kMaxIov = 1024;
// read_one() reads records up to this size whole into a stack buffer.
constexpr size_t kSmallRecord = 4096;
// A run of records takes at most this many iovecs per record (gap, header, payload, footer).
constexpr size_t kIovPerRecord = 4;

constexpr const char* kHint =
    " (the index is stale or belongs to another file: rebuild it with `tfrec-fast index`)";

std::string at(int64_t offset) { return " at offset " + std::to_string(offset); }

[[noreturn]] void throw_mismatch(const std::string& path, size_t index, int64_t offset,
                                 const std::string& detail) {
  throw DataLoss(LossReason::kIndexMismatch, path, index, uint64_t(offset),
                 "record " + std::to_string(index) + at(offset) + ": " + detail + kHint);
}

// The checks of one record read at its index entry (`offset`, framed `size`): `frame` holds its
// 12-byte header then its 4-byte footer, `got_end` is how far (absolute offset) the read reached.
void check_framed(const std::string& path, size_t index, int64_t entry_offset, int64_t entry_size,
                  const uint8_t* frame, const uint8_t* payload, uint64_t got_end, bool verify) {
  const uint64_t offset = uint64_t(entry_offset);
  const uint64_t size = uint64_t(entry_size);
  if (got_end < offset + size) {
    throw_mismatch(path, index, entry_offset,
                   "the index says it takes " + std::to_string(size) +
                       " bytes but the file ends at " + std::to_string(got_end));
  }
  if (verify && crc32c_mask(crc32c(frame, 8)) != load_le32(frame + 8)) {
    throw_mismatch(path, index, entry_offset,
                   "there is no valid record header there (its length checksum fails)");
  }
  const uint64_t length = load_le64(frame);
  if (length != size - kFramingSize) {
    throw_mismatch(path, index, entry_offset,
                   "the index says it takes " + std::to_string(size) +
                       " bytes but its header says " + std::to_string(length) + " bytes of data (" +
                       std::to_string(length + kFramingSize) + " framed)");
  }
  if (verify && crc32c_mask(crc32c(payload, size_t(length))) != load_le32(frame + kHeaderSize)) {
    throw DataLoss(LossReason::kDataChecksum, path, index, offset,
                   "corrupted record at " + std::to_string(offset + kHeaderSize) +
                       ": the data does not match its checksum");
  }
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

}  // namespace

void scan_index(const std::string& path, std::vector<int64_t>* offsets,
                std::vector<int64_t>* sizes) {
  ReaderOptions options;
  options.verify = true;  // only the length CRCs: payloads are skipped
  RecordReader reader(std::make_unique<FileSource>(path), options);
  reader.scan(offsets, sizes);
}

std::string format_index(const int64_t* offsets, const int64_t* sizes, size_t n) {
  std::string out;
  out.reserve(n * kFramingSize);
  char line[48];
  for (size_t i = 0; i < n; ++i) {
    int len = std::snprintf(line, sizeof line, "%lld %lld\n", static_cast<long long>(offsets[i]),
                            static_cast<long long>(sizes[i]));
    out.append(line, size_t(len));
  }
  return out;
}

void parse_index(const char* text, size_t n, const std::string& name, std::vector<int64_t>* offsets,
                 std::vector<int64_t>* sizes) {
  const char* p = text;
  const char* end = text + n;
  size_t line = 0;
  while (p < end) {
    ++line;
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', size_t(end - p)));
    if (eol == nullptr) eol = end;
    int64_t values[2];
    int found = 0;
    const char* q = p;
    for (;;) {
      while (q < eol && is_blank(*q)) ++q;
      if (q == eol) break;
      if (found == 2 || *q < '0' || *q > '9') {
        throw std::invalid_argument(
            name + ": line " + std::to_string(line) +
            " is not an index entry (two non-negative integers, 'offset size'): '" +
            std::string(p, size_t(std::min<ptrdiff_t>(eol - p, 80))) + "'");
      }
      uint64_t v = 0;
      for (; q < eol && *q >= '0' && *q <= '9'; ++q) {
        v = v * 10 + uint64_t(*q - '0');
        if (v > uint64_t(INT64_MAX) / 10) {
          throw std::invalid_argument(name + ": line " + std::to_string(line) +
                                      ": number too large");
        }
      }
      if (q < eol && !is_blank(*q)) {
        throw std::invalid_argument(name + ": line " + std::to_string(line) +
                                    ": unexpected character '" + std::string(1, *q) + "'");
      }
      values[found++] = int64_t(v);
    }
    if (found == 1) {
      throw std::invalid_argument(name + ": line " + std::to_string(line) +
                                  " has an offset but no size");
    }
    if (found == 2) {
      offsets->push_back(values[0]);
      sizes->push_back(values[1]);
    }
    p = eol + 1;
  }
}

struct RandomAccessReader::Wanted {
  size_t index;    // position in the index
  int64_t offset;  // of its header
  int64_t size;    // framed
  size_t out;      // first position in the batch that asked for it
};

RandomAccessReader::RandomAccessReader(const std::string& path, std::vector<int64_t> offsets,
                                       std::vector<int64_t> sizes, RandomAccessOptions options)
    : path_(path), offsets_(std::move(offsets)), sizes_(std::move(sizes)), options_(options) {
  if (offsets_.size() != sizes_.size()) {
    throw std::invalid_argument("index of '" + path + "': " + std::to_string(offsets_.size()) +
                                " offsets but " + std::to_string(sizes_.size()) + " sizes");
  }
  for (size_t i = 0; i < offsets_.size(); ++i) {
    if (offsets_[i] < 0 || sizes_[i] < int64_t(kFramingSize) ||
        sizes_[i] > INT64_MAX - offsets_[i]) {
      throw std::invalid_argument(
          "index of '" + path + "': entry " + std::to_string(i) + " (offset " +
          std::to_string(offsets_[i]) + ", size " + std::to_string(sizes_[i]) +
          ") is impossible: a record takes at least " + std::to_string(kFramingSize) + " bytes");
    }
  }
  options_.max_gap = std::min<uint64_t>(options_.max_gap, 1 << 20);
  file_ = platform::open_read(path, platform::Access::kRandom);
  try {
    file_size_ = platform::info(file_, path).size;
  } catch (...) {
    platform::close_quietly(file_);
    throw;
  }

  // A complete index (the only kind the tools write) covers the file from 0 to its end with each
  // record right after the last; if it ends elsewhere, the file changed since it was written.
  bool complete = offsets_.empty() || offsets_[0] == 0;
  for (size_t i = 1; complete && i < offsets_.size(); ++i) {
    complete = offsets_[i] == offsets_[i - 1] + sizes_[i - 1];
  }
  if (complete) {
    const uint64_t end = offsets_.empty() ? 0 : uint64_t(offsets_.back() + sizes_.back());
    if (end < file_size_) {
      stale_index_ = offsets_.size();
      stale_ = "the index of " + std::to_string(offsets_.size()) + " records ends at byte " +
               std::to_string(end) + " but the file has " + std::to_string(file_size_) +
               " bytes (records appended since it was written?)";
    } else if (end > file_size_) {
      // The first record that does not fit is the one to name.
      size_t i = 0;
      while (uint64_t(offsets_[i] + sizes_[i]) <= file_size_) ++i;
      stale_index_ = i;
      stale_ = "the index says record " + std::to_string(i) + at(offsets_[i]) + " takes " +
               std::to_string(sizes_[i]) + " bytes but the file ends at " +
               std::to_string(file_size_) + " (the file was cut or rewritten?)";
    }
  }
}

RandomAccessReader::~RandomAccessReader() { platform::close_quietly(file_); }

void RandomAccessReader::mismatch(size_t index, const std::string& detail) const {
  throw_mismatch(path_, index, offsets_[index], detail);
}

void RandomAccessReader::check_stale() const {
  if (stale_.empty()) return;
  throw DataLoss(LossReason::kIndexMismatch, path_, stale_index_,
                 stale_index_ < offsets_.size()
                     ? uint64_t(offsets_[stale_index_])
                     : uint64_t(offsets_.empty() ? 0 : offsets_.back() + sizes_.back()),
                 stale_ + kHint);
}

void RandomAccessReader::check_fits(size_t i, uint64_t* file_size) const {
  const uint64_t end = uint64_t(offsets_[i] + sizes_[i]);
  if (end <= *file_size) return;
  *file_size = platform::info(file_, path_).size;  // the file may have grown since it opened
  if (end > *file_size) {
    mismatch(i, "the index says it takes " + std::to_string(sizes_[i]) +
                    " bytes but the file ends at " + std::to_string(*file_size));
  }
}

std::unique_ptr<RecordBatch> RandomAccessReader::read(const int64_t* indices, size_t n) const {
  auto batch = std::make_unique<RecordBatch>();
  if (n == 0) return batch;
  check_stale();
  // Layout of the batch, in the order asked for.
  batch->offsets.resize(n + 1);
  batch->positions.resize(n);
  batch->offsets[0] = 0;
  uint64_t file_size = file_size_;
  // Each index is read exactly once: everything below works on `wanted`, never on `indices`.
  std::vector<Wanted> wanted(n);
  for (size_t k = 0; k < n; ++k) {
    const int64_t i = indices[k];
    if (i < 0 || size_t(i) >= offsets_.size()) {
      throw std::out_of_range("record index " + std::to_string(i) +
                              " out of range for an index of " + std::to_string(offsets_.size()) +
                              " records");
    }
    check_fits(size_t(i), &file_size);
    batch->offsets[k + 1] = batch->offsets[k] + sizes_[size_t(i)] - int64_t(kFramingSize);
    batch->positions[k] = offsets_[size_t(i)];
    wanted[k] = Wanted{size_t(i), offsets_[size_t(i)], sizes_[size_t(i)], k};
  }
  const size_t bytes = size_t(batch->offsets[n]);
  if (options_.pool) {
    batch->data = options_.pool->take(bytes + 1);
    batch->pool = options_.pool;
  }
  batch->data.reserve(bytes + 1);
  batch->data.resize(bytes);

  // The distinct records in file order; each is read once, into the first place that wants it.
  auto by_file_order = [](const Wanted& a, const Wanted& b) {
    return a.offset != b.offset ? a.offset < b.offset
           : a.index != b.index ? a.index < b.index
                                : a.out < b.out;
  };
  if (!std::is_sorted(wanted.begin(), wanted.end(), by_file_order)) {
    std::sort(wanted.begin(), wanted.end(), by_file_order);
  }
  std::vector<std::pair<size_t, size_t>> copies;  // (from, to) batch positions of duplicates
  size_t distinct = 0;
  for (size_t k = 0; k < n; ++k) {
    if (distinct > 0 && wanted[distinct - 1].index == wanted[k].index) {
      copies.emplace_back(wanted[distinct - 1].out, wanted[k].out);
    } else {
      wanted[distinct++] = wanted[k];
    }
  }
  wanted.resize(distinct);

  // Runs of nearby records, each read with one preadv.
  std::vector<uint8_t> gap_scratch;
  size_t first = 0;
  while (first < distinct) {
    const uint64_t start = uint64_t(wanted[first].offset);
    uint64_t end = start + uint64_t(wanted[first].size);
    size_t last = first + 1;
    while (last < distinct && (last - first + 1) * kIovPerRecord <= kMaxIov) {
      const Wanted& w = wanted[last];
      const uint64_t w_end = uint64_t(w.offset + w.size);
      if (uint64_t(w.offset) < end || uint64_t(w.offset) - end > options_.max_gap ||
          w_end - start > options_.max_read) {
        break;
      }
      if (uint64_t(w.offset) > end && gap_scratch.empty()) gap_scratch.resize(options_.max_gap);
      end = w_end;
      ++last;
    }
    read_run(&wanted[first], last - first, *batch, gap_scratch.data());
    first = last;
  }
  uint8_t* data = batch->data.data();
  for (const auto& [from, to] : copies) {
    std::memcpy(data + batch->offsets[to], data + batch->offsets[from],
                size_t(batch->offsets[from + 1] - batch->offsets[from]));
  }
  return batch;
}

void RandomAccessReader::read_run(const Wanted* first, size_t count, RecordBatch& batch,
                                  uint8_t* gap_scratch) const {
  // Headers and footers land in `frames` (16 bytes a record), gaps in the scratch buffer and
  // payloads straight in the batch.
  std::vector<uint8_t> frames(count * kFramingSize);
  platform::Span iov[kMaxIov];
  size_t n_iov = 0;
  uint64_t pos = uint64_t(first->offset);
  for (size_t j = 0; j < count; ++j) {
    const Wanted& w = first[j];
    if (uint64_t(w.offset) > pos) {
      iov[n_iov++] = platform::Span{gap_scratch, size_t(uint64_t(w.offset) - pos)};
    }
    uint8_t* frame = frames.data() + j * kFramingSize;
    const size_t length = size_t(w.size) - kFramingSize;
    iov[n_iov++] = platform::Span{frame, kHeaderSize};
    if (length > 0) {
      iov[n_iov++] = platform::Span{batch.data.data() + batch.offsets[w.out], length};
    }
    iov[n_iov++] = platform::Span{frame + kHeaderSize, kFooterSize};
    pos = uint64_t(w.offset + w.size);
  }
  const uint64_t start = uint64_t(first->offset);
  const size_t got = platform::read_spans_at(file_, iov, n_iov, start, path_);

  for (size_t j = 0; j < count; ++j) {
    const Wanted& w = first[j];
    check_record(w.index, frames.data() + j * kFramingSize,
                 batch.data.data() + batch.offsets[w.out], start + got);
  }
}

void RandomAccessReader::check_record(size_t index, const uint8_t* frame, const uint8_t* payload,
                                      uint64_t got_end) const {
  check_framed(path_, index, offsets_[index], sizes_[index], frame, payload, got_end,
               options_.verify);
}

std::unique_ptr<RecordBatch> check_fetched(const std::string& name, const uint8_t* data,
                                           size_t data_size, const FetchedRecord* records, size_t n,
                                           bool verify) {
  auto batch = std::make_unique<RecordBatch>();
  batch->offsets.resize(n + 1);
  batch->positions.resize(n);
  batch->offsets[0] = 0;
  for (size_t k = 0; k < n; ++k) {
    const FetchedRecord& r = records[k];
    if (r.size < int64_t(kFramingSize) || r.start < 0 || uint64_t(r.start) > data_size ||
        uint64_t(r.size) > data_size - uint64_t(r.start)) {
      throw std::invalid_argument("fetched record " + std::to_string(k) +
                                  " lies outside the fetched bytes");
    }
    batch->offsets[k + 1] = batch->offsets[k] + r.size - int64_t(kFramingSize);
    batch->positions[k] = r.offset;
  }
  batch->data.reserve(size_t(batch->offsets[n]) + 1);  // resize() stays within the capacity
  batch->data.resize(size_t(batch->offsets[n]));
  for (size_t k = 0; k < n; ++k) {
    const FetchedRecord& r = records[k];
    const uint8_t* record = data + r.start;
    const size_t length = size_t(r.size) - kFramingSize;
    uint8_t frame[kFramingSize];
    std::memcpy(frame, record, kHeaderSize);
    std::memcpy(frame + kHeaderSize, record + kHeaderSize + length, kFooterSize);
    uint8_t* payload = batch->data.data() + batch->offsets[k];
    std::memcpy(payload, record + kHeaderSize, length);
    check_framed(name, r.index, r.offset, r.size, frame, payload,
                 uint64_t(r.offset) + uint64_t(r.size), verify);
  }
  return batch;
}

void RandomAccessReader::read_one(size_t index, uint8_t* payload) const {
  if (index >= offsets_.size()) {
    throw std::out_of_range("record index " + std::to_string(index) +
                            " out of range for an index of " + std::to_string(offsets_.size()) +
                            " records");
  }
  check_stale();
  uint64_t file_size = file_size_;
  check_fits(index, &file_size);
  uint8_t frame[kFramingSize];
  const uint64_t start = uint64_t(offsets_[index]);
  const size_t length = payload_size(index);
  if (length <= kSmallRecord) {  // one plain pread into the stack: cheaper than a 3-part preadv
    uint8_t record[kSmallRecord + kFramingSize];
    platform::Span whole = {record, length + kFramingSize};
    const size_t got = platform::read_spans_at(file_, &whole, 1, start, path_);
    std::memcpy(frame, record, kHeaderSize);
    std::memcpy(frame + kHeaderSize, record + kHeaderSize + length, kFooterSize);
    std::memcpy(payload, record + kHeaderSize, length);
    check_record(index, frame, payload, start + got);
    return;
  }
  platform::Span iov[3] = {
      {frame, kHeaderSize}, {payload, payload_size(index)}, {frame + kHeaderSize, kFooterSize}};
  const size_t got = platform::read_spans_at(file_, iov, 3, start, path_);
  check_record(index, frame, payload, start + got);
}

}  // namespace tfr
