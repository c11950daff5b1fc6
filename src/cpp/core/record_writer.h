// Frames records (length, CRCs) into a buffered sink.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "byte_buffer.h"
#include "record_format.h"
#include "sinks.h"

namespace tfr {

// Thread safety: calls are serialised by an internal mutex; records from concurrent writes never
// interleave. After any failure of the sink the writer refuses further writes, since the stream
// may end inside a record (which a reader reports as truncated, never as a valid record).
class RecordWriter {
 public:
  RecordWriter(std::unique_ptr<Sink> sink, size_t buffer_size);
  ~RecordWriter();  // closes, swallowing errors: call close() to see them

  void write(const uint8_t* data, size_t n);
  // Writes records data[offsets[i], offsets[i+1]) for i < count.
  void write_batch(const uint8_t* data, const int64_t* offsets, size_t count);
  // Writes the records at records[i].data (records[i].size bytes) for i < count, in order.
  struct View {
    const uint8_t* data;
    size_t size;
  };
  void write_all(const View* records, size_t count);
  // Writes the record only if that is a copy into the buffer (no I/O) and nobody holds the
  // writer (a flush may be in an fsync): never waits, so callers may hold the GIL. Returns
  // whether it wrote; if not, call write() (without the GIL).
  bool try_write_buffered(const uint8_t* data, size_t n);
  void flush(bool sync);
  void close();
  uint64_t records_written() const;

 private:
  void write_locked(const uint8_t* data, size_t n);
  void drain();  // buffer -> sink
  void check_usable();

  std::mutex mu_;
  std::unique_ptr<Sink> sink_;
  ByteBuffer buffer_;
  size_t capacity_;
  // The header of the last record written: records of one size (the usual case) share it.
  uint8_t header_[kHeaderSize] = {};
  size_t header_length_ = SIZE_MAX;   // its length field, or none yet
  std::atomic<uint64_t> records_{0};  // written under mu_, read without it
  bool closed_ = false;
  bool failed_ = false;
};

}  // namespace tfr
