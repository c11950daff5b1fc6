#include "errors.h"

#include <cerrno>
#include <cstring>

namespace tfr {

const char* reason_code(LossReason reason) {
  switch (reason) {
    case LossReason::kTruncated:
      return "truncated";
    case LossReason::kLengthChecksum:
      return "length_checksum";
    case LossReason::kDataChecksum:
      return "data_checksum";
    case LossReason::kLengthTooLarge:
      return "length_too_large";
    case LossReason::kCompressedStream:
      return "compressed_stream";
    case LossReason::kIndexMismatch:
      return "index_mismatch";
  }
  return "unknown";
}

void throw_errno(const std::string& op, const std::string& name) {
  int err = errno;
  throw IoError(err, op + " '" + name + "': " + std::strerror(err));
}

}  // namespace tfr
