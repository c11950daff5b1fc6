// The reader when memory runs out in the middle of a batch: the batch it returns is whole (its
// offsets, positions and bytes agree, its records are the stream's first ones) and the input is
// positioned right after it; the next call reports the failure. A program of its own, because it
// replaces the global operator new (armed to fail once, at a chosen allocation).
#include <atomic>
#include <cstdlib>
#include <new>

#include "record_fixtures.h"

namespace {

// Allocations left before the one that fails; negative: none fails.
std::atomic<long> g_until_failure{-1};

void* allocate(std::size_t n) {
  if (g_until_failure.load() >= 0 && g_until_failure.fetch_sub(1) == 0) throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using fixtures::frames;
using fixtures::header_offsets;
using fixtures::numbered;

TEST(a_failed_allocation_leaves_batch_and_input_consistent) {
  std::vector<std::string> payloads;
  for (size_t i = 0; i < 3000; ++i) payloads.push_back(numbered(i, 10 + i % 90));
  const std::string stream = frames(payloads);
  const std::vector<int64_t> headers = header_offsets(payloads);
  // The default buffer holds the whole stream; a 4 KiB one makes records straddle refills, so
  // that they take the careful path, whose room for the record is made after its header is read.
  for (size_t buffer_size : {size_t(1) << 20, size_t(4096)}) {
    tfr::ReaderOptions options;
    options.buffer_size = buffer_size;
    size_t failed = 0;
    for (long nth = 0; nth < 400; ++nth) {  // every allocation of the first batches, in turn
      tfr::RecordReader reader(fixtures::source(stream), options);
      std::vector<std::unique_ptr<tfr::RecordBatch>> batches;
      batches.reserve(3);  // (the test's own allocations come before the armed ones)
      bool threw = false;
      g_until_failure = nth;
      try {
        for (int k = 0; k < 3; ++k) batches.push_back(reader.read_batch(SIZE_MAX, 16 << 10));
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      const bool hit = g_until_failure.exchange(-1) < 0;
      if (!hit) break;  // past the last allocation: all were tried
      ++failed;
      size_t i = 0;  // the batches returned hold the stream's first records, whole
      for (const auto& batch : batches) {
        const size_t n = batch->size();
        REQUIRE_EQ(batch->offsets.size(), n + 1) << "allocation " << nth;
        CHECK_EQ(batch->offsets[n], int64_t(batch->data.size())) << "allocation " << nth;
        for (size_t r = 0; r < n; ++r, ++i) {
          REQUIRE(i < payloads.size());
          CHECK_EQ(batch->positions[r], headers[i]) << "allocation " << nth;
          CHECK(std::string(reinterpret_cast<const char*>(batch->data.data()) + batch->offsets[r],
                            size_t(batch->offsets[r + 1] - batch->offsets[r])) == payloads[i])
              << "allocation " << nth << ", record " << i;
        }
      }
      CHECK_EQ(reader.records_read(), i) << "allocation " << nth;
      CHECK_EQ(reader.tell(), uint64_t(headers[i])) << "allocation " << nth;
      if (!threw) {  // the failure ended a batch early: the next call reports it
        CHECK(check::thrown<std::bad_alloc>([&] { reader.read_batch(SIZE_MAX, 16 << 10); }))
            << "allocation " << nth;
      }
    }
    CHECK(failed > 3) << failed << " allocations tried, buffer " << buffer_size;
  }
}

RUN_ALL_TESTS()
