// libFuzzer target: the record reader (framing, both checksums, gzip/zlib inflation, batching,
// count() and scan()) over arbitrary bytes.
//
// Input: two control bytes, then the stream.
//   byte 0  bits 0-1  compression: 0 none, 1 gzip, 2 zlib, 3 none
//           bit  2    verify (set = off, so the zero byte means the defaults)
//           bit  3    skip_corrupt
//           bits 4-5  buffer size: 1 MiB (the default), 4096 (the minimum), 4103, 65536
//           bits 6-7  source: 0 memory (size known), 1 unknown size, 2 unknown size and reads of
//                     at most 1..13 bytes, 3 unknown size and reads of at most 4097 bytes
//   byte 1  bits 0-1  max_records: 1, 2, 7, unlimited
//           bits 2-4  max_bytes: 0, 1, 16, 100, 4096, 65536, 1 MiB, unlimited
//           bit  5    the second reader runs scan() instead of count()
//
// The reader may throw tfr::DataLoss (and, by contract, StreamError or IoError); anything else
// escaping, a broken batch invariant or a disagreement between the readers aborts: a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "errors.h"
#include "record_format.h"
#include "record_reader.h"
#include "sources.h"

namespace {

// Inflated output past this is cut off (the stream then looks truncated), so a small compressed
// input cannot make a run spend seconds and gigabytes inflating zeros.
constexpr uint64_t kMaxStreamBytes = 16 << 20;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_record_reader: %s\n", what);
  std::abort();
}
#define CHECK(cond)                               \
  do {                                            \
    if (!(cond)) finding("check failed: " #cond); \
  } while (0)

// Hides the size of the source it wraps (as a pipe or a Python file-like does), optionally serves
// short reads, and ends the stream after kMaxStreamBytes.
class ShapedSource final : public tfr::Source {
 public:
  ShapedSource(std::unique_ptr<tfr::Source> inner, size_t max_read)
      : Source(inner->name()), inner_(std::move(inner)), max_read_(max_read) {}

  size_t read(uint8_t* dst, size_t n) override {
    if (served_ >= kMaxStreamBytes) return 0;
    size_t want = std::min<uint64_t>(n, kMaxStreamBytes - served_);
    if (max_read_ > 0) want = std::min(want, 1 + (calls_++ % max_read_));
    size_t got = inner_->read(dst, want);
    served_ += got;
    return got;
  }

 private:
  std::unique_ptr<tfr::Source> inner_;
  size_t max_read_;  // 0: no limit
  uint64_t served_ = 0;
  size_t calls_ = 0;
};

struct Config {
  tfr::Compression compression;
  tfr::ReaderOptions options;
  int source_shape;
  size_t max_records;
  size_t max_bytes;
  bool scan;
};

std::unique_ptr<tfr::RecordReader> open(const Config& c, const uint8_t* data, size_t size) {
  std::unique_ptr<tfr::Source> source = std::make_unique<tfr::MemorySource>(data, size);
  if (c.source_shape != 0) {
    source = std::make_unique<ShapedSource>(std::move(source), c.source_shape == 2   ? 13
                                                               : c.source_shape == 3 ? 4097
                                                                                     : 0);
  }
  if (c.compression != tfr::Compression::kNone) {
    source =
        std::make_unique<ShapedSource>(tfr::maybe_inflate(std::move(source), c.compression), 0);
  }
  return std::make_unique<tfr::RecordReader>(std::move(source), c.options);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const size_t kBuffers[] = {1 << 20, 4096, 4103, 65536};
  static const size_t kMaxRecords[] = {1, 2, 7, SIZE_MAX};
  static const size_t kMaxBytes[] = {0, 1, 16, 100, 4096, 65536, 1 << 20, SIZE_MAX};
  static const tfr::Compression kCompression[] = {tfr::Compression::kNone, tfr::Compression::kGzip,
                                                  tfr::Compression::kZlib, tfr::Compression::kNone};
  Config c;
  c.compression = kCompression[data[0] & 3];
  c.options.verify = (data[0] & 4) == 0;
  const bool skip_corrupt = (data[0] & 8) != 0;
  c.options.skip_corrupt = skip_corrupt;
  c.options.buffer_size = kBuffers[(data[0] >> 4) & 3];
  c.source_shape = data[0] >> 6;
  c.max_records = kMaxRecords[data[1] & 3];
  c.max_bytes = kMaxBytes[(data[1] >> 2) & 7];
  c.scan = (data[1] & 0x20) != 0;
  data += 2;
  size -= 2;

  // Reader 1: every batch, checking each one's shape.
  std::vector<int64_t> positions, sizes;
  bool clean = false;
  {
    auto reader = open(c, data, size);
    try {
      for (;;) {
        auto batch = reader->read_batch(c.max_records, c.max_bytes);
        const size_t n = batch->size();
        if (n == 0) break;
        CHECK(n <= c.max_records);
        CHECK(batch->offsets.size() == n + 1);
        CHECK(batch->offsets[0] == 0);
        CHECK(uint64_t(batch->offsets[n]) == batch->data.size());
        CHECK(n == 1 || batch->data.size() <= c.max_bytes);
        for (size_t i = 0; i < n; ++i) {
          CHECK(batch->offsets[i] <= batch->offsets[i + 1]);
          CHECK(positions.empty() || batch->positions[i] > positions.back());
          positions.push_back(batch->positions[i]);
          sizes.push_back(batch->offsets[i + 1] - batch->offsets[i] + int64_t(tfr::kFramingSize));
        }
        CHECK(reader->records_read() == positions.size());
      }
      clean = true;
    } catch (const tfr::DataLoss& e) {
      CHECK(e.offset >= (positions.empty() ? 0 : uint64_t(positions.back() + sizes.back())));
      // The error sticks: the next call reports it again instead of guessing where to resume.
      bool again = false;
      try {
        reader->read_batch(c.max_records, c.max_bytes);
      } catch (const tfr::DataLoss&) {
        again = true;
      }
      CHECK(again);
    } catch (const tfr::StreamError&) {
    } catch (const tfr::IoError&) {
    }
  }

  // Reader 2: count() or scan() over the same bytes; without skipping, they see what reader 1 saw
  // (when reader 1 checks payloads, it may stop earlier at a bad data checksum).
  std::vector<int64_t> scan_offsets, scan_sizes;
  uint64_t counted = 0;
  bool clean2 = false;
  {
    auto reader = open(c, data, size);
    try {
      if (c.scan) {
        reader->scan(&scan_offsets, &scan_sizes);
        counted = scan_offsets.size();
        CHECK(scan_sizes.size() == counted);
      } else {
        counted = reader->count();
      }
      CHECK(reader->records_read() == counted);
      clean2 = true;
    } catch (const tfr::DataLoss&) {
    } catch (const tfr::StreamError&) {
    } catch (const tfr::IoError&) {
    }
  }
  if (!skip_corrupt) {
    if (clean) {
      CHECK(clean2);
      CHECK(counted == positions.size());
      if (c.scan) {
        CHECK(scan_offsets == positions);
        CHECK(scan_sizes == sizes);
      }
    } else if (!c.options.verify) {
      CHECK(!clean2);
    }
  }
  return 0;
}
