#include "compiler/explain.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "fusion_space/plan_json.h"
#include "runtime/layout_plan.h"

namespace fusetune::compiler {

namespace {

std::string Mib(double bytes) { return fmt::format("{:.2f} MiB", bytes / (1 << 20)); }

std::string NodeList(const std::vector<int32_t>& nodes) {
  if (nodes.size() == 1) return fmt::format("node {}", nodes[0]);
  bool run = nodes.back() - nodes.front() + 1 == static_cast<int32_t>(nodes.size());
  if (run) return fmt::format("nodes {}-{}", nodes.front(), nodes.back());
  return fmt::format("nodes {}", fmt::join(nodes, ","));
}

// Measured time with the prediction beside it when there is one.
std::string Time(const GroupChoice& c) {
  if (!c.measured_seconds && c.source == PlanSource::kWholeModel)
    return fmt::format("{:<30}", "   in the whole-model time");
  if (!c.measured_seconds)
    return fmt::format("{:8.3f} ms predicted        ", c.predicted_seconds * 1e3);
  if (c.predicted_seconds <= 0)
    return fmt::format("{:8.3f} ms measured         ", *c.measured_seconds * 1e3);
  return fmt::format("{:8.3f} ms meas. ({:.3f} pred.)", *c.measured_seconds * 1e3,
                     c.predicted_seconds * 1e3);
}

// The analytical model's parts for the group's tiling: what the time is made
// of, in physical terms (the predicted time above is this x the scale).
std::string Parts(fusion_space::FusionSpace& space, const CompiledPlan& plan,
                  const GroupDecision& d, const cost_model::CostModel& analytical) {
  const fusion_space::KernelInstance& instance = space.Match(d.nodes).instance;
  if (instance.kind == fusion_space::KernelTemplate::kReference || !plan.target) return "";
  cost_model::FeatureMatrix x;
  x.Add(cost_model::MakeGroupInfo(space.graph(), instance), d.choice.tiling, *plan.target);
  return analytical.Predict(x).front().ToString();
}

std::string Loss(const GroupChoice& c) {
  return c.predicted_loss ? fmt::format("{:5.1f}%", *c.predicted_loss * 100) : "    ? ";
}

// Why the group ends where it does: for each neighbouring node outside it,
// whether adding that node is forbidden (the constraint) or allowed (then
// the partition's costs decided: the larger group's cost is shown).
std::vector<std::string> BoundaryReasons(
    fusion_space::FusionSpace& space, const CompiledPlan& plan, const GroupDecision& d,
    const std::map<std::vector<int32_t>, int32_t>& candidate_of) {
  std::vector<std::string> lines;
  std::set<int32_t> inside(d.nodes.begin(), d.nodes.end()), neighbours;
  for (int32_t n : d.nodes) {
    for (int32_t m : space.flow().producers(n))
      if (!inside.count(m)) neighbours.insert(m);
    for (int32_t m : space.flow().consumers(n))
      if (!inside.count(m)) neighbours.insert(m);
  }
  for (int32_t m : neighbours) {
    std::vector<int32_t> grown = d.nodes;
    grown.insert(std::upper_bound(grown.begin(), grown.end(), m), m);
    const std::string who = space.graph().Describe(m);
    const fusion_space::GroupMatch& match = space.Match(grown);
    if (!match.decision) {
      lines.push_back(fmt::format("not fused with {}: {}", who, match.decision.reason()));
      continue;
    }
    auto it = candidate_of.find(grown);
    if (it == candidate_of.end()) {
      lines.push_back(
          fmt::format("not fused with {}: legal, but the plan covers it otherwise", who));
      continue;
    }
    const GroupChoice& c = plan.candidates[it->second];
    lines.push_back(fmt::format(
        "not fused with {}: legal, {} with it ({}) against {} here; the partition's total decided",
        who, fmt::format("{:.3f} ms", c.cost * 1e3), PlanSourceName(c.source),
        fmt::format("{:.3f} ms", d.choice.cost * 1e3)));
  }
  return lines;
}

}  // namespace

namespace {

// Where the plan's activations change layout (runtime/layout_plan.h).
std::string LayoutsLine(fusion_space::FusionSpace& space, const CompiledPlan& plan) {
  std::vector<runtime::LayoutStep> steps;
  for (const fusion_space::PlanGroup& g : plan.plan.groups)
    steps.push_back({space.Match(g.nodes).instance, g.tiling, std::nullopt, {}});
  auto placed = runtime::PlaceLayouts(space.graph(), std::move(steps));
  return placed.ok() ? runtime::DescribeTransforms(space.graph(), *placed)
                     : placed.error().message();
}

// "precision   ..." for a mixed-precision compile, else nothing.
std::string PrecisionLine(const CompiledPlan& plan) {
  const int bf16 = fusion_space::CountBf16Groups(plan.plan);
  if (!plan.precision && bf16 == 0) return "";
  std::string line =
      fmt::format("precision   {} of {} kernels in bf16", bf16, plan.plan.groups.size());
  if (!plan.precision) return line + "\n";
  const PrecisionReport& p = *plan.precision;
  line += fmt::format(", error budget {:g}", p.error_budget);
  if (p.demoted > 0) line += fmt::format(", {} put back to f32 to meet it", p.demoted);
  if (p.end_to_end_error)
    line += fmt::format("; end-to-end error {:.2g} on random inputs against the reference",
                        *p.end_to_end_error);
  else if (!p.note.empty())
    line += "; " + p.note;
  else if (plan.whole_model_record || plan.remembered_generation)
    line += fmt::format("; verified within it when the {} was measured",
                        plan.whole_model_record ? "whole-model plan" : "remembered plan");
  return line + "\n";
}

}  // namespace

std::string ExplainPlan(fusion_space::FusionSpace& space, const CompiledPlan& plan,
                        bool per_group) {
  std::string out;
  out += fmt::format("plan        {} kernels for {} nodes, {}\n", plan.plan.groups.size(),
                     space.graph().nodes.size(), plan.partition);
  out += fmt::format("time        predicted {:.3f} ms{}\n", plan.predicted_seconds * 1e3,
                     plan.measured_seconds
                         ? fmt::format(", measured {:.3f} ms", *plan.measured_seconds * 1e3)
                         : std::string());
  out += fmt::format("traffic     {} at kernel boundaries, {} unfused (saves {:.0f}%)\n",
                     Mib(plan.bytes), Mib(plan.unfused_bytes),
                     plan.unfused_bytes > 0 ? 100 * (1 - plan.bytes / plan.unfused_bytes) : 0.0);
  out += fmt::format("memory      peak live intermediates {}\n",
                     Mib(static_cast<double>(plan.peak_bytes)));
  out += fmt::format("layouts     {}\n", LayoutsLine(space, plan));
  std::string sources;
  for (PlanSource s : {PlanSource::kWholeModel, PlanSource::kExact, PlanSource::kShapeBucket,
                       PlanSource::kCostModel, PlanSource::kDefault}) {
    auto it = plan.count.find(s);
    if (it != plan.count.end())
      sources += fmt::format("{}{} {}", sources.empty() ? "" : ", ", it->second, PlanSourceName(s));
  }
  out += fmt::format("sources     {} (cost model: {}; measured/analytical scale {:.2f})\n", sources,
                     plan.model, plan.scale);
  out += PrecisionLine(plan);
  if (!per_group) return out;
  out += fmt::format("\n{:>4}  {:<12}  {:<30}  {:>6}  {:>22}  {}\n", "#", "source", "time", "loss",
                     "traffic (saved)", "kernel");
  // Candidate index by node set, for the costs of larger groups.
  std::map<std::vector<int32_t>, int32_t> candidate_of;
  const auto analytical = cost_model::MakeAnalyticalModel();
  if (!plan.candidates.empty())
    for (size_t i = 0; i < space.candidates().groups.size(); ++i)
      candidate_of[space.candidates().groups[i].nodes] = static_cast<int32_t>(i);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const GroupDecision& d = plan.groups[i];
    out += fmt::format("{:>4}  {:<12}  {}  {}  {:>10} ({:>9})  {} [{}]\n", i,
                       PlanSourceName(d.choice.source), Time(d.choice), Loss(d.choice),
                       Mib(d.bytes), Mib(d.unfused_bytes - d.bytes), d.kernel, NodeList(d.nodes));
    out += fmt::format("{:>6}tiling {}; {}{}\n", "", fusion_space::TilingToString(d.choice.tiling),
                       d.choice.detail,
                       d.choice.measured_error
                           ? fmt::format("; bf16 error {:.2g} measured on the group alone",
                                         *d.choice.measured_error)
                           : std::string());
    if (const std::string parts = Parts(space, plan, d, *analytical); !parts.empty())
      out += fmt::format("{:>6}analytical {}\n", "", parts);
    for (const std::string& line : BoundaryReasons(space, plan, d, candidate_of))
      out += fmt::format("{:>6}{}\n", "", line);
  }
  return out;
}

