// Mixed precision's whole plans: a plan whose bf16 groups together miss the
// error budget, fitted to it by putting the groups that save least back to
// f32 (tuner.h's FitErrorBudget).
#include <algorithm>
#include <limits>
#include <utility>
#include <variant>
#include <vector>

#include "fusion_space/tiling_space.h"
#include "kernels/conv.h"
#include "search/evolution.h"
#include "search/tuner_plans.h"

namespace fusetune::search {

namespace {

bool InBf16(const fusion_space::Tiling& tiling) {
  return fusion_space::TilingPrecision(tiling) == kernels::Precision::kBf16;
}

// The same activation layouts (conv tilings; any other tiling has none):
// a group put back to f32 keeps its plan's layouts, so that the harmonized
// and NCHW variants stay what they are and no transform appears.
bool SameLayouts(const fusion_space::Tiling& a, const fusion_space::Tiling& b) {
  const auto* x = std::get_if<kernels::ConvTiling>(&a);
  const auto* y = std::get_if<kernels::ConvTiling>(&b);
  if (x == nullptr || y == nullptr) return (x == nullptr) == (y == nullptr);
  return x->in_layout == y->in_layout && x->out_layout == y->out_layout;
}

// A bf16 group of a plan, its f32 tiling, and what that saves per unit of
// the error the bf16 record measured: infinite (put back last) when its
// task has no f32 record in its layouts or no record of the bf16 tiling.
// The error is the group's own, on its own outputs: a proxy for what it
// adds at the model's, which is what the budget bounds.
struct Bf16Group {
  size_t index;
  double saves_per_error;
  fusion_space::Tiling f32;
};

// Errors below this count as this: a group whose record shows no error
// still rounds.
constexpr double kErrorFloor = 1e-6;

}  // namespace

Status Tuner::MeasurePlanWithinBudget(const fusion_space::Plan& plan, measure::PlanKind kind,
                                      std::optional<double> predicted) {
  db::RecordStatus status = db::RecordStatus::kOk;
  FT_RETURN_IF_ERROR(MeasurePlan(plan, kind, predicted, &status));
  const bool any_bf16 = std::any_of(plan.groups.begin(), plan.groups.end(),
                                    [](const auto& g) { return InBf16(g.tiling); });
  if (status != db::RecordStatus::kWrong || !any_bf16 || Interrupted()) return Status::Ok();
  return FitErrorBudget(plan, kind);
}

// The f32 tiling group `g` goes back to: its task's fastest f32 record in
// the same layouts, else the same blocks in f32, else the default.
std::pair<fusion_space::Tiling, double> Tuner::F32TilingOf(const fusion_space::PlanGroup& g) {
  const fusion_space::TilingSpace& tilings = space_.Tilings(g.nodes);
  fusion_space::Tiling twin = fusion_space::WithPrecision(g.tiling, kernels::Precision::kF32);
  if (!tilings.Check(twin)) twin = tilings.Default();
  double saves_per_error = std::numeric_limits<double>::infinity();
  auto it = task_by_key_.find(space_.Key(g.nodes).ToString());
  if (it == task_by_key_.end()) return {twin, saves_per_error};
  auto best_f32 = searches_[it->second]->BestMeasured(
      [&](const fusion_space::Tiling& t) { return !InBf16(t) && SameLayouts(t, g.tiling); });
  if (!best_f32) return {twin, saves_per_error};
  const auto& results = task_results_[it->second];
  if (auto bf16 = results.find(fusion_space::TilingToString(g.tiling)); bf16 != results.end())
    saves_per_error =
        (best_f32->second - bf16->second.seconds) / std::max(bf16->second.max_error, kErrorFloor);
  return {best_f32->first, saves_per_error};
}

Status Tuner::FitErrorBudget(const fusion_space::Plan& plan, measure::PlanKind kind) {
  std::vector<Bf16Group> groups;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    if (!InBf16(plan.groups[i].tiling)) continue;
    auto [f32, saves_per_error] = F32TilingOf(plan.groups[i]);
    groups.push_back({i, saves_per_error, std::move(f32)});
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Bf16Group& a, const Bf16Group& b) {
    return a.saves_per_error < b.saves_per_error;
  });
  // `back` groups put back to f32, in that order.
  auto with_back = [&](size_t back) {
    fusion_space::Plan p = plan;
    for (size_t k = 0; k < back; ++k) p.groups[groups[k].index].tiling = groups[k].f32;
    return p;
  };
  // Invariant: `lo` put back is no result (over the budget, or a run that
  // failed); `hi` is not known to be one.
  size_t lo = 0, hi = groups.size();
  while (lo + 1 < hi) {
    if (Interrupted()) return Status::Ok();
    const size_t mid = (lo + hi) / 2;
    const fusion_space::Plan p = with_back(mid);
    db::RecordStatus status = db::RecordStatus::kFailed;
    if (space_.Validate(p)) FT_RETURN_IF_ERROR(MeasurePlan(p, kind, std::nullopt, &status));
    (status == db::RecordStatus::kOk ? hi : lo) = mid;
  }
  if (Interrupted()) return Status::Ok();
  const fusion_space::Plan p = with_back(hi);
  return space_.Validate(p) ? MeasurePlan(p, kind) : Status::Ok();
}

}  // namespace fusetune::search
