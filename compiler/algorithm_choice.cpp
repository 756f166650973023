#include "compiler/algorithm_choice.h"

#include <fmt/format.h>

#include "graph/workload_key.h"

namespace fusetune::compiler {

namespace {

// Records read per workload: a tuned conv holds hundreds, and the fastest of
// another algorithm is almost always among the first few dozen.
constexpr int kAlgorithmRecordsRead = 256;

// "nchw16c -> nhwc": the layouts a conv reads X in and writes Y in.
std::string LayoutsText(const kernels::ConvTiling& t) {
  return fmt::format("{} -> {}", kernels::ActivationLayoutName(t.in_layout),
                     kernels::ActivationLayoutName(t.out_layout));
}

// " (+18%)": how much slower `seconds` ran than the plan's choice.
std::string Slower(double seconds, std::optional<double> mine) {
  if (!mine || *mine <= 0) return "";
  return fmt::format(" ({:+.0f}%)", 100 * (seconds / *mine - 1));
}

Result<std::string> RunnerUp(TuningIndex& index, const std::string& workload_key,
                             const fusion_space::KernelInstance& instance,
                             const fusion_space::TilingSpace& tilings,
                             const kernels::ConvTiling& mine, std::optional<double> mine_seconds) {
  // A mixed compile (the space offers bf16) also names the precision.
  const bool mixed = tilings.Offers(kernels::Precision::kBf16);
  std::string text =
      fmt::format("algorithm {}{}, layout {}", kernels::ConvAlgorithmName(mine.algorithm),
                  mixed ? fmt::format(" in {}", kernels::PrecisionName(mine.precision)) : "",
                  LayoutsText(mine));
  FT_ASSIGN_OR_RETURN(const std::vector<db::Record> records,
                      index.TopRecords(workload_key, kAlgorithmRecordsRead));
  std::optional<std::string> algorithm, layout, precision;
  auto runner_up = [&](const char* what, const std::string& which, const db::Record& r) {
    return fmt::format("runner-up {} {} {:.3f} ms{}", what, which, r.seconds * 1e3,
                       Slower(r.seconds, mine_seconds));
  };
  for (const db::Record& r : records) {
    const auto tiling = TilingFromRecordPlan(r.plan, instance.kind, tilings);
    const auto* other = tiling ? std::get_if<kernels::ConvTiling>(&*tiling) : nullptr;
    if (other == nullptr) continue;
    if (!algorithm && other->algorithm != mine.algorithm)
      algorithm = runner_up("algorithm", kernels::ConvAlgorithmName(other->algorithm), r);
    if (!layout && LayoutsText(*other) != LayoutsText(mine))
      layout = runner_up("layout", LayoutsText(*other), r);
    if (mixed && !precision && other->precision != mine.precision)
      precision = runner_up("precision", kernels::PrecisionName(other->precision), r);
    if (algorithm && layout && (precision || !mixed)) break;
  }
  text += "; " + algorithm.value_or("no other algorithm measured");
  text += "; " + layout.value_or("no other layout measured");
  if (mixed) text += "; " + precision.value_or("no other precision measured");
  return text;
}

// A conv chain's nodes cut where each Conv starts: every conv with the
// activations (or, for the last, the epilogue) after it, the groups the
// chain would run as unfused.
std::vector<std::vector<int32_t>> UnfusedConvGroups(const graph::Graph& g,
                                                    const std::vector<int32_t>& nodes) {
  std::vector<std::vector<int32_t>> groups;
  for (int32_t n : nodes) {
    if (g.nodes[n].op_type == "Conv" || groups.empty()) groups.emplace_back();
    groups.back().push_back(n);
  }
  return groups;
}

// "fused conv chain (layout nchw -> nchw); unfused 0.212 ms (+15%): conv im2col_gemm,
// conv depthwise, conv im2col_gemm" from the fastest record of each conv
// with its activations as a group of its own.
Result<std::string> ChainAgainstUnfused(fusion_space::FusionSpace& space, TuningIndex& index,
                                        const std::vector<int32_t>& nodes,
                                        std::optional<double> mine_seconds) {
  std::string text = "fused conv chain (layout nchw -> nchw)", parts;
  double unfused = 0;
  for (const std::vector<int32_t>& group : UnfusedConvGroups(space.graph(), nodes)) {
    const fusion_space::GroupMatch& m = space.Match(group);
    FT_ASSIGN_OR_RETURN(const std::vector<db::Record> best,
                        index.TopRecords(space.Key(group).ToString(), 1));
    if (!m.decision || m.instance.kind != fusion_space::KernelTemplate::kConv || best.empty())
      return text + "; the convs unfused not measured";
    const auto tiling = TilingFromRecordPlan(best[0].plan, m.instance.kind, space.Tilings(group));
    const auto* conv = tiling ? std::get_if<kernels::ConvTiling>(&*tiling) : nullptr;
    parts += fmt::format("{}{}", parts.empty() ? "" : ", ",
                         conv ? kernels::ConvAlgorithmName(conv->algorithm) : "?");
    unfused += best[0].seconds;
  }
  text += fmt::format("; unfused {:.3f} ms", unfused * 1e3);
  if (mine_seconds && *mine_seconds > 0)
    text += fmt::format(" ({:+.0f}%)", 100 * (unfused / *mine_seconds - 1));
  return text + " as " + parts;
}

}  // namespace

Status ExplainAlgorithmChoices(fusion_space::FusionSpace& space, TuningIndex& index,
                               CompiledPlan* plan) {
  for (GroupDecision& d : plan->groups) {
    if (d.kind == fusion_space::KernelTemplate::kConvChain) {
      FT_ASSIGN_OR_RETURN(const std::string text,
                          ChainAgainstUnfused(space, index, d.nodes, d.choice.measured_seconds));
      d.choice.detail += (d.choice.detail.empty() ? "" : "; ") + text;
      continue;
    }
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
