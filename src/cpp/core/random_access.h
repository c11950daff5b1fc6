// Index files and random access to the records of an uncompressed TFRecord file.
//
// An index lists, for each record in file order, the offset of its header and its framed size
// (12-byte header + payload + 4-byte footer). Its text form is the one the `tfrecord` package and
// NVIDIA DALI write (their tfrecord2idx tools): one line per record, "{offset} {size}\n".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "platform.h"
#include "record_batch.h"
#include "record_format.h"
#include "record_reader.h"

namespace tfr {

// Scans a file reading only record headers (the length checksums are checked, payloads skipped
// with lseek) and appends each record's offset and framed size. Throws DataLoss for a damaged or
// cut file, IoError when it cannot be read.
void scan_index(const std::string& path, std::vector<int64_t>* offsets,
                std::vector<int64_t>* sizes);

// The text form of an index.
std::string format_index(const int64_t* offsets, const int64_t* sizes, size_t n);

// Parses the text form: one "offset size" pair of non-negative decimal integers per line,
// separated by spaces or tabs; CRLF line ends, blank lines and a missing final newline are
// accepted. Throws std::invalid_argument naming `name` and the line of anything else.
void parse_index(const char* text, size_t n, const std::string& name, std::vector<int64_t>* offsets,
                 std::vector<int64_t>* sizes);

// One record fetched elsewhere (a range request to an object store): its framed bytes are at
// `start` in the fetched buffer; it is entry `index` of the index, at `offset` with framed `size`.
struct FetchedRecord {
  int64_t start;
  size_t index;
  int64_t offset;
  int64_t size;
};

// Checks fetched records exactly as RandomAccessReader::read() checks what it reads (the same
// DataLoss errors, named by `name`, the entry's index and offset) and returns their payloads as
// one batch in the given order, positions[k] = records[k].offset. std::invalid_argument if a
// record lies outside [data, data + data_size).
std::unique_ptr<RecordBatch> check_fetched(const std::string& name, const uint8_t* data,
                                           size_t data_size, const FetchedRecord* records, size_t n,
                                           bool verify);

struct RandomAccessOptions {
  bool verify = true;                // check both CRCs (the length field is always checked)
  uint64_t max_gap = 64 << 10;       // records at most this far apart share one read...
  uint64_t max_read = 8 << 20;       // ...as long as the read stays within this many bytes
  std::shared_ptr<BufferPool> pool;  // batches take their buffers from it (null: allocations)
};

// Reads records by their position in an index, with positional reads (pread), so it has no file
// position and one reader can serve many threads at once: read() is const and thread-safe.
// The file descriptor is not meant to outlive a fork; the Python layer reopens in the child.
class RandomAccessReader {
 public:
  // Opens `path`. Entries must have offset >= 0 and size >= 16 (std::invalid_argument
  // otherwise). An index that plainly does not describe the file (a complete index, starting at 0
  // with each record following the last, that ends before or after the end of the file) is not
  // rejected here but makes every read() throw DataLoss (reason kIndexMismatch).
  RandomAccessReader(const std::string& path, std::vector<int64_t> offsets,
                     std::vector<int64_t> sizes, RandomAccessOptions options = {});
  ~RandomAccessReader();
  RandomAccessReader(const RandomAccessReader&) = delete;
  RandomAccessReader& operator=(const RandomAccessReader&) = delete;

  size_t size() const { return offsets_.size(); }
  const std::string& path() const { return path_; }

  // Reads the records at the given index positions (each < size(), else std::out_of_range;
  // duplicates allowed) into one batch, in the order asked for; positions[k] of the batch is the
  // header offset of record indices[k]. The records are read in file order, nearby ones
  // coalesced into single preadv() calls straight into the batch.
  // Throws DataLoss naming the record (its index position and offset): kIndexMismatch when the
  // bytes at an entry are not a record of the entry's size (no valid header there, another
  // length, or the file ends first: a stale index or one of another file), kDataChecksum when
  // the header matches but the payload fails its checksum.
  std::unique_ptr<RecordBatch> read(const int64_t* indices, size_t n) const;

  // Payload bytes of record `index` (< size()), as the index says.
  size_t payload_size(size_t index) const { return size_t(sizes_[index]) - kFramingSize; }

  // Reads record `index` (< size()) into `payload` (payload_size(index) bytes) with one preadv;
  // the same checks and errors as read(), without a batch: the fast path for single records.
  void read_one(size_t index, uint8_t* payload) const;

 private:
  struct Wanted;  // one distinct record of a read() call
  void read_run(const Wanted* first, size_t count, RecordBatch& batch, uint8_t* gap_scratch) const;
  void check_stale() const;
  void check_fits(size_t index, uint64_t* file_size) const;
  // Checks one record read at its entry: `frame` holds its 12-byte header then its 4-byte footer,
  // `got_end` is how far (absolute offset) the read reached.
  void check_record(size_t index, const uint8_t* frame, const uint8_t* payload,
                    uint64_t got_end) const;
  [[noreturn]] void mismatch(size_t index, const std::string& detail) const;

  std::string path_;
  platform::File file_ = platform::kNoFile;
  std::vector<int64_t> offsets_;
  std::vector<int64_t> sizes_;
  RandomAccessOptions options_;
  uint64_t file_size_ = 0;  // at open (read() re-checks when an entry reaches past it)
  std::string stale_;       // why the index as a whole does not describe the file, if it does not
  uint64_t stale_index_ = 0;
};

}  // namespace tfr
