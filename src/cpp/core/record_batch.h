// A batch of records in one buffer: what the reader fills, the encoder writes and the writer takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "buffer_pool.h"
#include "byte_buffer.h"

namespace tfr {

// Records as one contiguous byte buffer plus n + 1 offsets, like an Arrow binary column.
// Payload i is data[offsets[i], offsets[i + 1]); positions[i] is where its header starts in the
// (decompressed) stream.
struct RecordBatch {
  ByteBuffer data;
  std::vector<int64_t> offsets{0};
  std::vector<int64_t> positions;
  std::shared_ptr<BufferPool> pool;  // gets `data` back when the batch dies (may be null)

  RecordBatch() = default;
  RecordBatch(const RecordBatch&) = delete;
  RecordBatch& operator=(const RecordBatch&) = delete;
  ~RecordBatch() {
    if (pool) pool->give(std::move(data));
  }

  size_t size() const { return positions.size(); }
};

}  // namespace tfr
