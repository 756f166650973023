#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace fusetune {

namespace {
LogLevel InitialLevel() {
  LogLevel level = LogLevel::kWarn;
  if (const char* env = std::getenv("FUSETUNE_LOG")) ParseLogLevel(env, &level);
  return level;
}
std::atomic<LogLevel>& LevelRef() {
  static std::atomic<LogLevel> level{InitialLevel()};
  return level;
}
const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kOff:
      return "off";
  }
  return "?";
}
}  // namespace

void SetLogLevel(LogLevel level) { LevelRef().store(level); }
LogLevel GetLogLevel() { return LevelRef().load(); }

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  for (LogLevel l :
       {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError, LogLevel::kOff}) {
    if (text == LevelName(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

void LogMessage(LogLevel level, std::string_view message) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "[fusetune %s] %.*s\n", LevelName(level), static_cast<int>(message.size()),
               message.data());
}

}  // namespace fusetune
