#include "common/status.h"

#include <cstdio>
#include <cstdlib>

namespace fusetune {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kParse:
      return "parse error";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kShapeMismatch:
      return "shape mismatch";
    case ErrorCode::kIo:
      return "i/o error";
    case ErrorCode::kCorrupt:
      return "corrupt data";
    case ErrorCode::kInternal:
      return "internal error";
  }
  return "error";
}

std::string Error::ToString() const { return std::string(ErrorCodeName(code_)) + ": " + message_; }

namespace detail {
void CheckFailed(const char* condition, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "fusetune: internal check failed at %s:%d: %s%s%s\n", file, line, condition,
               message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

}  // namespace fusetune
