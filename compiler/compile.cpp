#include "compiler/compile.h"

#include "compiler/precision_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string_view>
#include <tuple>

#include "compiler/algorithm_choice.h"
#include "compiler/choices.h"
#include "compiler/plan_layouts.h"
#include "compiler/remembered.h"
#include "fusion_space/partition.h"
#include "fusion_space/plan_json.h"
#include "graph/workload_key.h"

namespace fusetune::compiler {

const char* PlanSourceName(PlanSource source) {
  switch (source) {
    case PlanSource::kWholeModel:
      return "whole-model";
    case PlanSource::kExact:
      return "exact";
    case PlanSource::kShapeBucket:
      return "shape-bucket";
    case PlanSource::kCostModel:
      return "cost-model";
    case PlanSource::kDefault:
      return "default";
  }
  return "?";
}

namespace {

std::string Bytes(double n) {
  return n >= 1 << 20 ? fmt::format("{:.1f} MiB", n / (1 << 20))
                      : fmt::format("{:.0f} KiB", n / 1024);
}

// What the node reads and writes as a kernel of its own (distinct values).
double NodeBoundaryBytes(const graph::Graph& graph, int32_t node) {
  const graph::Node& n = graph.nodes[node];
  double bytes = 0;
  // Each distinct value once (x * x reads x once); nodes have a few operands.
  auto add = [&](const std::vector<graph::ValueId>& values, size_t i) {
    const graph::ValueId v = values[i];
    if (v == graph::kNoValue ||
        std::find(values.begin(), values.begin() + i, v) != values.begin() + i)
      return;
    if (&values == &n.outputs && std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end())
      return;
    bytes += static_cast<double>(graph.type(v).nbytes());
  };
  for (size_t i = 0; i < n.inputs.size(); ++i) add(n.inputs, i);
  for (size_t i = 0; i < n.outputs.size(); ++i) add(n.outputs, i);
  return bytes;
}

// A group's boundary bytes, fused and unfused, remembered per match
// structure: the layers of a model repeat them.
class TrafficMemo {
 public:
  std::pair<double, double> Of(fusion_space::FusionSpace& space, const std::vector<int32_t>& nodes,
                               int32_t structure) {
    if (structure >= 0 && static_cast<size_t>(structure) < known_.size() &&
        known_[structure].first >= 0)
      return known_[structure];
    std::pair<double, double> bytes{space.GroupTraffic(nodes), 0};
    for (int32_t n : nodes) bytes.second += NodeBoundaryBytes(space.graph(), n);
    if (structure >= 0) {
      if (known_.size() <= static_cast<size_t>(structure)) known_.resize(structure + 1, {-1, -1});
      known_[structure] = bytes;
    }
    return bytes;
  }

