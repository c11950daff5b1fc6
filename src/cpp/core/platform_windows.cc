// platform.h for Windows: wide-character paths, handles not inherited, positional reads with an
// OVERLAPPED offset (64-bit), FILE_FLAG_SEQUENTIAL_SCAN as the sequential hint, errors with the
// system's text and the errno Python would pick.
#ifdef _WIN32

#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "errors.h"
#include "platform.h"

namespace tfr::platform {
namespace {

HANDLE handle_of(File file) { return reinterpret_cast<HANDLE>(file); }

// GetLastError() -> the errno CPython's own table (PC/errmap.h) gives it, so Python raises the
// same OSError subclass as for its own file calls.
int errno_of(DWORD error) {
  switch (error) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME:
    case ERROR_INVALID_DRIVE:
    case ERROR_BAD_NETPATH:
    case ERROR_BAD_NET_NAME:
      return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
    case ERROR_LOCK_VIOLATION:
    case ERROR_WRITE_PROTECT:
    case ERROR_NETWORK_ACCESS_DENIED:
      return EACCES;
    case ERROR_FILE_EXISTS:
    case ERROR_ALREADY_EXISTS:
      return EEXIST;
    case ERROR_DIRECTORY:  // "the directory name is invalid": a file where a directory should be
      return ENOTDIR;
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL:
      return ENOSPC;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
      return ENOMEM;
    case ERROR_TOO_MANY_OPEN_FILES:
      return EMFILE;
    case ERROR_INVALID_HANDLE:
      return EBADF;
    case ERROR_BROKEN_PIPE:
    case ERROR_NO_DATA:
      return EPIPE;
    case ERROR_FILENAME_EXCED_RANGE:
      return ENAMETOOLONG;
    default:
      return EIO;
  }
}

// The system's text for `error`, in UTF-8 like every message of the engine, and its number.
std::string describe(DWORD error) {
  wchar_t* text = nullptr;
  const DWORD n = FormatMessageW(
      FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
      nullptr, error, 0, reinterpret_cast<LPWSTR>(&text), 0, nullptr);
  std::string out;
  if (n > 0) {
    const int size = WideCharToMultiByte(CP_UTF8, 0, text, int(n), nullptr, 0, nullptr, nullptr);
    out.resize(size_t(std::max(size, 0)));
    if (size > 0) WideCharToMultiByte(CP_UTF8, 0, text, int(n), &out[0], size, nullptr, nullptr);
  }
  LocalFree(text);
  while (!out.empty() &&
         (out.back() == '\n' || out.back() == '\r' || out.back() == '.' || out.back() == ' ')) {
    out.pop_back();
  }
  return (out.empty() ? std::string("error") : out) + " (Windows error " + std::to_string(error) +
         ")";
}

[[noreturn]] void fail_with(DWORD error, const char* what, const std::string& name) {
  throw IoError(errno_of(error), std::string(what) + " '" + name + "': " + describe(error));
}

[[noreturn]] void fail(const char* what, const std::string& name) {
  fail_with(GetLastError(), what, name);
}

std::wstring wide(const std::string& utf8) {
  if (utf8.empty()) return std::wstring();
  const int n =
      MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8.data(), int(utf8.size()), nullptr, 0);
  if (n <= 0) throw IoError(ENOENT, "cannot open '" + utf8 + "': the path is not UTF-8");
  std::wstring out(size_t(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, utf8.data(), int(utf8.size()), out.data(), n);
  return out;
}

File open_with(const std::string& path, DWORD access, DWORD share, DWORD disposition, DWORD flags,
               const char* what) {
  check_path(path);
  SECURITY_ATTRIBUTES attributes{sizeof(SECURITY_ATTRIBUTES), nullptr, FALSE};  // not inherited
  const std::wstring wide_path = wide(path);
  HANDLE h =
      CreateFileW(wide_path.c_str(), access, share, &attributes, disposition, flags, nullptr);
  if (h != INVALID_HANDLE_VALUE) return reinterpret_cast<File>(h);
  const DWORD error = GetLastError();
  const DWORD kind = GetFileAttributesW(wide_path.c_str());
  if (error == ERROR_ACCESS_DENIED && kind != INVALID_FILE_ATTRIBUTES &&
      (kind & FILE_ATTRIBUTE_DIRECTORY) != 0) {  // IsADirectoryError, as on POSIX
    throw IoError(EISDIR, std::string(what) + " '" + path + "': Is a directory");
  }
  fail_with(error, what, path);
}

OVERLAPPED at_offset(uint64_t offset) {
  OVERLAPPED o{};
  o.Offset = DWORD(offset & 0xffffffffu);
  o.OffsetHigh = DWORD(offset >> 32);
  return o;
}

constexpr size_t kMaxChunk = 1u << 30;  // ReadFile/WriteFile take a 32-bit count

}  // namespace

