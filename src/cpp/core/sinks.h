// Byte sinks the record writer pushes to. A sink knows nothing about records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "platform.h"
#include "sources.h"  // Compression

namespace tfr {

class Sink {
 public:
  virtual ~Sink() = default;
  // Writes all n bytes or throws.
  virtual void write(const uint8_t* data, size_t n) = 0;
  // Pushes everything written so far to the layer below (and, for compressed sinks, makes it
  // decodable). `sync` also asks the OS to put it on disk.
  virtual void flush(bool sync) = 0;
  // Finishes the stream (compression trailer) and releases the destination. Idempotent.
  virtual void close() = 0;
  const std::string& name() const { return name_; }

 protected:
  explicit Sink(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// A local file, created or truncated.
class FileSink final : public Sink {
 public:
  explicit FileSink(const std::string& path);
  ~FileSink() override;
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  void write(const uint8_t* data, size_t n) override;
  void flush(bool sync) override;
  void close() override;

 private:
  platform::File file_ = platform::kNoFile;
};

// Wraps `inner` in a deflating sink (gzip or zlib framing) when compression is not kNone.
// level: 0..9, or -1 for zlib's default.
std::unique_ptr<Sink> maybe_deflate(std::unique_ptr<Sink> inner, Compression compression,
                                    int level);

}  // namespace tfr