nlohmann::json CompiledSummaryJson(const CompiledPlan& plan) {
  nlohmann::json sources = nlohmann::json::object();
  for (const auto& [s, n] : plan.count) sources[PlanSourceName(s)] = n;
  nlohmann::json j{{"graph_key", plan.graph_key},
                   {"kernels", plan.plan.groups.size()},
                   {"partition", plan.partition},
                   {"sources", sources},
                   {"cost_model", plan.model},
                   {"predicted_ms", plan.predicted_seconds * 1e3},
                   {"bytes", plan.bytes},
                   {"unfused_bytes", plan.unfused_bytes},
                   {"peak_intermediate_bytes", plan.peak_bytes},
                   {"analytical_scale", plan.scale},
                   {"lookup_ms", plan.lookup_seconds * 1e3}};
  if (plan.measured_seconds) j["measured_ms"] = *plan.measured_seconds * 1e3;
  if (plan.whole_model_record) j["whole_model_record"] = *plan.whole_model_record;
  j["bf16_kernels"] = fusion_space::CountBf16Groups(plan.plan);
  if (plan.precision) {
    const PrecisionReport& p = *plan.precision;
    j["precision"] = {{"error_budget", p.error_budget}, {"demoted", p.demoted}};
    if (p.end_to_end_error) j["precision"]["end_to_end_error"] = *p.end_to_end_error;
    if (!p.note.empty()) j["precision"]["note"] = p.note;
  }
  return j;
}

nlohmann::json CompiledPlanFile(fusion_space::FusionSpace& space, const CompiledPlan& plan,
                                const std::string& target) {
  nlohmann::json j = fusion_space::PlanToJson(space, plan.plan);
  for (size_t i = 0; i < plan.groups.size() && i < j["groups"].size(); ++i) {
    const GroupDecision& d = plan.groups[i];
    nlohmann::json& g = j["groups"][i];
    g["source"] = PlanSourceName(d.choice.source);
    g["workload_key"] = d.workload_key;
    if (d.choice.measured_seconds)
      g["measured_ms"] = *d.choice.measured_seconds * 1e3;
    else
      g["predicted_ms"] = d.choice.predicted_seconds * 1e3;
    g["predicted_loss"] = d.choice.predicted_loss ? nlohmann::json(*d.choice.predicted_loss)
                                                  : nlohmann::json(nullptr);
    if (d.choice.record_id) g["record"] = d.choice.record_id;
    g["why"] = d.choice.detail;
  }
  j["compiled"] = CompiledSummaryJson(plan);
  j["compiled"]["target"] = target;
  return j;
}

}  // namespace fusetune::compiler
