// Typed failures of the record engine. The bindings turn each into its Python exception.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tfr {

// Why a record could not be delivered.
enum class LossReason {
  kTruncated,         // the stream ends inside a record (header, payload or footer)
  kLengthChecksum,    // the length field does not match its CRC
  kDataChecksum,      // the payload does not match its CRC
  kLengthTooLarge,    // the length field is larger than anything the source could hold
  kCompressedStream,  // the gzip/zlib stream is damaged
  kIndexMismatch,     // an index points at bytes that are not the record it describes
};

const char* reason_code(LossReason reason);

// A damaged file. `offset` is where the damaged record's header starts (in the decompressed stream
// for compressed input); `record_index` counts the records before it.
class DataLoss : public std::runtime_error {
 public:
  DataLoss(LossReason why, std::string source_name, uint64_t index, uint64_t at, std::string text)
      : std::runtime_error(text),
        reason(why),
        source(std::move(source_name)),
        record_index(index),
        offset(at),
        detail(std::move(text)) {}

  LossReason reason;
  std::string source;
  uint64_t record_index;
  uint64_t offset;
  std::string detail;
};

// A compressed stream that cannot be inflated. Raised by sources, which know nothing of records;
// the record reader turns it into DataLoss at the record it was reading.
class StreamError : public std::runtime_error {
 public:
  StreamError(bool ended_early, const std::string& what)
      : std::runtime_error(what), truncated(ended_early) {}
  bool truncated;  // the stream simply ended early (as opposed to holding bad data)
};

// An operating-system error (open, read, write); errno is kept for Python's OSError.
class IoError : public std::runtime_error {
 public:
  IoError(int error_number, const std::string& what)
      : std::runtime_error(what), err(error_number) {}
  int err;
};

// Raises IoError for the current errno, naming the operation and the file.
[[noreturn]] void throw_errno(const std::string& op, const std::string& name);

}  // namespace tfr
