// Mixed precision's whole plans: a plan whose bf16 groups together miss the
// error budget, fitted to it by putting the groups that save least back to
// f32 (tuner.h's FitErrorBudget).
#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "fusion_space/tiling_space.h"
#include "search/evolution.h"
#include "search/tuner_plans.h"

namespace fusetune::search {

namespace {

bool InBf16(const fusion_space::Tiling& tiling) {
  return fusion_space::TilingPrecision(tiling) == kernels::Precision::kBf16;
}

// A bf16 group of a plan and what it saves over its task's best f32
// tiling (infinite when no f32 tiling was measured: it goes back last,
// to the same blocks in f32 or the space's default).
struct Bf16Group {
  size_t index;
  double saves;
  fusion_space::Tiling f32;
};

}  // namespace

Status Tuner::MeasurePlanWithinBudget(const fusion_space::Plan& plan, const std::string& kind,
                                      std::optional<double> predicted) {
  bool wrong = false;
  FT_RETURN_IF_ERROR(MeasurePlan(plan, kind, predicted, &wrong));
  const bool any_bf16 = std::any_of(plan.groups.begin(), plan.groups.end(),
                                    [](const auto& g) { return InBf16(g.tiling); });
  if (!wrong || !any_bf16 || StopReason() == "interrupted") return Status::Ok();
  return FitErrorBudget(plan, kind);
}

Status Tuner::FitErrorBudget(const fusion_space::Plan& plan, const std::string& kind) {
  std::vector<Bf16Group> groups;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const fusion_space::PlanGroup& g = plan.groups[i];
    if (!InBf16(g.tiling)) continue;
    const fusion_space::TilingSpace& tilings = space_.Tilings(g.nodes);
    fusion_space::Tiling f32 = fusion_space::WithPrecision(g.tiling, kernels::Precision::kF32);
    if (!tilings.Check(f32)) f32 = tilings.Default();
    double saves = std::numeric_limits<double>::infinity();
    auto it = task_by_key_.find(space_.Key(g.nodes).ToString());
    if (it != task_by_key_.end()) {
      const TaskSearch& s = *searches_[it->second];
      auto bf16 = s.BestMeasured([&](const fusion_space::Tiling& t) { return t == g.tiling; });
      auto best_f32 = s.BestMeasured([](const fusion_space::Tiling& t) { return !InBf16(t); });
      if (best_f32) {
        f32 = best_f32->first;
        if (bf16) saves = best_f32->second - bf16->second;
      }
    }
    groups.push_back({i, saves, std::move(f32)});
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Bf16Group& a, const Bf16Group& b) { return a.saves < b.saves; });
  // `back` groups put back to f32, the least saving first.
  auto with_back = [&](size_t back) {
    fusion_space::Plan p = plan;
    for (size_t k = 0; k < back; ++k) p.groups[groups[k].index].tiling = groups[k].f32;
    return p;
  };
  // Invariant: `lo` put back misses the budget; `hi` is not known to.
  size_t lo = 0, hi = groups.size();
  while (lo + 1 < hi) {
    if (StopReason() == "interrupted") return Status::Ok();
    const size_t mid = (lo + hi) / 2;
    bool wrong = false;
    FT_RETURN_IF_ERROR(MeasurePlan(with_back(mid), kind, std::nullopt, &wrong));
    (wrong ? lo : hi) = mid;
  }
  if (StopReason() == "interrupted") return Status::Ok();
  return MeasurePlan(with_back(hi), kind);
}

}  // namespace fusetune::search
