#include "search/speed_anchor.h"

#include <algorithm>

namespace fusetune::search {

void SpeedAnchor::AddRun(double seconds) {
  if (seconds > 0 && known_.insert(seconds).second) runs_.push_back(seconds);
}

std::optional<std::pair<double, double>> SpeedAnchor::Read(const measure::Candidate& anchor,
                                                           const MeasureFn& measure) {
  const auto age = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - last_at_).count();
  };
  // One run when the last is stale, more while fewer than kSeedRuns are
  // known; a failed run reads nothing.
  for (bool ran = false;;) {
    const bool stale = !last_ || age() >= max_age_;
    if (runs_.size() >= kSeedRuns && (ran || !stale)) break;
    const measure::MeasureResult r = measure(anchor);
    ran = true;
    if (!r.ok() || r.time.median <= 0) return std::nullopt;
    runs_.push_back(r.time.median);
    last_ = r.time.median;
    last_at_ = std::chrono::steady_clock::now();
  }
  if (!last_) return std::nullopt;
  std::vector<double> sorted = runs_;
  const auto middle = sorted.begin() + static_cast<std::ptrdiff_t>((sorted.size() - 1) / 2);
  std::nth_element(sorted.begin(), middle, sorted.end());
  return std::pair{*last_, *middle};
}

}  // namespace fusetune::search
