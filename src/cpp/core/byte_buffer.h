// A growable byte buffer that, unlike std::vector, never zero-fills what it is about to overwrite.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace tfr {

class ByteBuffer {
 public:
  ByteBuffer() = default;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;
  ByteBuffer(ByteBuffer&& other) noexcept { swap(other); }
  ByteBuffer& operator=(ByteBuffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~ByteBuffer() { std::free(data_); }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

  void reserve(size_t capacity) {
    if (capacity <= capacity_) return;
    void* p = std::realloc(data_, capacity);
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<uint8_t*>(p);
    capacity_ = capacity;
  }

  // Makes room for `extra` more bytes (growing geometrically) and returns where they go.
  // The caller writes them and then commits with resize(). Growing keeps every byte within the
  // old capacity, committed or not, so a caller may write ahead over several calls.
  uint8_t* grow_for(size_t extra) {
    if (size_ + extra > capacity_) grow(size_ + extra);
    return data_ + size_;
  }

  void resize(size_t size) { size_ = size; }  // only within capacity
  void append(const uint8_t* p, size_t n) {
    if (n == 0) return;
    std::memcpy(grow_for(n), p, n);
    size_ += n;
  }
  void clear() { size_ = 0; }

 private:
  // (apart, so that the check above is inlined into the decoder's per-value loops)
  void grow(size_t needed) {
    size_t want = capacity_ ? capacity_ : 4096;
    while (want < needed) want *= 2;
    reserve(want);
  }

  void swap(ByteBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace tfr
