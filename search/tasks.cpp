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

const KernelInstance& Task::instance() const { return space->Match(group_nodes()).instance; }

const TilingSpace& Task::tilings() const { return space->Tilings(group_nodes()); }

db::WorkloadEntry Task::Workload() const {
  return {key.ToString(), db::WorkloadKind::kGroup,
          cost_model::GroupWorkloadDescription(*graph, instance())};
}

std::vector<Task> ExtractTasks(const Graph& graph, FusionSpace& space, bool include_reference) {
  std::vector<Task> tasks;
  std::map<WorkloadKey, size_t> index;
  for (const CandidateGroup& g : space.candidates().groups) {
    if (!g.instance) continue;
    if (g.instance->kind == KernelTemplate::kReference &&
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
    t.space = std::make_shared<FusionSpace>(*t.graph, space.config());
    tasks.push_back(std::move(t));
  }
  // Keep only tasks whose group graph is still one legal group on its own.
  std::vector<Task> usable;
  for (Task& t : tasks)
    if (t.space->Match(t.group_nodes()).decision.allowed()) usable.push_back(std::move(t));
  return usable;
}

std::string GraphWorkloadKey(const Graph& graph) {
  std::vector<int32_t> all(graph.nodes.size());
  std::iota(all.begin(), all.end(), 0);
  return ComputeWorkloadKey(graph, all).ToString();
}

db::Record MakeRecord(const std::string& workload_key, const measure::Candidate& candidate,
                      const measure::MeasureResult& result, const std::string& target,
                      int64_t job_id, const std::vector<KernelTemplate>& templates,
                      const nlohmann::json& search) {
  db::Record r;
  r.workload_key = workload_key;
  r.target = target;
  r.plan = candidate.plan.dump();
  r.status = measure::StatusName(result.status);
  r.seconds = result.ok() ? result.time.median : 0;
  nlohmann::json metrics = measure::ResultToJson(result);
  if (!search.is_null()) metrics["search"] = search;
  r.metrics = metrics.dump();
  r.error = result.error;
  r.job_id = job_id;
  r.fusetune_version = FUSETUNE_VERSION;
  for (KernelTemplate t : templates)
    r.kernel_versions[KernelTemplateName(t)] = KernelTemplateVersion(t);
  return r;
}

db::Record MakeRecord(const Task& task, const measure::Candidate& candidate,
                      const measure::MeasureResult& result, const std::string& target,
                      int64_t job_id, const nlohmann::json& search) {
  return MakeRecord(task.key.ToString(), candidate, result, target, job_id, {task.kind}, search);
}

}  // namespace fusetune::search
