// GZIP / ZLIB input, as TensorFlow writes it: the whole framed stream is compressed, not each
// record. Concatenated members are read one after another, as gzip(1) does, empty ones included.
#include <zlib.h>

#include <exception>
#include <string>
#include <vector>

#include "errors.h"
#include "sources.h"

namespace tfr {
namespace {

constexpr size_t kInputChunk = 256 * 1024;

class InflateSource final : public Source {
 public:
  InflateSource(std::unique_ptr<Source> inner, Compression compression)
      : Source(inner->name()), inner_(std::move(inner)), input_(kInputChunk) {
    // 16 + MAX_WBITS accepts only a gzip header, MAX_WBITS only a zlib one, as in TensorFlow:
    // reading one as the other fails with "incorrect header check".
    const int window_bits = compression == Compression::kGzip ? 16 + MAX_WBITS : MAX_WBITS;
    if (inflateInit2(&z_, window_bits) != Z_OK) throw std::bad_alloc();
  }
  ~InflateSource() override { inflateEnd(&z_); }
  InflateSource(const InflateSource&) = delete;
  InflateSource& operator=(const InflateSource&) = delete;

  size_t read(uint8_t* dst, size_t n) override {
    if (!damage_.empty()) throw StreamError(false, damage_);
    if (source_error_) std::rethrow_exception(source_error_);
    z_.next_out = dst;
    // zlib counts in uInt; a huge request is simply served in parts.
    z_.avail_out = uInt(std::min<size_t>(n, 1u << 30));
    const uInt asked = z_.avail_out;
    while (z_.avail_out > 0) {
      // Also after the input ran dry once: a file still being written may have grown since.
      if (z_.avail_in == 0) {
        try {
          refill();
        } catch (...) {
          // The source failed: what was inflated so far may complete records, so hand it out
          // and report the failure on the next call.
          source_error_ = std::current_exception();
          if (z_.avail_out < asked) break;
          throw;
        }
      }
      if (member_done_ || (input_done_ && !saw_input_)) {
        if (z_.avail_in == 0) break;  // clean end after the last member, or an empty file
        inflateReset(&z_);            // another member follows
        member_done_ = false;
      }
      int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc == Z_BUF_ERROR && z_.avail_in == 0 && input_done_) {
        // The input ends inside a member without its end marker: a writer that flushed and is
        // still open (or was cut). Like TensorFlow, this is the end of the data; the record
        // reader reports a record cut by it as truncated, and reads on if the file grows.
        break;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        damage_ = "inflate() failed with error " + std::to_string(rc) + ": " +
                  (z_.msg ? z_.msg : "unknown zlib error");
        // The bytes inflated before the damage may complete records: hand them out first.
        if (z_.avail_out < asked) break;
        throw StreamError(false, damage_);
      }
    }
    return asked - z_.avail_out;
  }

 private:
  void refill() {
    size_t got = inner_->read(input_.data(), input_.size());
    input_done_ = got == 0;
    if (got > 0) saw_input_ = true;
    z_.next_in = input_.data();
    z_.avail_in = uInt(got);
  }

  std::unique_ptr<Source> inner_;
  std::vector<uint8_t> input_;
  z_stream z_{};
  bool input_done_ = false;  // the last refill found no more input (for now)
  bool member_done_ = false;
  bool saw_input_ = false;           // an empty file is an empty stream, as for gzip -d
  std::string damage_;               // the stream is damaged here: every later read() throws it
  std::exception_ptr source_error_;  // the compressed source failed: every later read() rethrows
};

}  // namespace

std::unique_ptr<Source> maybe_inflate(std::unique_ptr<Source> inner, Compression compression) {
  if (compression == Compression::kNone) return inner;
  return std::make_unique<InflateSource>(std::move(inner), compression);
}

}  // namespace tfr
