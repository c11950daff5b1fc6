// Frames records out of a byte source, verifying both checksums, into RecordBatches.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "buffer_pool.h"
#include "buffered_input.h"
#include "byte_buffer.h"
#include "errors.h"
#include "record_batch.h"
#include "record_format.h"
#include "sources.h"

namespace tfr {

struct ReaderOptions {
  bool verify = true;            // check both CRCs
  size_t buffer_size = 1 << 20;  // bytes per read from the source
  // Skip damaged records instead of stopping: a record whose data fails its checksum is dropped;
  // after a damaged header the reader searches for the next header whose length checksum holds;
  // a truncated tail or a broken compressed stream ends the stream. Each skip is reported.
  bool skip_corrupt = false;
  // The stream is read as uncompressed: damage at its very start says so when its first bytes
  // look like a gzip or zlib header (the usual mistake).
  bool hint_compression = false;
};

// Thread safety: calls are serialised by an internal mutex, so a reader may be shared between
// threads (each call sees a consistent position).
class RecordReader {
 public:
  RecordReader(std::unique_ptr<Source> source, ReaderOptions options);

  // Reads up to max_records records holding at most max_bytes of payload together (a single
  // record may be larger: a batch always holds at least one). An empty batch means the clean end
  // of the stream.
  // Records before a damaged one are returned first; the DataLoss is thrown by the next call, and
  // again by every call after it (the reader does not guess where the next good record starts),
  // except for a record cut by the end of an uncompressed file: later calls read it again from
  // its header, so a file that is still being written is read on once the record is complete.
  std::unique_ptr<RecordBatch> read_batch(size_t max_records, size_t max_bytes);

  // Counts the remaining records reading only their headers (payloads are skipped, so their
  // checksums are not checked).
  uint64_t count();

  // Like count(), and appends each remaining record's header offset and framed size (12-byte
  // header + payload + 4-byte footer) to the vectors: the index of the rest of the stream.
  void scan(std::vector<int64_t>* offsets, std::vector<int64_t>* sizes);

  // The damage skipped so far (skip_corrupt), oldest first; taking them empties the list.
  std::vector<DataLoss> take_skipped();

  // Batches take their byte buffers from `pool` and give them back when they die (null: plain
  // allocations). Readers of one job may share a pool.
  void set_pool(std::shared_ptr<BufferPool> pool);

  uint64_t tell();          // offset of the next record's header
  uint64_t records_read();  // records delivered (or counted) so far
  const std::string& name() const { return source_->name(); }

 private:
  enum class Step { kRecord, kEnd, kFull };
  // Appends the next record unless the stream ended or it would take the batch past max_bytes.
  Step read_record(RecordBatch& batch, size_t max_bytes);
  // The common case, with no I/O: takes the records that are wholly buffered, intact and fit.
  // Returns how many it took.
  size_t read_buffered_records(RecordBatch& batch, size_t max_records, size_t max_bytes);
  bool skip_record();  // false at the clean end
  [[noreturn]] void fail_stream(const StreamError& e, uint64_t start);
  uint64_t read_header();  // returns the payload length; input positioned after it
  void check_length(uint64_t start, uint64_t length);
  void read_payload(uint64_t start, uint64_t length, ByteBuffer& out);
  [[noreturn]] void fail(LossReason reason, uint64_t start, const std::string& detail);
  std::string compression_hint(LossReason reason, uint64_t start) const;
  // skip_corrupt: notes the damage and moves past it. False when nothing more can be read.
  bool recover(const DataLoss& loss);
  bool plausible_header(const uint8_t* header);
  void rethrow_pending();
  // Keeps `error` for every later call, unless it is a truncated record the source can go back
  // to (a growing file): then the next call tries that record again.
  void keep_or_retry(std::exception_ptr error);

  std::mutex mu_;
  std::shared_ptr<BufferPool> pool_;
  std::unique_ptr<Source> source_;
  BufferedInput in_;
  ReaderOptions options_;
  const bool size_known_;  // the source knows its size, so check_length bounds every payload
  uint64_t records_ = 0;
  std::exception_ptr pending_;
  std::vector<DataLoss> skipped_;  // not yet taken by the caller
  uint64_t skipped_total_ = 0;     // records skipped so far (they keep their place in the count)
  bool ended_ = false;             // skip_corrupt hit damage past which nothing can be read
  size_t last_batch_records_ = 0;  // how many records the last batch held
  // Masked CRCs of record lengths, by length modulo the table's size: a header's checksum is a
  // function of its length field alone, so a header whose length is here is checked by a compare
  // (records of one size, or of a few hundred sizes, compute no header checksum after the first).
  struct LengthCrc {
    uint64_t length;
    uint32_t masked_crc;
  };
  static constexpr size_t kLengthCrcs = 256;
  LengthCrc length_crcs_[kLengthCrcs];
  LengthCrc last_length_crc_;  // the last one checked
};

}  // namespace tfr
