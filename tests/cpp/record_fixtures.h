// What the record tests share: records framed by hand from the format (not by the writer under
// test), byte surgery on them, in-memory sources and sinks shaped like the ones the engine meets,
// and a reader loop that checks every batch it gets.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "crc32c.h"
#include "errors.h"
#include "record_format.h"
#include "record_reader.h"
#include "sinks.h"
#include "sources.h"

namespace fixtures {

inline const uint8_t* bytes(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

// n bytes made of `part` repeated (leveldb's BigString).
inline std::string big_string(const std::string& part, size_t n) {
  std::string out;
  while (out.size() < n) out += part;
  out.resize(n);
  return out;
}

// Record i of a test stream: its number repeated to `size` bytes.
inline std::string numbered(size_t i, size_t size) {
  return big_string(std::to_string(i) + ".", size);
}

// One framed record, written from record_format.h's description.
inline std::string frame(const std::string& payload) {
  std::string out(tfr::kFramingSize + payload.size(), '\0');
  uint8_t* p = reinterpret_cast<uint8_t*>(&out[0]);
  tfr::store_le64(p, payload.size());
  tfr::store_le32(p + 8, tfr::crc32c_mask(tfr::crc32c(p, 8)));
  std::memcpy(p + tfr::kHeaderSize, payload.data(), payload.size());
  tfr::store_le32(p + tfr::kHeaderSize + payload.size(),
                  tfr::crc32c_mask(tfr::crc32c(payload.data(), payload.size())));
  return out;
}

inline std::string frames(const std::vector<std::string>& payloads) {
  std::string out;
  for (const std::string& p : payloads) out += frame(p);
  return out;
}

// Where each record's header starts in frames(payloads), plus the end of the stream.
inline std::vector<int64_t> header_offsets(const std::vector<std::string>& payloads) {
  std::vector<int64_t> out{0};
  for (const std::string& p : payloads)
    out.push_back(out.back() + int64_t(tfr::kFramingSize + p.size()));
  return out;
}

// Rewrites the length field of the record at `header` and its checksum, so only the length lies.
inline void set_length(std::string& stream, size_t header, uint64_t length) {
  uint8_t* p = reinterpret_cast<uint8_t*>(&stream[header]);
  tfr::store_le64(p, length);
  tfr::store_le32(p + 8, tfr::crc32c_mask(tfr::crc32c(p, 8)));
}

inline void increment_byte(std::string& stream, size_t offset, int delta = 1) {
  stream[offset] = char(uint8_t(stream[offset]) + delta);
}

// The whole string compressed as one gzip or zlib member, by zlib itself (not the writer's sink).
inline std::string compress(const std::string& raw, tfr::Compression compression, int level = 6) {
  z_stream z{};
  const int window_bits = compression == tfr::Compression::kGzip ? 16 + MAX_WBITS : MAX_WBITS;
  if (deflateInit2(&z, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) return "";
  std::string out(deflateBound(&z, uLong(raw.size())) + 64, '\0');
  z.next_in = const_cast<Bytef*>(bytes(raw));
  z.avail_in = uInt(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = uInt(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END ? out : "";
}

// Every member of a gzip or zlib stream inflated by zlib itself; nullopt if zlib finds damage or
// the stream does not end with a complete member.
// Inflates one member of packed[pos..] into `out` until zlib stops; its last code (Z_STREAM_END
// for a whole member), and in `used` the input it took.
inline int inflate_member(const std::string& packed, size_t pos, tfr::Compression compression,
                          std::string& out, size_t& used) {
  z_stream z{};
  const int window_bits = compression == tfr::Compression::kGzip ? 16 + MAX_WBITS : MAX_WBITS;
  if (inflateInit2(&z, window_bits) != Z_OK) return Z_STREAM_ERROR;
  z.next_in = const_cast<Bytef*>(bytes(packed) + pos);
  z.avail_in = uInt(packed.size() - pos);
  int rc = Z_OK;
  while (rc == Z_OK) {
    uint8_t chunk[16384];
    z.next_out = chunk;
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(reinterpret_cast<char*>(chunk), sizeof chunk - z.avail_out);
  }
  used = packed.size() - pos - z.avail_in;
  inflateEnd(&z);
  return rc;
}

inline std::optional<std::string> decompress(const std::string& packed,
                                             tfr::Compression compression) {
  std::string out;
  size_t pos = 0;
  do {
    size_t used = 0;
    if (inflate_member(packed, pos, compression, out, used) != Z_STREAM_END) return std::nullopt;
    pos += used;
  } while (pos < packed.size());
  return out;
}

// What zlib itself inflates from a (possibly cut) stream before its input runs out or it stops.
inline std::string inflatable_prefix(const std::string& packed, tfr::Compression compression) {
  std::string out;
  size_t used = 0;
  inflate_member(packed, 0, compression, out, used);
  return out;
}

// A stream held in memory, shaped like the sources the reader meets: a file or a buffer (size
// known), a pipe or a Python file-like (size unknown), short reads, a read error, and a file
// that grows while it is read (change the shared string; `rewindable` lets the reader go back).
struct Shape {
  bool size_known = true;
  size_t max_read = 0;            // reads return at most 1, 2, ..., max_read bytes in turn
  uint64_t fail_at = UINT64_MAX;  // the first read at or past this offset throws IoError once
  bool rewindable = false;
};

class StringSource final : public tfr::Source {
 public:
  StringSource(std::shared_ptr<const std::string> data, Shape shape, std::string name = "<test>")
      : Source(std::move(name)), data_(std::move(data)), shape_(shape) {}

  size_t read(uint8_t* dst, size_t n) override {
    if (pos_ >= shape_.fail_at) {
      shape_.fail_at = UINT64_MAX;
      throw tfr::IoError(EIO, "injected read error at " + std::to_string(pos_));
    }
    size_t step = std::min<uint64_t>(n, data_->size() - pos_);
    if (shape_.fail_at != UINT64_MAX) step = std::min<uint64_t>(step, shape_.fail_at - pos_);
    if (shape_.max_read > 0) step = std::min(step, 1 + calls_++ % shape_.max_read);
    std::memcpy(dst, data_->data() + pos_, step);
    pos_ += step;
    return step;
  }
  std::optional<uint64_t> remaining() override {
    if (!shape_.size_known) return std::nullopt;
    return data_->size() - pos_;
  }
  std::optional<uint64_t> total_size() override {
    if (!shape_.size_known) return std::nullopt;
    return data_->size();
  }
  bool rewind_to(uint64_t offset) override {
    if (!shape_.rewindable || offset > pos_) return false;
    pos_ = size_t(offset);
    return true;
  }

 private:
  std::shared_ptr<const std::string> data_;
  Shape shape_;
  size_t pos_ = 0;
  size_t calls_ = 0;
};

inline std::unique_ptr<tfr::Source> source(const std::string& data, Shape shape = {}) {
  return std::make_unique<StringSource>(std::make_shared<const std::string>(data), shape);
}

// The shapes every reader test runs under.
inline std::vector<std::pair<const char*, Shape>> all_shapes() {
  Shape unsized;
  unsized.size_known = false;
  Shape trickle = unsized;
  trickle.max_read = 7;
  Shape bytewise;
  bytewise.max_read = 1;
  return {{"sized", Shape{}},
          {"unsized", unsized},
          {"unsized, reads of 1..7 bytes", trickle},
          {"sized, reads of 1 byte", bytewise}};
}

// A sink that keeps what it is given, counts flushes and closes, and can fail like a disk: once
// `capacity` bytes are in, a write stores what fits and throws IoError (ENOSPC); a `transient`
// failure happens once, after which there is room again; `failing_flush` makes flush() throw
// (EIO, as a failed fsync) once.
struct Faults {
  size_t capacity = SIZE_MAX;
  bool transient = false;
  bool failing_flush = false;
};

class StringSink final : public tfr::Sink {
 public:
  struct Log {
    std::string data;
    int writes = 0;
    int flushes = 0;
    int syncs = 0;
    int closes = 0;
  };

  explicit StringSink(std::shared_ptr<Log> log, Faults faults = {})
      : Sink("<test sink>"), log_(std::move(log)), faults_(faults) {}

  void write(const uint8_t* data, size_t n) override {
    ++log_->writes;
    const size_t room = faults_.capacity - std::min(faults_.capacity, log_->data.size());
    log_->data.append(reinterpret_cast<const char*>(data), std::min(n, room));
    if (n > room) {
      if (faults_.transient) faults_.capacity = SIZE_MAX;
      throw tfr::IoError(ENOSPC, "injected: no space left");
    }
  }
  void flush(bool sync) override {
    ++log_->flushes;
    log_->syncs += sync;
    if (faults_.failing_flush) {
      faults_.failing_flush = false;
      throw tfr::IoError(EIO, "injected: fsync failed");
    }
  }
  void close() override { ++log_->closes; }

 private:
  std::shared_ptr<Log> log_;
  Faults faults_;
};

// The batch limit read_all uses unless told otherwise: a batch reserves room for up to 4 MiB of
// it, which costs AddressSanitizer a lot over thousands of readers. The unlimited case has tests
// of its own.
constexpr size_t kMaxBytes = 1 << 20;

// Everything a reader delivered before the clean end or the first DataLoss.
struct ReadAll {
  std::vector<std::string> records;
  std::vector<int64_t> positions;
  std::optional<tfr::DataLoss> loss;
  std::vector<tfr::DataLoss> skipped;
  size_t batches = 0;
};

// Reads batches until the clean end or a DataLoss, checking the shape of every batch: n + 1
// offsets from 0 to the data size, increasing positions, the max_records / max_bytes limits, and
// that a DataLoss is thrown again by the next call (or, for a cut record, that it is retried).
inline ReadAll read_all(tfr::RecordReader& reader, size_t max_records = SIZE_MAX,
                        size_t max_bytes = kMaxBytes) {
  ReadAll out;
  const uint64_t before = reader.records_read();
  for (;;) {
    std::unique_ptr<tfr::RecordBatch> batch;
    auto loss =
        check::thrown<tfr::DataLoss>([&] { batch = reader.read_batch(max_records, max_bytes); });
    if (loss) {
      out.loss = loss;
      auto again = check::thrown<tfr::DataLoss>([&] { reader.read_batch(max_records, max_bytes); });
      const bool retried = loss->reason == tfr::LossReason::kTruncated && !again;
      CHECK(retried || (again && again->offset == loss->offset && again->reason == loss->reason))
          << "the error sticks";
      break;
    }
    const size_t n = batch->size();
    if (n == 0) break;
    ++out.batches;
    REQUIRE_EQ(batch->offsets.size(), n + 1);
    CHECK_EQ(batch->offsets[0], 0);
    CHECK_EQ(batch->offsets[n], int64_t(batch->data.size()));
    CHECK(n <= max_records);
    CHECK(n == 1 || batch->data.size() <= max_bytes)
        << n << " records, " << batch->data.size() << " bytes";
    for (size_t i = 0; i < n; ++i) {
      REQUIRE(batch->offsets[i] <= batch->offsets[i + 1]);
      CHECK(out.positions.empty() || batch->positions[i] > out.positions.back());
      out.positions.push_back(batch->positions[i]);
      out.records.emplace_back(
          reinterpret_cast<const char*>(batch->data.data()) + batch->offsets[i],
          size_t(batch->offsets[i + 1] - batch->offsets[i]));
    }
    CHECK_EQ(reader.records_read() - before, out.records.size());
  }
  out.skipped = reader.take_skipped();
  return out;
}

inline ReadAll read_all(const std::string& stream, Shape shape = {},
                        tfr::ReaderOptions options = {}, size_t max_records = SIZE_MAX,
                        size_t max_bytes = kMaxBytes) {
  tfr::RecordReader reader(source(stream, shape), options);
  return read_all(reader, max_records, max_bytes);
}

// The first n payloads.
inline std::vector<std::string> first(const std::vector<std::string>& payloads, size_t n) {
  return std::vector<std::string>(payloads.begin(),
                                  payloads.begin() + std::min(n, payloads.size()));
}

// Reads `stream` and checks it holds exactly `payloads`, at their header offsets.
inline void expect_records(const std::string& stream, const std::vector<std::string>& payloads,
                           Shape shape, tfr::ReaderOptions options, const std::string& context) {
  auto got = read_all(stream, shape, options);
  CHECK(!got.loss) << context << ": " << (got.loss ? got.loss->what() : "");
  CHECK_EQ(got.records.size(), payloads.size()) << context;
  CHECK(got.records == payloads) << context;
  auto offsets = header_offsets(payloads);
  offsets.pop_back();
  CHECK(got.positions == offsets) << context;
}

// Reads `stream` cut after `cut` bytes: the records wholly before the cut, then a clean end if
// the cut falls between records, else DataLoss kTruncated naming the record it cuts.
inline void expect_cut(const std::string& stream, const std::vector<std::string>& payloads,
                       size_t cut, Shape shape, tfr::ReaderOptions options,
                       const std::string& context) {
  const auto offsets = header_offsets(payloads);
  size_t whole = 0;
  while (whole < payloads.size() && uint64_t(offsets[whole + 1]) <= cut) ++whole;
  auto got = read_all(stream.substr(0, cut), shape, options);
  CHECK(got.records == fixtures::first(payloads, whole)) << context << ", cut at " << cut;
  if (uint64_t(offsets[whole]) == cut) {
    CHECK(!got.loss) << context << ", cut at " << cut << ": " << (got.loss ? got.loss->what() : "");
    return;
  }
  REQUIRE(got.loss) << context << ", cut at " << cut;
  CHECK_EQ(got.loss->reason, tfr::LossReason::kTruncated) << context << ", cut at " << cut;
  CHECK_EQ(got.loss->offset, offsets[whole]) << context << ", cut at " << cut;
  CHECK_EQ(got.loss->record_index, whole) << context << ", cut at " << cut;
  const std::string message = got.loss->what();
  CHECK(message.find("truncated record at " + std::to_string(offsets[whole])) == 0) << message;
}

}  // namespace fixtures
