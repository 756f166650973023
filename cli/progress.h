// A progress line on stderr: bar, count, rate and ETA, redrawn in place when
// stderr is a terminal and printed every few seconds otherwise (logs).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace fusetune::cli {

class ProgressLine {
 public:
  explicit ProgressLine(std::string what, bool enabled = true);
  // `done` of `total` units; `note` is appended (the current task). A total
  // of 0 or less is unknown: a count and a rate, no bar or ETA.
  void Update(int64_t done, int64_t total, const std::string& note = "");
  void Finish();
  // Finishes this line and starts timing a new stage from zero.
  void Restart();

 private:
  std::string what_;
  bool enabled_, tty_;
  std::chrono::steady_clock::time_point start_, last_;
  bool drawn_ = false;
};

}  // namespace fusetune::cli
