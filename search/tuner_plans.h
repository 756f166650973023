// Internal to the tuner (tuner.cpp, tuner_plans.cpp): the whole plans of a
// job and the helpers that make their records.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "measure/measurer.h"
#include "search/speed_anchor.h"
#include "search/tuner.h"

namespace fusetune::search {

struct Tuner::PlanState {
  std::vector<PlanReport> measured;  // ok measurements only
  std::vector<nlohmann::json> plan_json;
  // Plan JSON text of everything measured, failed included, and how its
  // last measurement ended.
  std::map<std::string, db::RecordStatus> status;
  std::optional<size_t> unfused, greedy, best;
  int tuned_count = 0;  // tuned plans built (measured or already known)
  std::string last_tuned;  // plan JSON text of the last min-cost partition (TunedPlan)
  std::optional<ShowdownReport> showdown;
  // The anchor plans and rounds are timed beside (Tuner::ReadAnchor): the
  // greedy plan's candidate, made at its first use, and its runs.
  std::optional<measure::Candidate> anchor;
  SpeedAnchor speed;

  explicit PlanState(double anchor_max_age_seconds) : speed(anchor_max_age_seconds) {}

  bool AddPrior(const db::Record& record);
  void Add(PlanReport report, nlohmann::json plan, db::RecordStatus status);
};

// A whole plan's run: what was measured, the anchor reading beside it
// (none for the greedy plan) and its time at the reference speed.
struct Tuner::PlanRun {
  measure::MeasureResult result;
  std::optional<AnchorReading> anchor;
  double seconds = 0;
};

// The middle of `values` by `key`; of an even count, the upper one (of two
// runs, the slower).
template <typename T, typename Key>
T MedianBy(std::vector<T> values, Key key) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end(),
                   [&](const T& a, const T& b) { return key(a) < key(b); });
  return std::move(*middle);
}

// The kernel template of each group of `plan` (what its record names).
std::vector<fusion_space::KernelTemplate> PlanTemplates(fusion_space::FusionSpace& space,
                                                        const fusion_space::Plan& plan);

}  // namespace fusetune::search
