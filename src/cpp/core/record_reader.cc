#include "record_reader.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "crc32c.h"
#include "errors.h"
#include "record_format.h"

namespace tfr {
namespace {

// No real record is this long; a length beyond it is damage, whatever the source.
constexpr uint64_t kMaxRecordLength = uint64_t(1) << 48;
// Records past the size of the largest protobuf (2 GiB) exist, but one of 4 GiB in a file that is
// shorter than that is far likelier a damaged length than a cut file.
constexpr uint64_t kImplausibleLength = uint64_t(1) << 32;
// Streams of unknown size grow a large payload step by step, so a lying length field can never
// make us allocate more than the data that actually arrives (times two).
constexpr size_t kFirstChunk = 1 << 20;
// Buffers a reader keeps for itself by default: the batch being read and the one just dropped.
constexpr size_t kOwnPoolBuffers = 2;
// read_header's answer at the clean end of the stream (no real length is this large).
constexpr uint64_t kEnd = UINT64_MAX;

std::string at(uint64_t offset) { return " at " + std::to_string(offset); }

}  // namespace

RecordReader::RecordReader(std::unique_ptr<Source> source, ReaderOptions options)
    : pool_(std::make_shared<BufferPool>(kOwnPoolBuffers)),
      source_(std::move(source)),
      in_(*source_, std::max<size_t>(options.buffer_size, 4096)),
      options_(options),
      size_known_(source_->total_size().has_value()) {
  // Every entry starts as the (true) checksum of length 0, so the table never holds a wrong one.
  const uint8_t zero_length[8] = {};
  const LengthCrc empty{0, crc32c_mask(crc32c(zero_length, 8))};
  for (LengthCrc& entry : length_crcs_) entry = empty;
  last_length_crc_ = empty;
}

// What a stream read as uncompressed looks like when it was compressed after all, or "".
std::string RecordReader::compression_hint(LossReason reason, uint64_t start) const {
  if (!options_.hint_compression || start != 0 || reason == LossReason::kDataChecksum) return "";
  const uint8_t* h = in_.head();
  const char* kind = h[0] == 0x1f && h[1] == 0x8b                                     ? "gzip"
                     : (h[0] & 0x0f) == 8 && ((unsigned(h[0]) << 8) | h[1]) % 31 == 0 ? "zlib"
                                                                                      : nullptr;
  if (kind == nullptr) return "";
  return std::string("; the file starts like a ") + kind + " stream: pass compression='" + kind +
         "' or 'auto'";
}

void RecordReader::fail(LossReason reason, uint64_t start, const std::string& detail) {
  throw DataLoss(reason, source_->name(), records_ + skipped_total_, start,
                 detail + compression_hint(reason, start));
}

std::vector<DataLoss> RecordReader::take_skipped() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(skipped_, {});
}

bool RecordReader::plausible_header(const uint8_t* header) {
  if (crc32c_mask(crc32c(header, 8)) != load_le32(header + 8)) return false;
  const uint64_t length = load_le64(header);
  if (length > kMaxRecordLength) return false;
  auto remaining = in_.remaining();
  return !remaining || kHeaderSize + length + kFooterSize <= *remaining;
}

bool RecordReader::recover(const DataLoss& loss) {
  skipped_.push_back(loss);
  ++skipped_total_;
  switch (loss.reason) {
    case LossReason::kDataChecksum:  // the length was right: the next record follows the footer
      in_.consume(kFooterSize);
      return true;
    case LossReason::kLengthChecksum:
    case LossReason::kLengthTooLarge: {
      // The length cannot be trusted: look for the next header that checks out, byte by byte.
      for (;;) {
        in_.consume(1);
        const size_t avail = in_.fill(kHeaderSize);
        if (avail < kHeaderSize) {
          in_.consume(avail);
          skipped_.back().detail += "; no valid record header follows";
          ended_ = true;
          return false;
        }
        if (plausible_header(in_.peek())) break;
      }
      skipped_.back().detail +=
          "; resumed at the next valid header, offset " + std::to_string(in_.offset());
      return true;
    }
    default:  // truncated, or a compressed stream that cannot be inflated further
      ended_ = true;
      return false;
  }
}

void RecordReader::rethrow_pending() {
  if (pending_) std::rethrow_exception(pending_);
}

void RecordReader::keep_or_retry(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const DataLoss& loss) {
    // A record cut by the end of a file that is still being written: the next call reads it
    // again from its header, as TensorFlow retries (sources that cannot go back keep the error).
    if (loss.reason == LossReason::kTruncated && in_.rewind(loss.offset)) return;
  } catch (...) {
  }
  pending_ = error;
}

void RecordReader::set_pool(std::shared_ptr<BufferPool> pool) {
  std::lock_guard<std::mutex> lock(mu_);
  pool_ = std::move(pool);
}

