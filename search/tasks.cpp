#include "search/tasks.h"

#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cost_model/dataset.h"
#include "fusion_space/kernel_instance.h"
#include "graph/workload_key.h"

namespace fusetune::search {

std::vector<int32_t> Task::group_nodes() const {
  std::vector<int32_t> all(graph->nodes.size());
  std::iota(all.begin(), all.end(), 0);
  return all;
}

const fusion_space::KernelInstance& Task::instance() const {
  return space->Match(group_nodes()).instance;
}

const fusion_space::TilingSpace& Task::tilings() const { return space->Tilings(group_nodes()); }

db::WorkloadEntry Task::Workload() const {
  return {key.ToString(), db::WorkloadKind::kGroup,
          cost_model::GroupWorkloadDescription(*graph, instance())};
}

std::vector<Task> ExtractTasks(const graph::Graph& graph, fusion_space::FusionSpace& space,
                               bool include_reference) {
  std::vector<Task> tasks;
  std::map<graph::WorkloadKey, size_t> index;
  for (const fusion_space::CandidateGroup& g : space.candidates().groups) {
    if (!g.instance) continue;
    if (g.instance->kind == fusion_space::KernelTemplate::kReference &&
        !(include_reference && g.nodes.size() == 1))
      continue;
    auto [it, added] = index.emplace(g.key, tasks.size());
    if (!added) {
      ++tasks[it->second].occurrences;
      continue;
    }
    Task t;
    t.key = g.key;
    t.nodes = g.nodes;
    t.occurrences = 1;
    t.kind = g.instance->kind;
    t.summary = g.instance->summary;
    t.graph = measure::GroupGraph(graph, g.nodes);
    t.space = std::make_shared<fusion_space::FusionSpace>(*t.graph, space.config());
    tasks.push_back(std::move(t));
  }
  // Keep only tasks whose group graph is still one legal group on its own.
  std::vector<Task> usable;
  for (Task& t : tasks)
    if (t.space->Match(t.group_nodes()).decision.allowed()) usable.push_back(std::move(t));
  return usable;
}

std::string GraphWorkloadKey(const graph::Graph& graph) {
  std::vector<int32_t> all(graph.nodes.size());
  std::iota(all.begin(), all.end(), 0);
  return graph::ComputeWorkloadKey(graph, all).ToString();
}

db::WorkloadEntry GraphWorkload(const graph::Graph& graph, const std::string& model) {
  const graph::CanonicalSubgraph exact = graph::CanonicalizeGraph(graph);
  const graph::CanonicalSubgraph structure =
      graph::CanonicalizeGraph(graph, graph::KeyScope::kStructure);
  const nlohmann::json description{
      {"model", model},
      {"nodes", graph.nodes.size()},
      {"structure", structure.key.ToString()},
      {"signature", graph::ShapeSignature(graph, structure.node_order)},
      // How a compile at another size reads this graph's plans.
      {"structure_positions", graph::StructurePositions(exact, structure)}};
  // exact.key is GraphWorkloadKey(graph), without canonicalizing again.
  return {exact.key.ToString(), db::WorkloadKind::kGraph, description.dump()};
}

db::RecordStatus RecordStatusOf(measure::MeasureStatus status) {
  switch (status) {
    case measure::MeasureStatus::kOk:
      return db::RecordStatus::kOk;
    case measure::MeasureStatus::kFailed:
      return db::RecordStatus::kFailed;
    case measure::MeasureStatus::kTimeout:
      return db::RecordStatus::kTimeout;
    case measure::MeasureStatus::kWrong:
      return db::RecordStatus::kWrong;
  }
  return db::RecordStatus::kFailed;
}

db::Record MakeRecord(const std::string& workload_key, const measure::Candidate& candidate,
                      const measure::MeasureResult& result, const std::string& target,
                      int64_t job_id, const std::vector<fusion_space::KernelTemplate>& templates,
                      std::optional<measure::SearchNote> search) {
  db::Record r;
  r.workload_key = workload_key;
  r.target = target;
  r.plan = candidate.plan.dump();
  r.status = RecordStatusOf(result.status);
  r.seconds = result.ok() ? result.time.median : 0;
  r.metrics = measure::MetricsToText({result, std::move(search)});
  r.error = result.error;
  r.job_id = job_id;
  r.fusetune_version = FUSETUNE_VERSION;
  for (fusion_space::KernelTemplate t : templates)
    r.kernel_versions[fusion_space::KernelTemplateName(t)] = fusion_space::KernelTemplateVersion(t);
  return r;
}

db::Record MakeRecord(const Task& task, const measure::Candidate& candidate,
                      const measure::MeasureResult& result, const std::string& target,
                      int64_t job_id, std::optional<measure::SearchNote> search) {
  return MakeRecord(task.key.ToString(), candidate, result, target, job_id, {task.kind},
                    std::move(search));
}

Trial MeasureTrial(const Task& task, const fusion_space::Tiling& tiling, const MeasureFn& measure,
                   const std::string& target, int64_t job_id, const measure::SearchNote& note) {
  auto candidate = measure::GroupCandidate(task.graph, *task.space, tiling, task.summary);
  if (!candidate.ok())
    return {measure::MeasureResult::Failure(measure::MeasureStatus::kFailed,
                                            candidate.error().message()),
            std::nullopt};
  Trial trial{measure(*candidate), std::nullopt};
  trial.record = MakeRecord(task, *candidate, trial.result, target, job_id, note);
  return trial;
}

}  // namespace fusetune::search
