#include "search/speed_anchor.h"

#include <algorithm>

namespace fusetune::search {

void SpeedAnchor::AddRun(double seconds) {
  if (seconds > 0 && known_.insert(seconds).second) runs_.push_back(seconds);
}

bool SpeedAnchor::Run(const measure::Candidate& anchor, const MeasureFn& measure) {
  const measure::MeasureResult r = measure(anchor);
  if (!r.ok() || r.time.median <= 0) return false;
  runs_.push_back(r.time.median);
  last_ = r.time.median;
  last_at_ = std::chrono::steady_clock::now();
  return true;
}

double SpeedAnchor::Median() const {
  std::vector<double> sorted = runs_;
  const auto middle = sorted.begin() + static_cast<std::ptrdiff_t>((sorted.size() - 1) / 2);
  std::nth_element(sorted.begin(), middle, sorted.end());
  return *middle;
}

std::optional<AnchorReading> SpeedAnchor::Read(const measure::Candidate& anchor,
                                               const MeasureFn& measure, bool fresh) {
  const auto age = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - last_at_).count();
  };
  // One run when the last is stale, more while fewer than kSeedRuns are
  // known; a failed run reads nothing.
  bool ran = false;
  for (;;) {
    const bool stale = fresh || !last_ || age() >= max_age_;
    if (runs_.size() >= kSeedRuns && (ran || !stale)) break;
    if (!Run(anchor, measure)) return std::nullopt;
    ran = true;
  }
  if (!last_) return std::nullopt;
  if (ran && *last_ > kConfirmAbove * Median() && !Run(anchor, measure)) return std::nullopt;
  return AnchorReading{*last_, Median()};
}

}  // namespace fusetune::search