// Others may go on writing, renaming or deleting the file, as on POSIX.
File open_read(const std::string& path, Access access) {
  const DWORD hint = access == Access::kSequential ? FILE_FLAG_SEQUENTIAL_SCAN : 0;
  return open_with(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                   OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL | hint, "cannot open");
}

File create_write(const std::string& path) {
  return open_with(path, GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_DELETE, CREATE_ALWAYS,
                   FILE_ATTRIBUTE_NORMAL, "cannot create");
}

void close(File file, const std::string& name) {
  if (!CloseHandle(handle_of(file))) fail("cannot close", name);
}

void close_quietly(File file) noexcept {
  if (file != kNoFile) CloseHandle(handle_of(file));
}

FileInfo info(File file, const std::string& name) {
  const DWORD type = GetFileType(handle_of(file));
  if (type != FILE_TYPE_DISK) return FileInfo{false, 0};
  LARGE_INTEGER size;
  if (!GetFileSizeEx(handle_of(file), &size)) fail("cannot stat", name);
  return FileInfo{true, uint64_t(size.QuadPart)};
}

size_t read(File file, uint8_t* dst, size_t n, const std::string& name) {
  DWORD got = 0;
  if (!ReadFile(handle_of(file), dst, DWORD(std::min(n, kMaxChunk)), &got, nullptr)) {
    if (GetLastError() == ERROR_BROKEN_PIPE || GetLastError() == ERROR_HANDLE_EOF) return 0;
    fail("cannot read", name);
  }
  return size_t(got);
}

size_t read_at(File file, uint8_t* dst, size_t n, uint64_t offset, const std::string& name) {
  OVERLAPPED o = at_offset(offset);
  DWORD got = 0;
  if (!ReadFile(handle_of(file), dst, DWORD(std::min(n, kMaxChunk)), &got, &o)) {
    if (GetLastError() == ERROR_HANDLE_EOF) return 0;
    fail("cannot read", name);
  }
  return size_t(got);
}

size_t read_spans_at(File file, Span* spans, size_t count, uint64_t offset,
                     const std::string& name) {
  return read_spans_one_by_one(file, spans, count, offset, name);  // no scatter read for files
}

// DiscardVirtualMemory would need memory of our own VirtualAlloc, not the heap's: buffers past
// the pool's hot bytes are freed instead.
bool release_lazily(void*, size_t) noexcept { return false; }

void write_all(File file, const uint8_t* data, size_t n, const std::string& name) {
  while (n > 0) {
    DWORD done = 0;
    if (!WriteFile(handle_of(file), data, DWORD(std::min(n, kMaxChunk)), &done, nullptr)) {
      fail("cannot write", name);
    }
    if (done == 0) throw IoError(EIO, "cannot write '" + name + "': no progress");
    data += done;
    n -= done;
  }
}

void sync(File file, const std::string& name) {
  if (!FlushFileBuffers(handle_of(file))) fail("cannot fsync", name);
}

}  // namespace tfr::platform

#endif  // _WIN32