uint64_t RecordReader::tell() {
  std::lock_guard<std::mutex> lock(mu_);
  return in_.offset();
}

uint64_t RecordReader::records_read() {
  std::lock_guard<std::mutex> lock(mu_);
  return records_;
}

uint64_t RecordReader::read_header() {
  const uint64_t start = in_.offset();
  size_t avail = in_.fill(kHeaderSize);
  if (avail == 0) return kEnd;
  if (avail < kHeaderSize) {
    // TensorFlow takes this for a normal end; a cut file must not look complete.
    fail(LossReason::kTruncated, start,
         "truncated record" + at(start) + ": the stream ends " + std::to_string(avail) +
             " bytes into a 12-byte record header");
  }
  const uint8_t* header = in_.peek();
  const uint64_t length = load_le64(header);
  if (options_.verify && crc32c_mask(crc32c(header, 8)) != load_le32(header + 8)) {
    fail(LossReason::kLengthChecksum, start,
         "corrupted record" + at(start) + ": the length field does not match its checksum");
  }
  check_length(start, length);
  in_.consume(kHeaderSize);
  return length;
}

void RecordReader::check_length(uint64_t start, uint64_t length) {
  if (length > kMaxRecordLength) {
    fail(LossReason::kLengthTooLarge, start,
         "corrupted record" + at(start) + ": its length field says " + std::to_string(length) +
             " bytes, more than any record can hold");
  }
  const uint64_t needed = kHeaderSize + length + kFooterSize;
  if (needed <= in_.buffered()) return;  // all there: no need to ask the source
  auto remaining = in_.remaining();
  if (!remaining || needed <= *remaining) return;
  // A file cut short is the likely story, unless the length is one no real record reaches and the
  // whole file could not hold: then the length field itself is damaged.
  auto total = source_->total_size();
  if (total && length > *total && length >= kImplausibleLength) {
    fail(LossReason::kLengthTooLarge, start,
         "corrupted record" + at(start) + ": its length field says " + std::to_string(length) +
             " bytes, more than the whole file (" + std::to_string(*total) + " bytes)");
  }
  fail(LossReason::kTruncated, start,
       "truncated record" + at(start) + ": it needs " + std::to_string(needed) +
           " bytes but the file ends after " + std::to_string(*remaining));
}

void RecordReader::read_payload(uint64_t start, uint64_t length, ByteBuffer& out) {
  // Large payloads are read straight into the batch; then read ahead only the footer and the
  // next header, so the next large payload is not staged and copied. Small ones share big reads.
  const bool large = length >= BufferedInput::kDirectRead;
  in_.set_readahead(large ? kFramingSize : in_.capacity());
  // When the size of the source is known, check_length has already bounded `length`.
  const bool bounded = size_known_;
  uint64_t done = 0;
  while (done < length) {
    uint64_t step = length - done;
    if (!bounded) step = std::min<uint64_t>(step, std::max<uint64_t>(kFirstChunk, done));
    uint8_t* dst = out.grow_for(size_t(step));
    size_t got = in_.read(dst, size_t(step));
    out.resize(out.size() + got);
    done += got;
    if (got < step) {
      fail(LossReason::kTruncated, start,
           "truncated record" + at(start) + ": the stream ends " + std::to_string(done) +
               " bytes into its " + std::to_string(length) + "-byte payload");
    }
  }
}

void RecordReader::fail_stream(const StreamError& e, uint64_t start) {
  fail(e.truncated ? LossReason::kTruncated : LossReason::kCompressedStream, start,
       std::string(e.truncated ? "truncated record" : "corrupted record") + at(start) + ": " +
           e.what());
}

namespace {

// Records whose checksums are computed in one crc32c_many call: enough independent streams to
// hide the crc32 instruction's latency, few enough that their spans stay in registers and cache.
constexpr size_t kCrcGroup = 8;
// Records whose offsets and positions join the batch's vectors at once (one insert each).
constexpr size_t kChunk = 256;

// Copies a record's payload. Small ones (most records of small-record files) without a call, as
// moves of 16 bytes from the start and from the end that may overlap: nothing is read or written
// outside [src, src + n) and [dst, dst + n).
inline void copy16(uint8_t* dst, const uint8_t* src) { std::memcpy(dst, src, 16); }

inline void copy_payload(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n > 64) {
    std::memcpy(dst, src, n);
  } else if (n > 32) {
    copy16(dst, src);
    copy16(dst + 16, src + 16);
    copy16(dst + n - 32, src + n - 32);
    copy16(dst + n - 16, src + n - 16);
  } else if (n >= 16) {
    copy16(dst, src);
    copy16(dst + n - 16, src + n - 16);
  } else if (n >= 8) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

// Room for k more records' offsets and positions, growing geometrically. Made before a record
// is taken from the input, so that an allocation that fails takes nothing: never a record
// consumed and lost, nor one in one vector and not the other.
void make_room(RecordBatch& batch, size_t k) {
  for (std::vector<int64_t>* v : {&batch.offsets, &batch.positions}) {
    if (v->capacity() - v->size() < k) v->reserve(std::max(2 * v->capacity(), v->size() + k));
  }
}

}  // namespace

