#include "cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace fusetune::cli {

namespace {

std::string Clock(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

ProgressLine::ProgressLine(std::string what, bool enabled)
    : what_(std::move(what)),
      enabled_(enabled),
      tty_(isatty(fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void ProgressLine::Update(int64_t done, int64_t total, const std::string& note) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since_last = std::chrono::duration<double>(now - last_).count();
  const bool known = total > 0;
  if (drawn_ && since_last < (tty_ ? 0.1 : 5.0) && (!known || done < total)) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  // Under half a second the rate is mostly noise of the first few units.
  const double rate = elapsed > 0.5 ? static_cast<double>(done) / elapsed : 0;
  std::string line;
  if (known) {
    // Past the total (a time budget overrun by the last measurement, or
    // resumed past it): a full bar, not a negative remainder.
    const double fraction =
        std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
    const int width = 24, filled = static_cast<int>(fraction * width);
    const std::string eta =
        rate > 0 ? Clock(static_cast<double>(std::max<int64_t>(total - done, 0)) / rate) : "?";
    line =
        fmt::format("{} [{}{}] {}/{} {:.1f}/s elapsed {} ETA {}", what_, std::string(filled, '#'),
                    std::string(width - filled, ' '), done, total, rate, Clock(elapsed), eta);
  } else {
    line = fmt::format("{} {} {:.1f}/s elapsed {}", what_, done, rate, Clock(elapsed));
  }
  if (!note.empty()) line += "  " + note.substr(0, 60);
  if (tty_)
    fmt::print(stderr, "\r\033[K{}", line);
  else
    fmt::print(stderr, "{}\n", line);
  drawn_ = true;
}

void ProgressLine::Finish() {
  if (enabled_ && drawn_ && tty_) fmt::print(stderr, "\n");
  drawn_ = false;
}

void ProgressLine::Restart() {
  Finish();
  start_ = last_ = std::chrono::steady_clock::now();
}

}  // namespace fusetune::cli
