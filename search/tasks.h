// search/: the tuner (issue 8). This file: a model's tuning tasks, its
// candidate groups that a kernel template implements, deduplicated by
// workload key, with the number of times each occurs.
//
// Map of the module: search/README.md (what it offers, one line per file).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "fusion_space/space.h"
#include "measure/measurer.h"

namespace fusetune::search {

struct Task {
  graph::WorkloadKey key;
  std::vector<int32_t> nodes;  // the first occurrence's nodes
  int64_t occurrences = 0;     // candidate groups with this key
  fusion_space::KernelTemplate kind = fusion_space::KernelTemplate::kReference;
  std::string summary;
  // The group as a graph of its own, its space, and its tilings.
  std::shared_ptr<const graph::Graph> graph;
  std::shared_ptr<fusion_space::FusionSpace> space;
  // Every node of `graph` (the whole group), and the group's kernel instance.
  std::vector<int32_t> group_nodes() const;
  const fusion_space::KernelInstance& instance() const;
  const fusion_space::TilingSpace& tilings() const;
  // The workload entry the database stores for it (the group graph as text).
  db::WorkloadEntry Workload() const;
};

// Tasks of every candidate group that a kernel template implements, in the
// order of their first node. With `include_reference`, single nodes that
// only the reference kernels run are tasks too (one tiling each): the tuner
// measures them once, so that the partition compares measured costs.
std::vector<Task> ExtractTasks(const graph::Graph& graph, fusion_space::FusionSpace& space,
                               bool include_reference = false);

// The workload key a whole graph's plans are stored under.
std::string GraphWorkloadKey(const graph::Graph& graph);
// The whole graph's workload row: its key, and a description naming the
// model file, its node count, and (as a group workload's) its structure key
// and shape signature, by which a compile at sizes never tuned finds the
// plan of the nearest tuned size (compiler/tuning_index.h, NearestModels),
// with each plan position's place in the structure order (plans number
// nodes in an order that can differ from size to size).
db::WorkloadEntry GraphWorkload(const graph::Graph& graph, const std::string& model);

// A measurement's status as a record's: the same four values (db/ declares
// its own so that it needs nothing from measure/).
db::RecordStatus RecordStatusOf(measure::MeasureStatus status);

// The record of one measured candidate of `workload_key` whose plan uses
// `templates`; `search`, when given, is stored with its metrics (what the
// tuner predicted, which plan kind).
db::Record MakeRecord(const std::string& workload_key, const measure::Candidate& candidate,
                      const measure::MeasureResult& result, const std::string& target,
                      int64_t job_id, const std::vector<fusion_space::KernelTemplate>& templates,
                      std::optional<measure::SearchNote> search = std::nullopt);
// The same for a candidate of `task`.
db::Record MakeRecord(const Task& task, const measure::Candidate& candidate,
                      const measure::MeasureResult& result, const std::string& target,
                      int64_t job_id, std::optional<measure::SearchNote> search = std::nullopt);

// Measures a candidate: the worker process, or a stand-in in tests.
using MeasureFn = std::function<measure::MeasureResult(const measure::Candidate&)>;

// One trial of a task's tiling: the measurement, and the record to commit
// (none when the tiling could not even be made into a candidate, which the
// result then explains).
struct Trial {
  measure::MeasureResult result;
  std::optional<db::Record> record;
};
Trial MeasureTrial(const Task& task, const fusion_space::Tiling& tiling, const MeasureFn& measure,
                   const std::string& target, int64_t job_id, const measure::SearchNote& note);

}  // namespace fusetune::search
