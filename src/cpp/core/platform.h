// The few operating-system file calls the engine makes, behind one small interface with one
// implementation per OS (platform_posix.cc, platform_windows.cc). Failures throw IoError naming
// the file; files are never inherited by child processes; offsets are 64-bit everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tfr::platform {

using File = intptr_t;  // a file descriptor, or a Windows HANDLE
constexpr File kNoFile = -1;

struct FileInfo {
  bool regular;   // a regular file: its size is known and positional reads work
  uint64_t size;  // (regular files only)
};

// How a file opened for reading will be read: kSequential asks the OS for more read-ahead where
// it takes such a hint (posix_fadvise on Linux, FILE_FLAG_SEQUENTIAL_SCAN on Windows, which must
// be given at open time); kRandom leaves its read-ahead alone.
enum class Access { kSequential, kRandom };

// Paths are UTF-8 (Windows: converted to UTF-16 for the wide-character API). A path holding a NUL
// character is std::invalid_argument (Python: ValueError, as open() says): every OS would read it
// as the shorter path before the NUL, another file.
File open_read(const std::string& path, Access access);
File create_write(const std::string& path);      // created, or truncated if it exists
void close(File file, const std::string& name);  // throws if closing reports an error
void close_quietly(File file) noexcept;
FileInfo info(File file, const std::string& name);

// Reads at the file's own position (pipes, character devices). 0 only at the end.
size_t read(File file, uint8_t* dst, size_t n, const std::string& name);
// Reads at `offset` without moving any shared position. 0 only at the end.
size_t read_at(File file, uint8_t* dst, size_t n, uint64_t offset, const std::string& name);

struct Span {
  uint8_t* data;
  size_t size;
};
// Fills the spans in order from `offset` until all are full or the file ends (one scatter read
// where the OS has one); returns the bytes read. Advances `spans` past what it filled.
size_t read_spans_at(File file, Span* spans, size_t count, uint64_t offset,
                     const std::string& name);

// Lets the OS take back the pages wholly inside [data, data + size) when it runs short of memory,
// without unmapping them (MADV_FREE): until it does, writing them again costs no page fault; the
// bytes become undefined. False where the OS has no such call: the caller should free instead.
bool release_lazily(void* data, size_t size) noexcept;

void write_all(File file, const uint8_t* data, size_t n, const std::string& name);
void sync(File file, const std::string& name);  // to the disk (fsync / FlushFileBuffers)

// read_spans_at built from read_at, one read per span, for the systems without a scatter read at
// an offset: Windows (none for files) and macOS before 11 (no preadv). Same contract.
inline size_t read_spans_one_by_one(File file, Span* spans, size_t count, uint64_t offset,
                                    const std::string& name) {
  size_t total = 0;
  for (; count > 0; ++spans, --count) {
    while (spans->size > 0) {
      const size_t got = read_at(file, spans->data, spans->size, offset, name);
      if (got == 0) return total;
      total += got;
      offset += got;
      spans->data += got;
      spans->size -= got;
    }
  }
  return total;
}

// The check open_read and create_write make first.
inline void check_path(const std::string& path) {
  const size_t nul = path.find('\0');
  if (nul != std::string::npos) {
    throw std::invalid_argument("embedded null character in path '" + path.substr(0, nul) +
                                "\\0...'");
  }
}

}  // namespace tfr::platform
