// platform.h for POSIX systems (Linux, macOS, the BSDs).
#ifndef _WIN32

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "errors.h"
#include "platform.h"

// preadv is everywhere but in builds for macOS before 11 (its deployment target, not the SDK):
// there the symbol is missing at run time, so the scatter reads are one read per span.
#if defined(__APPLE__)
#include <AvailabilityMacros.h>
#endif
#if !defined(__APPLE__) || MAC_OS_X_VERSION_MIN_REQUIRED >= 110000
#define TFREC_HAVE_PREADV 1
#endif

namespace tfr::platform {
namespace {

static_assert(sizeof(off_t) >= 8,
              "offsets past 2 GiB need a 64-bit off_t (-D_FILE_OFFSET_BITS=64)");

// Bytes one call moves at most: macOS refuses (EINVAL) a read or write of more than INT_MAX bytes,
// Linux stops short of 2 GiB; the loops around each call take the rest.
constexpr size_t kMaxIo = size_t(1) << 30;

int fd_of(File file) { return int(file); }

File open_with(const std::string& path, int flags, const char* what) {
  check_path(path);
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, 0666);
  } while (fd < 0 && errno == EINTR);  // a signal while opening a FIFO, say
  if (fd < 0) throw_errno(what, path);
  return File(fd);
}

}  // namespace

File open_read(const std::string& path, Access access) {
  const File file = open_with(path, O_RDONLY, "cannot open");
#if defined(__linux__)
  // (Refused for a pipe, harmlessly.) macOS reads ahead on its own and takes no such hint.
  if (access == Access::kSequential) ::posix_fadvise(fd_of(file), 0, 0, POSIX_FADV_SEQUENTIAL);
#else
  (void)access;
#endif
  return file;
}

bool release_lazily(void* data, size_t size) noexcept {
#ifdef MADV_FREE
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (uintptr_t(data) + page - 1) & ~(page - 1);
  const uintptr_t end = (uintptr_t(data) + size) & ~(page - 1);
  return end <= begin || ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_FREE) == 0;
#else
  (void)data;
  (void)size;
  return false;
#endif
}

File create_write(const std::string& path) {
  return open_with(path, O_WRONLY | O_CREAT | O_TRUNC, "cannot create");
}

void close(File file, const std::string& name) {
  if (::close(fd_of(file)) != 0 && errno != EINTR) throw_errno("cannot close", name);
}

void close_quietly(File file) noexcept {
  if (file != kNoFile) ::close(fd_of(file));
}

FileInfo info(File file, const std::string& name) {
  struct stat st;
  if (::fstat(fd_of(file), &st) != 0) throw_errno("cannot stat", name);
  const bool regular = S_ISREG(st.st_mode);
  return FileInfo{regular, regular ? uint64_t(st.st_size) : 0};
}

size_t read(File file, uint8_t* dst, size_t n, const std::string& name) {
  for (;;) {
    const ssize_t got = ::read(fd_of(file), dst, std::min(n, kMaxIo));
    if (got >= 0) return size_t(got);
    if (errno != EINTR) throw_errno("cannot read", name);
  }
}

size_t read_at(File file, uint8_t* dst, size_t n, uint64_t offset, const std::string& name) {
  for (;;) {
    const ssize_t got = ::pread(fd_of(file), dst, std::min(n, kMaxIo), off_t(offset));
    if (got >= 0) return size_t(got);
    if (errno != EINTR) throw_errno("cannot read", name);
  }
}

size_t read_spans_at(File file, Span* spans, size_t count, uint64_t offset,
                     const std::string& name) {
#if !defined(TFREC_HAVE_PREADV)
  return read_spans_one_by_one(file, spans, count, offset, name);
#else
#ifdef IOV_MAX
  constexpr size_t kMaxIov = IOV_MAX < 1024 ? IOV_MAX : 1024;
#else
  constexpr size_t kMaxIov = 1024;
#endif
  size_t total = 0;
  while (count > 0) {
    iovec iov[kMaxIov];
    size_t n = 0;
    for (size_t bytes = 0; n < count && n < kMaxIov && bytes < kMaxIo; ++n) {
      const size_t len = std::min(spans[n].size, kMaxIo - bytes);
      iov[n] = iovec{spans[n].data, len};
      bytes += len;
    }
    const ssize_t got = ::preadv(fd_of(file), iov, int(n), off_t(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot read", name);
    }
    if (got == 0) break;
    total += size_t(got);
    offset += uint64_t(got);
    size_t left = size_t(got);
    while (count > 0 && left >= spans->size) {
      left -= spans->size;
      ++spans;
      --count;
    }
    if (count > 0) {
      spans->data += left;
      spans->size -= left;
    }
  }
  return total;
#endif
}

void write_all(File file, const uint8_t* data, size_t n, const std::string& name) {
  while (n > 0) {
    const ssize_t done = ::write(fd_of(file), data, std::min(n, kMaxIo));
    if (done < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot write", name);
    }
    data += done;
    n -= size_t(done);
  }
}

void sync(File file, const std::string& name) {
  if (::fsync(fd_of(file)) != 0) throw_errno("cannot fsync", name);
}

}  // namespace tfr::platform

#endif  // !_WIN32