 private:
  std::vector<std::pair<double, double>> known_;  // -1: not yet
};

GroupDecision Decide(fusion_space::FusionSpace& space, TrafficMemo& traffic,
                     const fusion_space::PlanGroup& group, int32_t candidate, GroupChoice choice,
                     const std::string& known_key = "") {
  GroupDecision d;
  d.candidate = candidate;
  d.nodes = group.nodes;
  const fusion_space::GroupMatch& match = space.Match(group.nodes);
  d.kind = match.instance.kind;
  d.kernel = match.instance.summary;
  d.workload_key = candidate >= 0      ? space.candidates().groups[candidate].key.ToString()
                   : known_key.empty() ? space.Key(group.nodes).ToString()
                                       : known_key;
  d.choice = std::move(choice);
  std::tie(d.bytes, d.unfused_bytes) = traffic.Of(space, group.nodes, match.structure);
  return d;
}

// `peak` when the caller already computed the plan's peak intermediate bytes.
void Summarise(fusion_space::FusionSpace& space, CompiledPlan* out, std::optional<int64_t> peak) {
  out->peak_bytes = peak ? *peak : space.PeakIntermediateBytes(out->plan);
  for (const GroupDecision& d : out->groups) {
    ++out->count[d.choice.source];
    out->bytes += d.bytes;
    out->unfused_bytes += d.unfused_bytes;
  }
}

// The plan's peak intermediate bytes when within the memory limit; else
// nullopt, with out->partition saying why `what` was not taken.
std::optional<int64_t> PeakWithinLimit(fusion_space::FusionSpace& space,
                                       const fusion_space::Plan& plan, const std::string& what,
                                       const CompileOptions& options, CompiledPlan* out) {
  const int64_t peak = space.PeakIntermediateBytes(plan);
  if (options.max_memory_bytes && peak > *options.max_memory_bytes) {
    out->partition += fmt::format("{} peaks at {} of intermediates, over the limit; ", what,
                                  Bytes(static_cast<double>(peak)));
    return std::nullopt;
  }
  return peak;
}

// A stored plan of this graph (`what`: a whole-model record, a remembered
// compile) read in place into out->plan, with each group's stored workload
// key; false, with out->partition saying why, when it does not fit this
// build or exceeds the memory limit.
bool ReadStoredPlan(fusion_space::FusionSpace& space, std::string_view text,
                    const std::string& what, const CompileOptions& options, CompiledPlan* out,
                    std::vector<std::string>* stored_keys) {
  // The plan names each group's workload key: the graph key matched, so
  // they are this graph's (computing them again costs as much as the lookup).
  auto plan = fusion_space::PlanFromJsonText(space, text, stored_keys);
  if (!plan.ok()) {
    out->partition +=
        fmt::format("{} does not fit this build ({}); ", what, plan.error().message());
    return false;
  }
  const std::optional<int64_t> peak = PeakWithinLimit(space, *plan, what, options, out);
  if (!peak) return false;
  out->plan = std::move(*plan);
  out->peak_bytes = *peak;
  out->groups.reserve(out->plan.groups.size());
  return true;
}

// The measured best plan of this exact graph, when the database has one
// that is valid here and fits the memory limit.
Result<bool> UseWholeModelPlan(fusion_space::FusionSpace& space, TuningIndex& index,
                               const CompileOptions& options, CompiledPlan* out) {
  FT_ASSIGN_OR_RETURN(const db::BestPlan* best, index.Exact(out->graph_key));
  if (best == nullptr) return false;
  // After a kernel change the best fresh whole-model record is often a
  // baseline (the unfused plan) while the tuned plan went stale: its groups,
  // looked up one by one, do better than that record.
  FT_ASSIGN_OR_RETURN(const std::optional<double> stale, index.FasterStale(out->graph_key));
  if (stale) {
    out->partition = fmt::format(
        "whole-model record {} ({:.3f} ms) skipped: a plan measured with older kernels took "
        "{:.3f} ms, so it is not the tuned plan; ",
        best->record_id, best->seconds * 1e3, *stale * 1e3);
    return false;
  }
  const std::string what = fmt::format("whole-model record {}", best->record_id);
  std::vector<std::string> stored_keys;
  if (!ReadStoredPlan(space, best->plan, what, options, out, &stored_keys)) return false;
  out->whole_model_record = best->record_id;
  out->measured_seconds = out->predicted_seconds = best->seconds;
  out->partition = fmt::format("the measured best plan of this model (record {}, {:.3f} ms)",
                               best->record_id, best->seconds * 1e3);
  TrafficMemo traffic;
  for (size_t i = 0; i < out->plan.groups.size(); ++i) {
    const fusion_space::PlanGroup& g = out->plan.groups[i];
    GroupChoice c;
    c.tiling = g.tiling;
    c.source = PlanSource::kWholeModel;
    c.predicted_loss = 0;
    c.record_id = best->record_id;
    c.detail = what;
    GroupDecision d = Decide(space, traffic, g, -1, std::move(c), stored_keys[i]);
    FT_ASSIGN_OR_RETURN(const db::BestPlan* own, index.Exact(d.workload_key));
    if (own != nullptr && index.BestTiling(d.workload_key) == g.tiling)
      d.choice.measured_seconds = d.choice.cost = own->seconds;
    out->groups.push_back(std::move(d));
  }
  return true;
}

// The plan an earlier compile chose for this graph from the same database
// state (remembered.h), with its groups' provenance as it was then.
Result<bool> UseRememberedPlan(fusion_space::FusionSpace& space, TuningIndex& index,
                               const std::string& context, const CompileOptions& options,
                               CompiledPlan* out) {
  FT_ASSIGN_OR_RETURN(auto entry, index.Remembered(out->graph_key, context));
  if (!entry) return false;
  const std::string what =
      fmt::format("the compile remembered at generation {}", entry->generation);
  auto decisions = DecisionsFromText(entry->decisions);
  if (!decisions.ok()) {
    out->partition += fmt::format("{} does not read ({}); ", what, decisions.error().message());
    return false;
  }
  std::vector<std::string> stored_keys;
  const std::string before = out->partition;
  if (!ReadStoredPlan(space, entry->plan, what, options, out, &stored_keys)) return false;
  if (decisions->choices.size() != out->plan.groups.size()) {
    out->plan = {};
    out->groups.clear();
    out->partition = before + what + " has a decision per group missing; ";
    return false;
  }
  out->remembered_generation = entry->generation;
  out->predicted_seconds = decisions->predicted_seconds;
  out->scale = decisions->scale;
  out->model = decisions->model;
  out->partition = fmt::format("{}: {}", what, decisions->partition);
  TrafficMemo traffic;
  for (size_t i = 0; i < out->plan.groups.size(); ++i) {
    const fusion_space::PlanGroup& g = out->plan.groups[i];
    GroupChoice& c = decisions->choices[i];
    c.tiling = g.tiling;
    out->groups.push_back(Decide(space, traffic, g, -1, std::move(c), stored_keys[i]));
  }
  return true;
}

bool AnyExact(const CandidateChoices& chosen) {
  return std::any_of(chosen.choices.begin(), chosen.choices.end(),
                     [](const GroupChoice& c) { return c.source == PlanSource::kExact; });
}

// Sizes never tuned, of a model tuned at others (shape buckets): the measured
// best plan of the nearest tuned size, its partition kept, each group's tiling
// as `chosen` has it (its nearest tuned shape's), else the plan's own moved
// here. The partition was measured there; re-deciding it from costs
// predicted here would rest on the analytical model alone (no group of this
// size has a measured time to scale it by).
Result<bool> UseNeighbourPlan(fusion_space::FusionSpace& space, TuningIndex& index,
                              const CompileOptions& options, const CandidateChoices& chosen,
                              CompiledPlan* out) {
  const graph::CanonicalSubgraph structure =
      graph::CanonicalizeGraph(space.graph(), graph::KeyScope::kStructure);
  FT_ASSIGN_OR_RETURN(auto match,
                      index.NearestModel(structure.key.ToString(),
                                         graph::ShapeSignature(space.graph(), structure.node_order),
                                         out->graph_key));
  if (!match || match->best == nullptr) return false;
  const std::string what = fmt::format(
      "the measured best plan of the nearest tuned size (record {})", match->best->record_id);
  auto moved =
      fusion_space::MovedPlanFromJsonText(space, match->best->plan, match->structure_positions);
  if (!moved.ok()) {
    out->partition += fmt::format("{} does not fit here ({}); ", what, moved.error().message());
    return false;
  }
  const std::optional<int64_t> peak = PeakWithinLimit(space, *moved, what, options, out);
  if (!peak) return false;
  const auto& groups = space.candidates().groups;
  std::map<std::vector<int32_t>, int32_t> candidate_of;
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i].instance) candidate_of.emplace(groups[i].nodes, static_cast<int32_t>(i));
  std::map<std::vector<int32_t>, GroupChoice> choice_of;
  for (fusion_space::PlanGroup& g : moved->groups) {
    auto it = candidate_of.find(g.nodes);
    if (it == candidate_of.end()) return false;  // not enumerated here: choose by groups
    GroupChoice c = chosen.choices[it->second];
    if (c.source == PlanSource::kShapeBucket) {
      g.tiling = c.tiling;
    } else {
      c.tiling = g.tiling;
      c.source = PlanSource::kShapeBucket;
      c.record_id = match->best->record_id;
      c.predicted_loss.reset();
      c.detail = fmt::format("record {}'s tiling (the nearest tuned size's plan), moved here",
                             match->best->record_id);
    }
    choice_of[g.nodes] = c;
  }
  out->plan = std::move(*moved);
  space.Order(&out->plan);
  FT_RETURN_IF_ERROR(ChooseRecordedLayouts(space, index, &out->plan, &choice_of));
  TrafficMemo traffic;
  for (const fusion_space::PlanGroup& g : out->plan.groups) {
    out->groups.push_back(
        Decide(space, traffic, g, candidate_of.at(g.nodes), choice_of.at(g.nodes)));
    out->predicted_seconds += out->groups.back().choice.cost;
  }
  if (auto valid = space.Validate(out->plan); !valid)
    return Error(ErrorCode::kInternal, "the moved plan is not valid: " + valid.reason());
  out->peak_bytes = *peak;
  out->partition +=
      fmt::format("{}, {:.3f} ms there, moved to this size", what, match->best->seconds * 1e3);
  return true;
}