size_t RecordReader::read_buffered_records(RecordBatch& batch, size_t max_records,
                                           size_t max_bytes) {
  // A group of records at a time. Its framing first: records wholly buffered that fit the batch,
  // each header checked by a compare when its length's checksum is known (then a damaged length
  // is caught before it is used); the others are checked after the group's crc32c_many call,
  // whose independent streams overlap where one record's two short checksums would wait on each
  // other. Then the payload checks and copies. Offsets and positions gather in local arrays and
  // join the batch a chunk of records at a time, together with the bytes and the input position,
  // so that the batch and the input always move together.
  const uint8_t* const start = in_.peek();
  const uint8_t* const end = start + in_.buffered();
  uint64_t position = in_.offset();  // of the next record to check
  const bool verify = options_.verify;
  LengthCrc last = last_length_crc_;  // (a local: the stores below cannot alias it)
  const uint8_t* next = start;        // the header of the next record to frame
  const uint8_t* committed = start;   // the input taken into the batch so far
  size_t bytes = batch.data.size();   // the batch's bytes with the records framed so far
  int64_t offsets[kChunk], positions[kChunk];
  size_t pending = 0, taken = 0;
  const size_t count = batch.size();
  auto commit = [&] {
    if (pending == 0) return;
    make_room(batch, pending);  // the one step that may throw: then nothing has changed
    batch.offsets.insert(batch.offsets.end(), offsets, offsets + pending);
    batch.positions.insert(batch.positions.end(), positions, positions + pending);
    batch.data.resize(bytes);
    in_.consume(size_t(next - committed));
    committed = next;
    records_ += pending;
    taken += pending;
    pending = 0;
  };
  for (;;) {
    if (pending + kCrcGroup > kChunk) commit();
    // The group's payloads in spans[0, n); headers with a length not seen yet in headers[].
    Crc32cSpan spans[2 * kCrcGroup], headers[kCrcGroup];
    size_t header_of[kCrcGroup];  // record k's header is headers[header_of[k] - 1]; 0: intact
    size_t n = 0, h = 0, group_bytes = bytes;
    const size_t limit = std::min(kCrcGroup, max_records - (count + taken + pending));
    for (const uint8_t* at = next; n < limit; ++n) {
      const size_t left = size_t(end - at);
      if (left < kFramingSize) break;
      const uint64_t length = load_le64(at);
      if (verify) {
        const uint32_t stored = load_le32(at + 8);
        if (length == last.length && stored == last.masked_crc) {
          header_of[n] = 0;  // records of one size: the previous record's header again
        } else if (const LengthCrc& known = length_crcs_[length % kLengthCrcs];
                   known.length == length) {
          if (known.masked_crc != stored) break;  // damaged: the careful path reports it
          header_of[n] = 0;
          last = known;
        } else {
          headers[h++] = {at, 8};
          header_of[n] = h;
        }
      }
      if (length > left - kFramingSize) break;
      spans[n] = {at + kHeaderSize, size_t(length)};
      group_bytes += size_t(length);
      at += size_t(length) + kFramingSize;
    }
    // Past max_bytes: the records that took the batch there wait for the next one (a batch's
    // first record is taken whatever its size).
    while (group_bytes > max_bytes && n > 0 && count + taken + pending + n > 1) {
      group_bytes -= spans[--n].size;
    }
    if (n == 0) break;
    uint32_t crcs[2 * kCrcGroup];
    if (verify) {
      std::copy(headers, headers + h, spans + n);
      crc32c_many(spans, n + h, crcs);
    }
    batch.data.grow_for(group_bytes - batch.data.size());  // (keeps the bytes not committed yet)
    uint8_t* out = batch.data.data() + bytes;
    size_t good = 0;
    for (; good < n; ++good) {
      const uint8_t* const payload = spans[good].data;
      const size_t size = spans[good].size;
      if (verify) {
        if (h != 0 && header_of[good] != 0) {
          const uint32_t stored = load_le32(payload - 4);
          if (crc32c_mask(crcs[n + header_of[good] - 1]) != stored) break;
          last = {size, stored};
          last_length_crc_ = last;
          length_crcs_[size % kLengthCrcs] = last;
        }
        if (crc32c_mask(crcs[good]) != load_le32(payload + size)) break;
      }
      copy_payload(out, payload, size);
      out += size;
      bytes += size;
      offsets[pending + good] = int64_t(bytes);
      positions[pending + good] = int64_t(position);
      position += size + kFramingSize;
    }
    if (good > 0) next = spans[good - 1].data + spans[good - 1].size + kFooterSize;
    pending += good;
    if (good < n) break;  // the careful path finds the same damage and reports it
  }
  commit();
  return taken;
}

