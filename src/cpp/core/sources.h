// Byte sources the record reader pulls from. A source knows nothing about records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "platform.h"

namespace tfr {

class Source {
 public:
  virtual ~Source() = default;

  // Reads up to n (> 0) bytes into dst. Returns 0 only at the end of the stream; may return
  // fewer than n before that. Throws IoError / StreamError.
  virtual size_t read(uint8_t* dst, size_t n) = 0;

  // Bytes between the current position and the end, when the source knows it (files, memory).
  virtual std::optional<uint64_t> remaining() { return std::nullopt; }

  // Total size of the stream when known; used to tell an absurd length from a cut file.
  virtual std::optional<uint64_t> total_size() { return std::nullopt; }

  // Skips up to n bytes, returning how many were skipped (fewer only at the end).
  virtual uint64_t skip(uint64_t n);

  // Moves back to `offset` (one already read past), so a record cut by the end of a file that
  // is still being written can be read again once it is complete. False when the source cannot.
  virtual bool rewind_to(uint64_t /*offset*/) { return false; }

  // A name for messages: a path, "<memory>", "<file-like>".
  const std::string& name() const { return name_; }

 protected:
  explicit Source(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// A local file read with plain reads into the caller's buffer (no mmap: a file truncated under us
// must give an error, not SIGBUS).
class FileSource final : public Source {
 public:
  explicit FileSource(const std::string& path);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  size_t read(uint8_t* dst, size_t n) override;
  std::optional<uint64_t> remaining() override;
  std::optional<uint64_t> total_size() override;
  uint64_t skip(uint64_t n) override;
  bool rewind_to(uint64_t offset) override;

 private:
  void refresh_size();

  platform::File file_ = platform::kNoFile;
  bool regular_ = false;  // size known and seekable
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
};

// Bytes that live elsewhere (a Python buffer kept alive by the caller for the reader's lifetime).
class MemorySource final : public Source {
 public:
  MemorySource(const uint8_t* data, size_t size, std::string name = "<memory>")
      : Source(std::move(name)), data_(data), size_(size) {}

  size_t read(uint8_t* dst, size_t n) override;
  std::optional<uint64_t> remaining() override { return size_ - pos_; }
  std::optional<uint64_t> total_size() override { return size_; }
  uint64_t skip(uint64_t n) override;

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

enum class Compression { kNone, kGzip, kZlib };

// Wraps `inner` in an inflating source when compression is not kNone.
std::unique_ptr<Source> maybe_inflate(std::unique_ptr<Source> inner, Compression compression);

}  // namespace tfr
