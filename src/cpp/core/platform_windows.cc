// platform.h for Windows: wide-character paths, handles not inherited, positional reads with an
// OVERLAPPED offset (64-bit), FILE_FLAG_SEQUENTIAL_SCAN as the sequential hint.
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

// GetLastError() -> an errno value, so Python raises the matching OSError subclass.
int errno_of(DWORD error) {
  switch (error) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME:
      return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
      return EACCES;
    case ERROR_FILE_EXISTS:
    case ERROR_ALREADY_EXISTS:
      return EEXIST;
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL:
      return ENOSPC;
    case ERROR_DIRECTORY:
      return EISDIR;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
      return ENOMEM;
    default:
      return EIO;
  }
}

[[noreturn]] void fail(const char* what, const std::string& name) {
  const DWORD error = GetLastError();
  throw IoError(errno_of(error), std::string(what) + " '" + name + "': Windows error " +
                                     std::to_string(error));
}

std::wstring wide(const std::string& utf8) {
  if (utf8.empty()) return std::wstring();
  const int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8.data(),
                                    int(utf8.size()), nullptr, 0);
  if (n <= 0) throw IoError(ENOENT, "cannot open '" + utf8 + "': the path is not UTF-8");
  std::wstring out(size_t(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, utf8.data(), int(utf8.size()), out.data(), n);
  return out;
}

File open_with(const std::string& path, DWORD access, DWORD share, DWORD disposition,
               DWORD flags, const char* what) {
  check_path(path);
  SECURITY_ATTRIBUTES attributes{sizeof(SECURITY_ATTRIBUTES), nullptr, FALSE};  // not inherited
  HANDLE h = CreateFileW(wide(path).c_str(), access, share, &attributes, disposition, flags,
                         nullptr);
  if (h == INVALID_HANDLE_VALUE) fail(what, path);
  return reinterpret_cast<File>(h);
}

OVERLAPPED at_offset(uint64_t offset) {
  OVERLAPPED o{};
  o.Offset = DWORD(offset & 0xffffffffu);
  o.OffsetHigh = DWORD(offset >> 32);
  return o;
}

constexpr size_t kMaxChunk = 1u << 30;  // ReadFile/WriteFile take a 32-bit count

}  // namespace

File open_read(const std::string& path) {
  return open_with(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                   OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_SEQUENTIAL_SCAN,
                   "cannot open");
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

void hint_sequential(File) {}  // given when the file is opened (FILE_FLAG_SEQUENTIAL_SCAN)

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

void write_all(File file, const uint8_t* data, size_t n, const std::string& name) {
  while (n > 0) {
    DWORD done = 0;
    if (!WriteFile(handle_of(file), data, DWORD(std::min(n, kMaxChunk)), &done, nullptr)) {
      fail("cannot write", name);
    }
    data += done;
    n -= done;
  }
}

void sync(File file, const std::string& name) {
  if (!FlushFileBuffers(handle_of(file))) fail("cannot fsync", name);
}

}  // namespace tfr::platform

#endif  // _WIN32
