// FT_CHECK: assertions for programmer errors (broken invariants), active in
// every build type. User-caused failures are returned as Error values instead
// (see status.h).
#pragma once

#include <string>

namespace fusetune::detail {
[[noreturn]] void CheckFailed(const char* condition, const char* file, int line,
                              const std::string& message);
}  // namespace fusetune::detail

#define FT_CHECK(condition, ...)                                                                 \
  do {                                                                                           \
    if (!(condition)) [[unlikely]]                                                               \
      ::fusetune::detail::CheckFailed(#condition, __FILE__, __LINE__, std::string{__VA_ARGS__}); \
  } while (0)
