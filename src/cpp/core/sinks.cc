#include "sinks.h"

#include <zlib.h>

#include <cerrno>
#include <exception>
#include <string>
#include <vector>

#include "errors.h"

namespace tfr {

FileSink::FileSink(const std::string& path) : Sink(path), file_(platform::create_write(path)) {}

FileSink::~FileSink() { platform::close_quietly(file_); }

void FileSink::write(const uint8_t* data, size_t n) {
  if (file_ == platform::kNoFile) throw IoError(EBADF, "write to closed file '" + name() + "'");
  platform::write_all(file_, data, n, name());
}

void FileSink::flush(bool sync) {
  if (sync && file_ != platform::kNoFile) platform::sync(file_, name());
}

void FileSink::close() {
  if (file_ == platform::kNoFile) return;
  const platform::File file = file_;
  file_ = platform::kNoFile;
  platform::close(file, name());
}

namespace {

constexpr size_t kOutputChunk = 256 * 1024;

class DeflateSink final : public Sink {
 public:
  DeflateSink(std::unique_ptr<Sink> inner, Compression compression, int level)
      : Sink(inner->name()), inner_(std::move(inner)), output_(kOutputChunk) {
    const int window_bits = compression == Compression::kGzip ? 16 + MAX_WBITS : MAX_WBITS;
    if (deflateInit2(&z_, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      throw std::invalid_argument("bad compression level " + std::to_string(level));
    }
  }
  ~DeflateSink() override { deflateEnd(&z_); }
  DeflateSink(const DeflateSink&) = delete;
  DeflateSink& operator=(const DeflateSink&) = delete;

  void write(const uint8_t* data, size_t n) override {
    while (n > 0) {  // zlib counts in uInt
      const size_t step = std::min<size_t>(n, 1u << 30);
      z_.next_in = const_cast<Bytef*>(data);
      z_.avail_in = uInt(step);
      pump(Z_NO_FLUSH);
      data += step;
      n -= step;
    }
  }

  void flush(bool sync) override {
    if (finished_ || broken_) return inner_->flush(sync);
    pump(Z_SYNC_FLUSH);  // everything so far becomes decodable
    inner_->flush(sync);
  }

  // After a failed write the stream has a hole: finishing it would append bytes that decode
  // wrongly, so the output is left cut where it failed (a reader reports it as truncated).
  // The inner sink is closed even when finishing fails; the first error is the one raised.
  void close() override {
    std::exception_ptr error;
    if (!finished_ && !broken_) {
      try {
        pump(Z_FINISH);
        finished_ = true;
      } catch (...) {
        error = std::current_exception();
      }
    }
    try {
      inner_->close();
    } catch (...) {
      if (!error) throw;
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  // Deflates the pending input with `mode`, writing every produced byte to the inner sink.
  void pump(int mode) {
    for (;;) {
      z_.next_out = output_.data();
      z_.avail_out = uInt(output_.size());
      int rc = deflate(&z_, mode);
      if (rc == Z_STREAM_ERROR) throw std::runtime_error("deflate() failed");
      size_t produced = output_.size() - z_.avail_out;
      if (produced > 0) {
        try {
          inner_->write(output_.data(), produced);
        } catch (...) {
          broken_ = true;
          z_.next_in = nullptr;  // may point at the caller's memory, gone after this call
          z_.avail_in = 0;
          throw;
        }
      }
      if (mode == Z_FINISH ? rc == Z_STREAM_END : (z_.avail_in == 0 && z_.avail_out > 0)) break;
    }
  }

  std::unique_ptr<Sink> inner_;
  std::vector<uint8_t> output_;
  z_stream z_{};
  bool finished_ = false;
  bool broken_ = false;  // an inner write failed
};

}  // namespace

std::unique_ptr<Sink> maybe_deflate(std::unique_ptr<Sink> inner, Compression compression,
                                    int level) {
  if (compression == Compression::kNone) return inner;
  return std::make_unique<DeflateSink>(std::move(inner), compression, level);
}

}  // namespace tfr
