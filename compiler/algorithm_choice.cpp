#include "compiler/algorithm_choice.h"

#include <fmt/format.h>

#include "graph/workload_key.h"

namespace fusetune::compiler {

namespace {

// Records read per workload: a tuned conv holds hundreds, and the fastest of
// another algorithm is almost always among the first few dozen.
constexpr int kRecordsRead = 256;

Result<std::string> RunnerUp(TuningIndex& index, const std::string& workload_key,
                             const fusion_space::KernelInstance& instance,
                             const fusion_space::TilingSpace& tilings,
                             const kernels::ConvTiling& mine, std::optional<double> mine_seconds) {
  // Kernels take and give NCHW at group boundaries; layouts inside a tile
  // are the algorithm's (kernels/conv.h).
  std::string text =
      fmt::format("algorithm {} (layout NCHW)", kernels::ConvAlgorithmName(mine.algorithm));
  FT_ASSIGN_OR_RETURN(const std::vector<db::Record> records,
                      index.TopRecords(workload_key, kRecordsRead));
  for (const db::Record& r : records) {
    const auto tiling = TilingFromRecordPlan(r.plan, instance.kind, tilings);
    const auto* other = tiling ? std::get_if<kernels::ConvTiling>(&*tiling) : nullptr;
    if (other == nullptr || other->algorithm == mine.algorithm) continue;
    text += fmt::format("; runner-up {} {:.3f} ms", kernels::ConvAlgorithmName(other->algorithm),
                        r.seconds * 1e3);
    if (mine_seconds && *mine_seconds > 0)
      text += fmt::format(" ({:+.0f}%)", 100 * (r.seconds / *mine_seconds - 1));
    return text;
  }
  return text + "; no other algorithm measured";
}

}  // namespace

Status ExplainAlgorithmChoices(fusion_space::FusionSpace& space, TuningIndex& index,
                               CompiledPlan* plan) {
  for (GroupDecision& d : plan->groups) {
    const auto* mine = std::get_if<kernels::ConvTiling>(&d.choice.tiling);
    if (d.kind != fusion_space::KernelTemplate::kConv || mine == nullptr) continue;
    const fusion_space::KernelInstance& instance = space.Match(d.nodes).instance;
    const std::string key = d.workload_key.empty() ? space.Key(d.nodes).ToString() : d.workload_key;
    FT_ASSIGN_OR_RETURN(
        const std::string text,
        RunnerUp(index, key, instance, space.Tilings(d.nodes), *mine, d.choice.measured_seconds));
    d.choice.detail += (d.choice.detail.empty() ? "" : "; ") + text;
  }
  return Status::Ok();
}

}  // namespace fusetune::compiler
