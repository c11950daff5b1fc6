// Recycles the byte buffers of RecordBatches that died, for the next batches of the same readers.
// A batch much larger than the CPU caches (1024 records of 100 KB) is otherwise a fresh allocation
// every time: the allocator maps new pages, and faulting them in costs more than reading the
// records into them. A buffer comes back only when its batch is destroyed, that is when nothing
// (no numpy array, memoryview or column) views it any more. Buffers kept past `hot_bytes` are
// released lazily (platform::release_lazily): the OS may take their pages back when it needs the
// memory, and until it does they are reused without page faults.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "byte_buffer.h"
#include "platform.h"

namespace tfr {

class BufferPool {
 public:
  // Keeps at most max_buffers buffers of at most max_bytes (their capacities) together; more
  // batches than that alive at once simply allocate. Of those bytes, the ones past hot_bytes
  // are kept only where the OS can take them back lazily.
  explicit BufferPool(size_t max_buffers, size_t max_bytes = SIZE_MAX, size_t hot_bytes = SIZE_MAX)
      : max_buffers_(max_buffers),
        max_bytes_(max_bytes),
        hot_bytes_(std::min(hot_bytes, max_bytes)) {}

  // For a batch of `wanted` bytes: the smallest kept buffer that holds them, emptied, or an empty
  // new one when none does or the best is far larger (a small batch must not pin a large buffer).
  ByteBuffer take(size_t wanted) { return take_best(wanted, false); }

  // For a batch that grows up to `limit` bytes (SIZE_MAX: no limit): the smallest kept buffer that
  // holds them, else the largest (it grows least); never one far larger than the limit.
  ByteBuffer take_up_to(size_t limit) { return take_best(limit, true); }

  // Keeps `buffer` for a later take(). A full pool first lets go of the buffers it has kept
  // longest: the newest are the likeliest to fit what comes next (batch buffers and large
  // decoded columns of many sizes share a pool). Never throws (batches give back from their
  // destructors): a buffer that cannot be kept is freed.
  void give(ByteBuffer&& buffer) noexcept {
    try {
      keep_or_free(std::move(buffer));
    } catch (...) {
    }
  }

  size_t max_buffers() const { return max_buffers_; }
  size_t max_bytes() const { return max_bytes_; }
  size_t hot_bytes() const { return hot_bytes_; }
  size_t kept_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_bytes_;
  }

 private:
  void keep_or_free(ByteBuffer&& buffer) {
    const size_t size = buffer.capacity();
    if (size == 0 || size > max_bytes_ || max_buffers_ == 0) return;
    std::vector<ByteBuffer> evicted;  // freed after the lock is released
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (size <= hot_bytes_ - std::min(kept_bytes_, hot_bytes_)) {
        make_room(size, evicted);
        return keep(std::move(buffer));
      }
    }
    // Past the hot bytes (madvise outside the lock: it walks every page of the buffer). Nothing
    // kept is let go of for a buffer the OS cannot take back lazily: that one is freed.
    if (!platform::release_lazily(buffer.data(), size)) return;
    std::lock_guard<std::mutex> lock(mu_);
    make_room(size, evicted);
    keep(std::move(buffer));
  }

  ByteBuffer take_best(size_t wanted, bool or_largest) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t fit = kept_.size(), largest = kept_.size();
    for (size_t i = 0; i < kept_.size(); ++i) {
      const size_t have = kept_[i].capacity();
      if (have >= wanted && (fit == kept_.size() || have < kept_[fit].capacity())) fit = i;
      if (largest == kept_.size() || have > kept_[largest].capacity()) largest = i;
    }
    const size_t best = fit != kept_.size() ? fit : or_largest ? largest : kept_.size();
    if (best == kept_.size()) return ByteBuffer();
    if (wanted != SIZE_MAX && kept_[best].capacity() > wanted &&
        kept_[best].capacity() - wanted > wanted + kSlack) {
      return ByteBuffer();
    }
    ByteBuffer out = std::move(kept_[best]);
    kept_.erase(kept_.begin() + std::ptrdiff_t(best));
    kept_bytes_ -= out.capacity();
    out.clear();
    return out;
  }

  static constexpr size_t kSlack = size_t(1) << 20;  // how far past twice its use a buffer may be

  // Whether `count` buffers of `bytes` in all leave room for one more of `size` bytes.
  bool has_room(size_t size, size_t count, size_t bytes) const {
    return count < max_buffers_ && size <= max_bytes_ - bytes;
  }
  // Moves the oldest kept buffers to `evicted` until one of `size` bytes has room.
  void make_room(size_t size, std::vector<ByteBuffer>& evicted) {
    if (has_room(size, kept_.size(), kept_bytes_)) return;
    evicted.reserve(evicted.size() + kept_.size());  // (what may throw, before any change)
    size_t oldest = 0, bytes = kept_bytes_;
    while (oldest < kept_.size() && !has_room(size, kept_.size() - oldest, bytes)) {
      bytes -= kept_[oldest].capacity();
      evicted.push_back(std::move(kept_[oldest++]));
    }
    kept_.erase(kept_.begin(), kept_.begin() + std::ptrdiff_t(oldest));
    kept_bytes_ = bytes;
  }
  void keep(ByteBuffer&& buffer) {
    const size_t size = buffer.capacity();
    kept_.push_back(std::move(buffer));
    kept_bytes_ += size;
  }

  std::mutex mu_;
  std::vector<ByteBuffer> kept_;
  size_t kept_bytes_ = 0;  // the capacities of kept_
  const size_t max_buffers_;
  const size_t max_bytes_;
  const size_t hot_bytes_;
};

// A buffer that goes back to its pool when it dies: the memory of a numpy array, say.
class PooledBuffer {
 public:
  PooledBuffer(ByteBuffer&& buffer, std::shared_ptr<BufferPool> pool)
      : buffer_(std::move(buffer)), pool_(std::move(pool)) {}
  PooledBuffer(PooledBuffer&&) = default;
  ~PooledBuffer() {
    if (pool_) pool_->give(std::move(buffer_));
  }

  uint8_t* data() { return buffer_.data(); }
  size_t size() const { return buffer_.size(); }

 private:
  ByteBuffer buffer_;
  std::shared_ptr<BufferPool> pool_;
};

}  // namespace tfr
