// Recycles the byte buffers of RecordBatches that died, for the next batches of the same readers.
// A batch much larger than the CPU caches (1024 records of 100 KB) is otherwise a fresh allocation
// every time: the allocator maps new pages, and faulting them in costs more than reading the
// records into them. A buffer comes back only when its batch is destroyed, that is when nothing
// (no numpy array, memoryview or column) views it any more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "byte_buffer.h"

namespace tfr {

class BufferPool {
 public:
  // Keeps at most max_buffers buffers of at most max_bytes (their capacities) together; more
  // batches than that alive at once simply allocate.
  explicit BufferPool(size_t max_buffers, size_t max_bytes = SIZE_MAX)
      : max_buffers_(max_buffers), max_bytes_(max_bytes) {}

  // A kept buffer, emptied: the smallest that holds `wanted` bytes, else the largest (it grows
  // least); or a new one if none is kept.
  ByteBuffer take(size_t wanted) {
    std::lock_guard<std::mutex> lock(mu_);
    if (kept_.empty()) return ByteBuffer();
    size_t best = 0;
    for (size_t i = 1; i < kept_.size(); ++i) {
      const size_t have = kept_[i].capacity(), best_have = kept_[best].capacity();
      const bool fits = have >= wanted, best_fits = best_have >= wanted;
      if (fits != best_fits ? fits : (fits ? have < best_have : have > best_have)) best = i;
    }
    ByteBuffer out = std::move(kept_[best]);
    kept_.erase(kept_.begin() + std::ptrdiff_t(best));
    kept_bytes_ -= out.capacity();
    out.clear();
    return out;
  }

  // Keeps `buffer` for a later take(), unless the pool is full (then it is freed).
  void give(ByteBuffer&& buffer) {
    const size_t size = buffer.capacity();
    if (size == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (kept_.size() < max_buffers_ && size <= max_bytes_ - kept_bytes_) {
      kept_.push_back(std::move(buffer));
      kept_bytes_ += size;
    }
  }

  size_t max_buffers() const { return max_buffers_; }
  size_t max_bytes() const { return max_bytes_; }
  size_t kept_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_bytes_;
  }

 private:
  std::mutex mu_;
  std::vector<ByteBuffer> kept_;
  size_t kept_bytes_ = 0;  // the capacities of kept_
  const size_t max_buffers_;
  const size_t max_bytes_;
};

}  // namespace tfr
