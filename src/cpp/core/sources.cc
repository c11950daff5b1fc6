#include "sources.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "errors.h"

namespace tfr {

uint64_t Source::skip(uint64_t n) {
  std::vector<uint8_t> scratch(size_t(std::min<uint64_t>(n, 1 << 16)));
  uint64_t done = 0;
  while (done < n) {
    size_t got = read(scratch.data(), size_t(std::min<uint64_t>(n - done, scratch.size())));
    if (got == 0) break;
    done += got;
  }
  return done;
}

FileSource::FileSource(const std::string& path) : Source(path) {
  file_ = platform::open_read(path, platform::Access::kSequential);
  try {
    refresh_size();
  } catch (...) {
    platform::close_quietly(file_);
    throw;
  }
}

FileSource::~FileSource() { platform::close_quietly(file_); }

void FileSource::refresh_size() {
  const platform::FileInfo info = platform::info(file_, name());
  regular_ = info.regular;
  size_ = info.size;
}

size_t FileSource::read(uint8_t* dst, size_t n) {
  // Positional reads keep the position here, not in the file description a fork()ed child
  // shares.
  const size_t got = regular_ ? platform::read_at(file_, dst, n, pos_, name())
                              : platform::read(file_, dst, n, name());
  pos_ += got;
  if (regular_ && pos_ > size_) size_ = pos_;  // the file grew while we read it
  return got;
}

std::optional<uint64_t> FileSource::remaining() {
  if (!regular_) return std::nullopt;
  refresh_size();  // rare call (only when a length looks too large): catch a file that grew
  return size_ > pos_ ? size_ - pos_ : 0;
}

std::optional<uint64_t> FileSource::total_size() {
  if (!regular_) return std::nullopt;
  return size_;
}

uint64_t FileSource::skip(uint64_t n) {
  if (!regular_) return Source::skip(n);
  uint64_t left = size_ > pos_ ? size_ - pos_ : 0;
  uint64_t step = std::min(n, left);
  pos_ += step;
  return step;
}

bool FileSource::rewind_to(uint64_t offset) {
  if (!regular_ || offset > pos_) return false;
  pos_ = offset;
  return true;
}

size_t MemorySource::read(uint8_t* dst, size_t n) {
  size_t step = std::min(n, size_ - pos_);
  if (step == 0) return 0;  // an empty source may have no data pointer at all
  std::memcpy(dst, data_ + pos_, step);
  pos_ += step;
  return step;
}

uint64_t MemorySource::skip(uint64_t n) {
  size_t step = size_t(std::min<uint64_t>(n, size_ - pos_));
  pos_ += step;
  return step;
}

}  // namespace tfr
