// Leveled logging to stderr. The level comes from SetLogLevel (the CLI's
// --log-level) or the FUSETUNE_LOG environment variable (debug, info, warn,
// error, off); the default is warn so that commands print only their results.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace fusetune {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "debug", "info", "warn", "error", "off"; false on anything else.
bool ParseLogLevel(std::string_view text, LogLevel* level);
void LogMessage(LogLevel level, std::string_view message);

template <typename... Args>
void Log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < GetLogLevel()) return;
  LogMessage(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace fusetune

#define FT_LOG_DEBUG(...) ::fusetune::Log(::fusetune::LogLevel::kDebug, __VA_ARGS__)
#define FT_LOG_INFO(...) ::fusetune::Log(::fusetune::LogLevel::kInfo, __VA_ARGS__)
#define FT_LOG_WARN(...) ::fusetune::Log(::fusetune::LogLevel::kWarn, __VA_ARGS__)
#define FT_LOG_ERROR(...) ::fusetune::Log(::fusetune::LogLevel::kError, __VA_ARGS__)
