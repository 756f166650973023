// The host's speed, read off one candidate run again and again: the
// tuner's anchor, the model's greedy plan.
//
// A shared host's speed swings by up to 1.9x within seconds (docs/SEARCH.md:
// a 12-minute MobileNetV2 job measured plans of the same 31 kernels at
// 2.4-2.6 ms in one batch and at 4.6-5.0 ms 35 s later), so a time measured
// alone says as much about its moment as about its candidate, and the
// fastest record is the luckiest. The tuner reads the anchor before each
// whole plan and each round of a task, and scales what it measures next by
// reference / now: the reference is the median of every run of the anchor
// known (this job's and the database's earlier records'), so that records
// hold times at the host's typical speed, comparable across moments, tasks
// and jobs. One run is no reference (a job's first measurement of the
// greedy plan once read 12.8 ms where its later runs' median was 4.9), so
// the first read runs the anchor until kSeedRuns are known.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <vector>

#include "measure/result.h"
#include "search/tasks.h"

namespace fusetune::search {

// One reading of the anchor: its time now and the reference.
struct AnchorReading {
  double now = 0;
  double reference = 0;
  // A time measured beside this reading, brought to the reference speed.
  double Scale(double seconds) const { return seconds * reference / now; }
  // Written into the record's search note beside the raw time.
  void WriteTo(measure::SearchNote* note) const {
    note->anchor_seconds = now;
    note->anchor_reference_seconds = reference;
  }
};

class SpeedAnchor {
 public:
  static constexpr size_t kSeedRuns = 3;
  // A run younger than this is read again rather than taken anew: the
  // host's swings last seconds, and a round of trials takes well under one.
  static constexpr double kMaxAgeSeconds = 1.0;
  // A new run this much slower than the reference is taken once more and
  // the second run read: a stall of a few hundred milliseconds that hits
  // the anchor's run alone would make everything measured beside it look
  // up to twice as fast as it is (a ResNet-18 job's anchor once read 29.9
  // ms against a 13.3 ms reference while the plan after it ran at its usual
  // speed), and the tuner keeps its fastest records. A slowdown that lasts
  // reads slow twice and is taken; a fast reading needs no check, as it can
  // only make records look slower.
  static constexpr double kConfirmAbove = 1.25;

  explicit SpeedAnchor(double max_age_seconds = kMaxAgeSeconds) : max_age_(max_age_seconds) {}

  // A time of the anchor measured earlier: the greedy baseline's record, or
  // an earlier record's anchor run (each run once, however many records it
  // timed).
  void AddRun(double seconds);
  // The anchor's time now (run when the last run is older than the max age
  // or fewer than kSeedRuns are known, run again when kConfirmAbove the
  // reference) and the reference, the median of all runs. `fresh`: run it
  // now whatever the last run's age (a whole plan's confirmation runs, each
  // beside its own anchor run). nullopt when no run succeeded.
  std::optional<AnchorReading> Read(const measure::Candidate& anchor, const MeasureFn& measure,
                                    bool fresh = false);
  size_t runs() const { return runs_.size(); }

 private:
  bool Run(const measure::Candidate& anchor, const MeasureFn& measure);
  double Median() const;

  double max_age_;
  std::vector<double> runs_;
  std::set<double> known_;  // AddRun's times, to take each earlier run once
  std::optional<double> last_;
  std::chrono::steady_clock::time_point last_at_;
};

}  // namespace fusetune::search
