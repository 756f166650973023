#include "compiler/plan_layouts.h"

#include <fmt/format.h>

#include "fusion_space/layout_choice.h"

namespace fusetune::compiler {

namespace {

// Records read per conv workload: its layouts' fastest are among the first.
constexpr int kLayoutRecordsRead = 64;

struct Recorded {
  fusion_space::Tiling tiling;
  double seconds = 0;
  int64_t id = 0;
};

}  // namespace

Status ChooseRecordedLayouts(fusion_space::FusionSpace& space, TuningIndex& index,
                             fusion_space::Plan* plan,
                             std::map<std::vector<int32_t>, GroupChoice>* choices) {
  // Each exact conv group's records, by nodes.
  std::map<std::vector<int32_t>, std::vector<Recorded>> recorded;
  for (const fusion_space::PlanGroup& g : plan->groups) {
    const GroupChoice& choice = choices->at(g.nodes);
    const fusion_space::KernelTemplate kind = space.Match(g.nodes).instance.kind;
    if (kind != fusion_space::KernelTemplate::kConv || choice.source != PlanSource::kExact)
      continue;
    FT_ASSIGN_OR_RETURN(const std::vector<db::Record> records,
                        index.TopRecords(space.Key(g.nodes).ToString(), kLayoutRecordsRead));
    for (const db::Record& r : records)
      if (auto tiling = TilingFromRecordPlan(r.plan, kind, space.Tilings(g.nodes)))
        recorded[g.nodes].push_back({*tiling, r.seconds, r.id});
  }
  if (recorded.empty()) return Status::Ok();
  const auto cost =
      fusion_space::TransformCost::OfTarget(index.features().launch_us, index.features().l2_gbps);
  const fusion_space::Plan chosen = fusion_space::HarmonizeLayouts(
      space, *plan,
      [&](const fusion_space::PlanGroup& g) {
        std::vector<std::pair<fusion_space::Tiling, double>> out;
        for (const Recorded& r : recorded[g.nodes]) out.emplace_back(r.tiling, r.seconds);
        return out;
      },
      cost);
  for (size_t i = 0; i < plan->groups.size(); ++i) {
    const std::string was = fusion_space::TilingToString(plan->groups[i].tiling);
    const std::string now = fusion_space::TilingToString(chosen.groups[i].tiling);
    if (was == now) continue;
    GroupChoice& choice = choices->at(plan->groups[i].nodes);
    for (const Recorded& r : recorded[plan->groups[i].nodes])
      if (fusion_space::TilingToString(r.tiling) == now) {
        choice.detail += fmt::format(
            "; layouts chosen with its neighbours (fastest alone: {}, "
            "{:.3f} ms)",
            was, choice.measured_seconds.value_or(choice.cost) * 1e3);
        choice.tiling = r.tiling;
        choice.cost = r.seconds;
        choice.measured_seconds = r.seconds;
        choice.record_id = r.id;
        break;
      }
    plan->groups[i].tiling = choice.tiling;
  }
  return Status::Ok();
}

}  // namespace fusetune::compiler
