// Node-level dataflow of a graph (which nodes feed which), and the convexity
// test every fusion group must pass: no path may leave the group and come
// back into it, or the group could not run as one kernel without waiting on
// a kernel that itself waits on the group.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fusion_space/decision.h"
#include "graph/graph.h"

namespace fusetune {

class Dataflow {
 public:
  // `graph` must be topologically sorted (as import and passes leave it).
  explicit Dataflow(const Graph& graph);
  int32_t num_nodes() const { return static_cast<int32_t>(consumers_.size()); }
  // Distinct nodes that read an output of `node` / produce an input of `node`, ascending.
  const std::vector<int32_t>& consumers(int32_t node) const { return consumers_[node]; }
  const std::vector<int32_t>& producers(int32_t node) const { return producers_[node]; }

  // Allow() when `group` (node indices, any order) is convex; otherwise the
  // reason names a node outside the group on a path that leaves and re-enters it.
  FusionDecision CheckConvex(std::span<const int32_t> group) const;

 private:
  const Graph& graph_;
  std::vector<std::vector<int32_t>> consumers_, producers_;
};

}  // namespace fusetune