RecordReader::Step RecordReader::read_record(RecordBatch& batch, size_t max_bytes) {
  const uint64_t start = in_.offset();
  const size_t before = batch.data.size();
  try {
    const uint64_t length = read_header();
    if (length == kEnd) return Step::kEnd;
    if (batch.size() > 0 && before + length > max_bytes) {
      in_.unconsume(kHeaderSize);  // it starts the next batch
      return Step::kFull;
    }
    // Room for its offset and position only now that it joins the batch: a full batch is not
    // grown (and copied) for the record that starts the next one. An allocation that fails
    // puts the header back, so that no record is consumed and lost.
    try {
      make_room(batch, 1);
    } catch (...) {
      in_.unconsume(kHeaderSize);
      throw;
    }
    read_payload(start, length, batch.data);
    if (in_.fill(kFooterSize) < kFooterSize) {
      fail(LossReason::kTruncated, start,
           "truncated record" + at(start) + ": the stream ends inside its data checksum");
    }
    if (options_.verify &&
        crc32c_mask(crc32c(batch.data.data() + before, size_t(length))) != load_le32(in_.peek())) {
      fail(LossReason::kDataChecksum, start,
           "corrupted record" + at(start + kHeaderSize) + ": the data does not match its checksum");
    }
  } catch (const StreamError& e) {
    batch.data.resize(before);  // a damaged record never reaches the caller, not even in part
    fail_stream(e, start);
  } catch (...) {
    batch.data.resize(before);
    throw;
  }
  in_.consume(kFooterSize);
  batch.offsets.push_back(int64_t(batch.data.size()));
  batch.positions.push_back(int64_t(start));
  ++records_;
  return Step::kRecord;
}

bool RecordReader::skip_record() {
  const uint64_t start = in_.offset();
  try {
    const uint64_t length = read_header();
    if (length == kEnd) return false;
    if (in_.skip(length + kFooterSize) < length + kFooterSize) {
      fail(LossReason::kTruncated, start,
           "truncated record" + at(start) + ": the stream ends inside it");
    }
  } catch (const StreamError& e) {
    fail_stream(e, start);
  }
  ++records_;
  return true;
}

std::unique_ptr<RecordBatch> RecordReader::read_batch(size_t max_records, size_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  rethrow_pending();
  auto batch = std::make_unique<RecordBatch>();
  if (ended_) return batch;
  if (pool_) {
    batch->data = pool_->take_up_to(max_bytes);
    batch->pool = pool_;
  }
  // At most 1 MiB up front (a buffer from the pool usually has it already): a batch that needs
  // more grows as it fills, so a large max_bytes costs nothing until records arrive.
  batch->data.reserve(std::min<size_t>(max_bytes, size_t(1) << 20) + 4096);
  // As many records as the last batch held: for records of one size, all this one needs.
  const size_t expected = std::min(max_records, last_batch_records_);
  batch->offsets.reserve(expected + 1);
  batch->positions.reserve(expected);
  try {
    // Whole records already in the buffer go in a tight loop; the careful path handles the
    // record that straddles a refill, large payloads, the end and any damage.
    while (batch->size() < max_records) {
      if (read_buffered_records(*batch, max_records, max_bytes) > 0) continue;
      Step step;
      try {
        step = read_record(*batch, max_bytes);
      } catch (const DataLoss& loss) {
        if (!options_.skip_corrupt) throw;
        if (!recover(loss)) break;
        continue;
      }
      if (step != Step::kRecord) break;
    }
  } catch (...) {
    keep_or_retry(std::current_exception());
    if (batch->size() == 0) throw;
  }
  last_batch_records_ = batch->size();
  return batch;
}

uint64_t RecordReader::count() {
  std::lock_guard<std::mutex> lock(mu_);
  rethrow_pending();
  uint64_t counted = 0;
  try {
    while (skip_record()) ++counted;
  } catch (...) {
    keep_or_retry(std::current_exception());
    throw;
  }
  return counted;
}

void RecordReader::scan(std::vector<int64_t>* offsets, std::vector<int64_t>* sizes) {
  std::lock_guard<std::mutex> lock(mu_);
  rethrow_pending();
  try {
    for (uint64_t start = in_.offset(); skip_record(); start = in_.offset()) {
      offsets->push_back(int64_t(start));
      sizes->push_back(int64_t(in_.offset() - start));
    }
  } catch (...) {
    keep_or_retry(std::current_exception());
    throw;
  }
}

}  // namespace tfr