Result<CompiledPlan> CompileFromIndex(fusion_space::FusionSpace& space, TuningIndex& index,
                                      const CompileOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CompiledPlan out;
  out.graph_key = space.canonical().key.ToString();
  if (options.target_features) out.target = index.features();
  auto finish = [&](std::optional<int64_t> peak = std::nullopt) {
    // "not consulted" when every group was tuned; a remembered plan's is the
    // label of its compile.
    if (out.model.empty()) out.model = index.model_label();
    Summarise(space, &out, peak);
    out.lookup_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::move(out);  // called once, on the way out
  };
  if (options.whole_model_plans) {
    FT_ASSIGN_OR_RETURN(const bool whole_model, UseWholeModelPlan(space, index, options, &out));
    if (whole_model) return finish(out.peak_bytes);
  }
  const std::string context = options.remembered_plans ? RememberContext(options) : "";
  if (options.remembered_plans) {
    FT_ASSIGN_OR_RETURN(const bool remembered,
                        UseRememberedPlan(space, index, context, options, &out));
    if (remembered) return finish(out.peak_bytes);
    if (index.generation()) out.remember = RememberKey{context, *index.generation()};
  }

  FT_ASSIGN_OR_RETURN(CandidateChoices chosen, ChooseCandidates(space, index, options));
  out.target = index.features();
  out.scale = chosen.scale;
  out.candidates = chosen.choices;
  if (options.whole_model_plans && !AnyExact(chosen)) {
    FT_ASSIGN_OR_RETURN(const bool moved, UseNeighbourPlan(space, index, options, chosen, &out));
    if (moved) return finish(out.peak_bytes);
  }
  const auto& groups = space.candidates().groups;
  TrafficMemo traffic;
  if (!chosen.any_known) {
    const fusion_space::Plan greedy = space.Greedy();
    if (!options.max_memory_bytes ||
        space.PeakIntermediateBytes(greedy) <= *options.max_memory_bytes) {
      out.plan = greedy;
      out.partition += "the greedy plan: nothing tuned for this target and no trained cost model";
      std::map<std::vector<int32_t>, int32_t> index_of;
      for (size_t i = 0; i < groups.size(); ++i)
        index_of[groups[i].nodes] = static_cast<int32_t>(i);
      for (const fusion_space::PlanGroup& g : out.plan.groups) {
        const int32_t c = index_of.at(g.nodes);
        out.groups.push_back(Decide(space, traffic, g, c, chosen.choices[c]));
        out.predicted_seconds += chosen.choices[c].cost;
      }
      return finish();
    }
  }
  fusion_space::PartitionObjective objective;
  objective.peak_memory_limit = options.max_memory_bytes;
  objective.group_cost.resize(groups.size());
  for (size_t i = 0; i < groups.size(); ++i)
    objective.group_cost[i] = groups[i].instance ? chosen.choices[i].cost : 1e30;
  const fusion_space::PartitionChoice partition =
      fusion_space::SelectMinCostPartition(space, objective);
  if (!partition.found)
    return Error(
        ErrorCode::kInvalidArgument,
        fmt::format("no plan keeps the live intermediates within --max-memory {} "
                    "(unfused peak {}, greedy peak {}, no plan under {}: the graph's outputs)",
                    Bytes(static_cast<double>(*options.max_memory_bytes)),
                    Bytes(static_cast<double>(space.PeakIntermediateBytes(space.Unfused()))),
                    Bytes(static_cast<double>(space.PeakIntermediateBytes(space.Greedy()))),
                    Bytes(static_cast<double>(space.MinimumPeakIntermediateBytes()))));
  std::map<std::vector<int32_t>, int32_t> candidate_of;
  std::map<std::vector<int32_t>, GroupChoice> choice_of;
  for (int32_t c : partition.groups) {
    candidate_of[groups[c].nodes] = c;
    choice_of[groups[c].nodes] = chosen.choices[c];
    out.plan.groups.push_back({groups[c].nodes, chosen.choices[c].tiling});
  }
  space.Order(&out.plan);
  FT_RETURN_IF_ERROR(ChooseRecordedLayouts(space, index, &out.plan, &choice_of));
  for (const fusion_space::PlanGroup& g : out.plan.groups)
    out.groups.push_back(
        Decide(space, traffic, g, candidate_of.at(g.nodes), choice_of.at(g.nodes)));
  out.predicted_seconds = partition.cost;
  out.partition += fmt::format(
      "minimum-cost partition over {} candidate groups ({}{})", groups.size(),
      partition.proven_optimal ? "proven optimal" : "search budget reached",
      options.max_memory_bytes
          ? ", intermediates within " + Bytes(static_cast<double>(*options.max_memory_bytes))
          : "");
  if (auto valid = space.Validate(out.plan); !valid)
    return Error(ErrorCode::kInternal, "the compiled plan is not valid: " + valid.reason());
  return finish();
}

}  // namespace

Result<CompiledPlan> CompileGraph(fusion_space::FusionSpace& space, TuningIndex& index,
                                  const CompileOptions& options) {
  auto plan = CompileFromIndex(space, index, options);
  // A read the index could not return as a value (the target's calibration)
  // fails the compile too: a damaged database is not compiled on defaults.
  FT_RETURN_IF_ERROR(index.read_status());
  if (plan.ok() && options.explain_alternatives) {
    FT_RETURN_IF_ERROR(ExplainAlgorithmChoices(space, index, &*plan));
    FT_RETURN_IF_ERROR(ReadGroupErrors(index, &*plan));
  }
  return plan;
}

}  // namespace fusetune::compiler
