// A read buffer over a Source: small reads (headers, footers, short payloads) come from one large
// buffer refilled by big reads; large payloads bypass it and land directly in the caller's memory.
// Read-ahead is adjustable: between large payloads it shrinks to the bytes needed, so the next
// payload is not first staged here and then copied again.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "sources.h"

namespace tfr {

class BufferedInput {
 public:
  BufferedInput(Source& source, size_t capacity)
      : source_(source), buf_(new uint8_t[capacity]), capacity_(capacity) {}

  size_t buffered() const { return end_ - pos_; }
  const uint8_t* peek() const { return buf_.get() + pos_; }
  uint64_t offset() const { return offset_; }  // stream offset of peek()
  void consume(size_t n) {
    pos_ += n;
    offset_ += n;
  }
  // Takes back the last n consumed bytes; only valid right after consume(n) with no fill between.
  void unconsume(size_t n) {
    pos_ -= n;
    offset_ -= n;
  }

  // Buffers at least n (<= capacity) bytes unless the stream ends first; returns what is buffered.
  size_t fill(size_t n) {
    if (end_ - pos_ >= n) return end_ - pos_;
    std::memmove(buf_.get(), buf_.get() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
    while (end_ < n) {
      size_t want = std::max(n - end_, std::min(readahead_, capacity_ - end_));
      size_t got = source_.read(buf_.get() + end_, want);
      if (got == 0) break;
      end_ += got;
      // At the stream's start (the first read may bring a single byte).
      if (offset_ == 0) std::memcpy(head_, buf_.get(), std::min<size_t>(end_, 2));
    }
    return end_;
  }

  // The stream's first two bytes (zero if it has fewer, or was first read past the buffer).
  const uint8_t* head() const { return head_; }

  // Copies up to n bytes to dst; fewer only at the end of the stream.
  size_t read(uint8_t* dst, size_t n) {
    size_t done = take(dst, n);
    while (done < n) {
      size_t rest = n - done;
      size_t got;
      // Big, or more than the buffer holds (fill() takes at most its capacity): straight into
      // dst, no second copy.
      if (rest >= kDirectRead || rest > capacity_) {
        got = source_.read(dst + done, rest);
        offset_ += got;
      } else {
        fill(rest);
        got = take(dst + done, rest);
      }
      if (got == 0) break;
      done += got;
    }
    return done;
  }

  // Skips up to n bytes; fewer only at the end of the stream.
  uint64_t skip(uint64_t n) {
    size_t from_buffer = size_t(std::min<uint64_t>(n, buffered()));
    consume(from_buffer);
    uint64_t skipped = from_buffer + (n > from_buffer ? source_.skip(n - from_buffer) : 0);
    offset_ += skipped - from_buffer;
    return skipped;
  }

  // Bytes left in the stream (buffered ones included), when the source knows.
  std::optional<uint64_t> remaining() {
    auto rest = source_.remaining();
    if (!rest) return std::nullopt;
    return *rest + buffered();
  }

  Source& source() { return source_; }

  // Drops what is buffered and goes back to stream offset `offset` (<= offset()), when the source
  // can; false otherwise (nothing changes then).
  bool rewind(uint64_t offset) {
    if (offset > offset_ || !source_.rewind_to(offset)) return false;
    pos_ = end_ = 0;
    offset_ = offset;
    return true;
  }

  // How much fill() may read beyond what it was asked for (at most the capacity).
  void set_readahead(size_t bytes) { readahead_ = std::max<size_t>(bytes, 1); }
  size_t capacity() const { return capacity_; }

  // Reads of this size or more go straight to the caller's memory.
  static constexpr size_t kDirectRead = 32 * 1024;

 private:
  size_t take(uint8_t* dst, size_t n) {
    size_t step = std::min(n, buffered());
    std::memcpy(dst, peek(), step);
    consume(step);
    return step;
  }

  Source& source_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t capacity_;
  size_t readahead_ = SIZE_MAX;
  size_t pos_ = 0;
  size_t end_ = 0;
  uint64_t offset_ = 0;
  uint8_t head_[2] = {0, 0};
};

}  // namespace tfr
