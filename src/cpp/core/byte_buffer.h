// A growable byte buffer that, unlike std::vector, never zero-fills what it is about to overwrite.
// On Linux a large buffer is a mapping of its own that asks for transparent huge pages and grows
// by mremap (no copy): a batch of 1024 records of 100 KB is otherwise 27,000 page faults, which
// cost more than reading the records into it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#ifdef __linux__
#include <sys/mman.h>
#define TFR_MAPPED_BUFFERS 1
#endif

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
  ~ByteBuffer() { release(); }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

  void reserve(size_t capacity) {
    if (capacity <= capacity_) return;
#ifdef TFR_MAPPED_BUFFERS
    if (capacity >= kMappedFrom) return reserve_mapped(capacity);
#endif
    void* p = std::realloc(data_, capacity);
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<uint8_t*>(p);
    capacity_ = capacity;
  }

  static constexpr size_t kMappedFrom = size_t(4) << 20;

  // Makes room for `extra` more bytes (growing geometrically) and returns where they go.
  // The caller writes them and then commits with resize().
  uint8_t* grow_for(size_t extra) {
    if (size_ + extra > capacity_) {
      size_t want = capacity_ ? capacity_ : 4096;
      while (want < size_ + extra) want *= 2;
      reserve(want);
    }
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
#ifdef TFR_MAPPED_BUFFERS
  void reserve_mapped(size_t capacity) {
    constexpr size_t kHugePage = size_t(2) << 20;
    capacity = (capacity + kHugePage - 1) & ~(kHugePage - 1);
    void* p = mapped_ ? mremap(data_, capacity_, capacity, MREMAP_MAYMOVE)
                      : mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                             -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    madvise(p, capacity, MADV_HUGEPAGE);  // advice: without huge pages to give, nothing changes
#endif
    if (!mapped_) {
      if (size_ > 0) std::memcpy(p, data_, size_);
      std::free(data_);
    }
    data_ = static_cast<uint8_t*>(p);
    capacity_ = capacity;
    mapped_ = true;
  }
#endif

  void release() {
#ifdef TFR_MAPPED_BUFFERS
    if (mapped_) {
      munmap(data_, capacity_);
      return;
    }
#endif
    std::free(data_);
  }

  void swap(ByteBuffer& other) noexcept {
    std::swap(mapped_, other.mapped_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

  uint8_t* data_ = nullptr;
  bool mapped_ = false;  // data_ is a mapping of its own (munmap), not a malloc block
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace tfr
