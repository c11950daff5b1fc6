#include "record_writer.h"

#include <cstring>
#include <stdexcept>

#include "crc32c.h"
#include "errors.h"
#include "record_format.h"

namespace tfr {

RecordWriter::RecordWriter(std::unique_ptr<Sink> sink, size_t buffer_size)
    : sink_(std::move(sink)), capacity_(std::max<size_t>(buffer_size, 4096)) {
  buffer_.reserve(capacity_);
}

RecordWriter::~RecordWriter() {
  try {
    close();
  } catch (...) {
  }
}

void RecordWriter::check_usable() {
  if (closed_) throw std::logic_error("write to a closed TFRecordWriter");
  if (failed_) throw IoError(EIO, "TFRecordWriter for '" + sink_->name() + "' failed earlier");
}

bool RecordWriter::try_write_buffered(const uint8_t* data, size_t n) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || closed_ || failed_) return false;  // write() waits or says why
  if (n + kFramingSize > capacity_ / 2 || buffer_.size() + n + kFramingSize > capacity_) {
    return false;
  }
  write_locked(data, n);
  return true;
}

void RecordWriter::drain() {
  if (buffer_.size() == 0) return;
  try {
    sink_->write(buffer_.data(), buffer_.size());
  } catch (...) {
    failed_ = true;
    throw;
  }
  buffer_.clear();
}

void RecordWriter::write_locked(const uint8_t* data, size_t n) {
  if (n != header_length_) {
    store_le64(header_, n);
    store_le32(header_ + 8, crc32c_mask(crc32c(header_, 8)));
    header_length_ = n;
  }
  uint8_t footer[kFooterSize];
  store_le32(footer, crc32c_mask(crc32c(data, n)));

  if (n + kFramingSize > capacity_ / 2) {  // big: no copy into the buffer
    drain();  // the records already buffered go first: order is the callers' order
    try {
      sink_->write(header_, kHeaderSize);
      sink_->write(data, n);
      sink_->write(footer, kFooterSize);
    } catch (...) {
      failed_ = true;
      throw;
    }
  } else {
    if (buffer_.size() + n + kFramingSize > capacity_) drain();
    uint8_t* out = buffer_.grow_for(n + kFramingSize);
    std::memcpy(out, header_, kHeaderSize);
    std::memcpy(out + kHeaderSize, data, n);
    std::memcpy(out + kHeaderSize + n, footer, kFooterSize);
    buffer_.resize(buffer_.size() + n + kFramingSize);
  }
  // Only this thread (holding mu_) changes the count: a plain store, no locked increment.
  records_.store(records_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void RecordWriter::write(const uint8_t* data, size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  write_locked(data, n);
}

void RecordWriter::write_batch(const uint8_t* data, const int64_t* offsets, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  for (size_t i = 0; i < count; ++i) {
    write_locked(data + offsets[i], size_t(offsets[i + 1] - offsets[i]));
  }
}

void RecordWriter::write_all(const View* records, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  for (size_t i = 0; i < count; ++i) write_locked(records[i].data, records[i].size);
}

void RecordWriter::flush(bool sync) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  drain();
  try {
    sink_->flush(sync);
  } catch (...) {
    // A compressed sink may have lost flushed bytes (later ones would follow a hole), and a
    // failed fsync may have lost data: like a failed write, this ends the writer.
    failed_ = true;
    throw;
  }
}

void RecordWriter::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  // Even after a failure, completed records in the buffer go out and the stream is finished, so
  // a compressed file stays decodable up to the last complete record.
  std::exception_ptr first;
  try {
    if (!failed_) drain();
  } catch (...) {
    first = std::current_exception();
  }
  try {
    sink_->close();
  } catch (...) {
    if (!first) first = std::current_exception();
  }
  if (first) std::rethrow_exception(first);
}

uint64_t RecordWriter::records_written() const { return records_.load(); }

}  // namespace tfr
