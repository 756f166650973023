// The parent side of measurement: candidates (a whole plan, or one fused
// group with a tiling measured on its own) sent in batches to a worker
// process (worker.h). A crash, a hang past the timeout, or an exception in
// the worker gives that candidate a failed result with the reason; the
// worker is restarted for the next one. Workers are reused otherwise, and
// keep each graph's compiled space and reference outputs between candidates.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fusion_space/space.h"
#include "measure/measurement.h"

namespace fusetune::measure {

struct Candidate {
  std::shared_ptr<const graph::Graph> graph;  // candidates of one graph share the pointer
  nlohmann::json plan;                        // a plan file's JSON for `graph` (plan_json.h)
  std::string label;                          // for progress lines and errors
  // A group graph's one-group plan (GroupCandidate): its edge layout
  // transforms are not timed (MeasureOptions::time_layout_transforms).
  bool group = false;
  // Some group computes in bf16: verified with
  // MeasureOptions::reduced_precision_tolerance.
  bool reduced_precision = false;
  // A run that times the host, not the candidate: the tuner's anchors
  // (search/tuner.h), which make no record.
  bool anchor = false;
};

// A fused group as a graph of its own (graph/subgraph.h), to measure its
// tilings: make it once per group and share it between its candidates.
std::shared_ptr<const graph::Graph> GroupGraph(const graph::Graph& graph,
                                               std::span<const int32_t> nodes);
// The one-group plan of a group graph with `tiling`, or an error when the
// group graph is not one legal group or the tiling does not fit it.
Result<Candidate> GroupCandidate(std::shared_ptr<const graph::Graph> group_graph,
                                 fusion_space::FusionSpace& group_space,
                                 const fusion_space::Tiling& tiling, std::string label = "");
Candidate PlanCandidate(std::shared_ptr<const graph::Graph> graph, fusion_space::FusionSpace& space,
                        const fusion_space::Plan& plan, std::string label = "");

// fusetune-worker next to the running executable, or $FUSETUNE_WORKER.
std::string DefaultWorkerPath();

using ProgressFn = std::function<void(size_t index, const MeasureResult& result)>;

class Measurer {
 public:
  // Checks that the worker executable exists; the process starts with the
  // first candidate.
  static Result<std::unique_ptr<Measurer>> Create(std::string worker_path = DefaultWorkerPath());
  ~Measurer();
  Measurer(const Measurer&) = delete;
  Measurer& operator=(const Measurer&) = delete;

  MeasureResult Measure(const Candidate& candidate, const MeasureOptions& options);
  // In order; `progress` is called after each candidate.
  std::vector<MeasureResult> MeasureBatch(std::span<const Candidate> candidates,
                                          const MeasureOptions& options,
                                          const ProgressFn& progress = {});

  int64_t worker_starts() const { return worker_starts_; }

 private:
  explicit Measurer(std::string worker_path) : worker_path_(std::move(worker_path)) {}
  Status StartWorker();
  // Kills the worker (if running) and returns how it ended.
  std::string StopWorker(bool kill_first);
  Result<uint64_t> SendGraph(const std::shared_ptr<const graph::Graph>& graph);

  std::string worker_path_;
  int pid_ = -1;
  int fd_ = -1;
  int64_t worker_starts_ = 0;
  struct KnownGraph {
    std::weak_ptr<const graph::Graph> graph;
    uint64_t id;
    std::string onnx;  // exported once, resent after a worker restart
    bool in_worker = false;
  };
  std::map<const graph::Graph*, KnownGraph> graphs_;
  std::list<const graph::Graph*> worker_order_;  // loaded into the worker, oldest first
  uint64_t next_graph_id_ = 1;
};

}  // namespace fusetune::measure
