#include "compiler/precision_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "graph/reference_executor.h"
#include "measure/measurement.h"

namespace fusetune::compiler {

namespace {

constexpr uint64_t kInputSeed = 0x5eed;  // measure::MeasureOptions::input_seed's default

std::vector<size_t> Bf16Groups(const CompiledPlan& compiled) {
  std::vector<size_t> groups;
  for (size_t i = 0; i < compiled.plan.groups.size(); ++i)
    if (fusion_space::TilingPrecision(compiled.plan.groups[i].tiling) == kernels::Precision::kBf16)
      groups.push_back(i);
  return groups;
}

// Group i's tiling in f32: the same blocks when they fit, else its default.
// Its bf16 record no longer describes it: the choice keeps no measurement
// and counts as a default (never measured in f32 here).
void Demote(fusion_space::FusionSpace& space, CompiledPlan& compiled, size_t i) {
  fusion_space::PlanGroup& g = compiled.plan.groups[i];
  const fusion_space::Tiling f32 = fusion_space::WithPrecision(g.tiling, kernels::Precision::kF32);
  const fusion_space::TilingSpace& tilings = space.Tilings(g.nodes);
  const bool same_blocks = static_cast<bool>(tilings.Check(f32));
  g.tiling = same_blocks ? f32 : tilings.Default();
  if (i >= compiled.groups.size()) return;
  GroupChoice& c = compiled.groups[i].choice;
  if (auto it = compiled.count.find(c.source); it != compiled.count.end() && it->second > 0)
    --it->second;
  ++compiled.count[PlanSource::kDefault];
  c.source = PlanSource::kDefault;
  c.tiling = g.tiling;
  c.measured_seconds.reset();
  c.measured_error.reset();
  c.predicted_loss.reset();
  c.record_id = 0;
  c.detail = fmt::format("put back to f32 by the error budget's check ({}; not measured in f32)",
                         same_blocks ? "the bf16 record's blocks" : "the default tiling");
}

// What bf16 saves a group is unknown without its f32 record; its time is
// what it could save at most, so the shortest go back first.
std::vector<size_t> DemotionOrder(const CompiledPlan& compiled, std::vector<size_t> groups) {
  auto seconds = [&](size_t i) {
    return i < compiled.groups.size() ? compiled.groups[i].choice.cost : 0.0;
  };
  std::stable_sort(groups.begin(), groups.end(),
                   [&](size_t a, size_t b) { return seconds(a) < seconds(b); });
  return groups;
}

// The plan's error on the check's inputs, or an error when a run fails.
Result<double> PlanError(const fusion_space::Plan& plan, const LowerFn& lower,
                         const graph::TensorMap& feeds, const graph::TensorMap& expected) {
  FT_ASSIGN_OR_RETURN(auto program, lower(plan));
  FT_ASSIGN_OR_RETURN(graph::TensorMap got, program->Run(feeds));
  return measure::CompareOutputs(got, expected);
}

}  // namespace

Status ReadGroupErrors(TuningIndex& index, CompiledPlan* compiled) {
  for (GroupDecision& d : compiled->groups) {
    if (fusion_space::TilingPrecision(d.choice.tiling) != kernels::Precision::kBf16) continue;
    FT_ASSIGN_OR_RETURN(std::vector<db::Record> top, index.TopRecords(d.workload_key, 1));
    if (top.empty() || top[0].id != d.choice.record_id) continue;
    auto metrics = measure::MetricsFromText(top[0].metrics);
    if (metrics.ok()) d.choice.measured_error = metrics->measured.max_error;
  }
  return Status::Ok();
}

Result<PrecisionReport> EnforceErrorBudget(fusion_space::FusionSpace& space,
                                           CompiledPlan& compiled, double error_budget,
                                           const LowerFn& lower) {
  PrecisionReport report;
  report.error_budget = error_budget;
  const std::vector<size_t> bf16 = Bf16Groups(compiled);
  if (bf16.empty()) return report;
  const graph::TensorMap feeds = graph::RandomFeeds(space.graph(), kInputSeed);
  auto reference = graph::RunReference(space.graph(), feeds);
  if (!reference.ok()) {
    for (size_t i : bf16) Demote(space, compiled, i);
    report.demoted = static_cast<int>(bf16.size());
    report.note = "not measured, every group in f32: the reference executor failed on random "
                  "inputs: " + reference.error().message();
    return report;
  }
  const std::vector<size_t> order = DemotionOrder(compiled, bf16);
  // The fewest demotions (in `order`) that meet the budget, by bisection: a
  // handful of runs. The error need not fall strictly as groups go back to
  // f32, so this may demote more than the fewest, but the plan it keeps was
  // measured within the budget (or is all f32).
  auto error_with = [&](size_t demoted) -> Result<double> {
    CompiledPlan trial;
    trial.plan = compiled.plan;
    for (size_t k = 0; k < demoted; ++k) Demote(space, trial, order[k]);
    return PlanError(trial.plan, lower, feeds, reference->outputs);
  };
  FT_ASSIGN_OR_RETURN(double error, error_with(0));
  size_t demoted = 0;
  if (error > error_budget) {
    // error_with(lo) is over the budget; error_with(hi), every group in
    // f32, is taken to be within it (f32's error is far below any budget).
    size_t lo = 0, hi = order.size();
    double hi_error = -1;  // not measured yet
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      FT_ASSIGN_OR_RETURN(double e, error_with(mid));
      if (e <= error_budget) {
        hi = mid;
        hi_error = e;
      } else {
        lo = mid;
      }
    }
    if (hi_error < 0) {
      FT_ASSIGN_OR_RETURN(hi_error, error_with(hi));
    }
    demoted = hi;
    error = hi_error;
  }
  for (size_t k = 0; k < demoted; ++k) Demote(space, compiled, order[k]);
  report.demoted = static_cast<int>(demoted);
  report.end_to_end_error = error;
  report.bf16_groups = static_cast<int>(bf16.size()) - report.demoted;
  return report;
}

}  // namespace fusetune::compiler
