// Node-level dataflow of a graph (which nodes feed which), and the convexity
// test every fusion group must pass: no path may leave the group and come
// back into it, or the group could not run as one kernel without waiting on
// a kernel that itself waits on the group.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fusion_space/decision.h"
#include "graph/graph.h"

namespace fusetune::fusion_space {

class Dataflow {
 public:
  // `graph` must be topologically sorted (as import and passes leave it).
  explicit Dataflow(const graph::Graph& graph);
  int32_t num_nodes() const { return static_cast<int32_t>(consumers_.size()); }
  // Distinct nodes that read an output of `node` / produce an input of `node`, ascending.
  std::span<const int32_t> consumers(int32_t node) const { return consumers_[node]; }
  std::span<const int32_t> producers(int32_t node) const { return producers_[node]; }
  // (node, input slot) pairs reading value v, and whether v is a graph output.
  std::span<const graph::ValueUses::Use> uses(graph::ValueId v) const { return uses_[v]; }
  const graph::ValueUses& all_uses() const { return uses_; }
  bool is_graph_output(graph::ValueId v) const { return is_output_[v] != 0; }
  // Read outside the node set marked in `inside`, or a graph output.
  bool LeavesGroup(graph::ValueId v, std::span<const char> inside) const;
  const graph::Graph& graph() const { return graph_; }

  // Allow() when `group` (node indices, any order) is convex; otherwise the
  // reason names a node outside the group on a path that leaves and re-enters it.
  FusionDecision CheckConvex(std::span<const int32_t> group) const;

  // What FindReentry reuses between calls (nothing to allocate per call).
  struct WalkScratch {
    std::vector<uint32_t> seen;  // visited in the current walk when equal to epoch
    // (resized, and reset on wrap-around, by FindReentry)
    uint32_t epoch = 0;
    std::vector<int32_t> stack;
  };
  struct Reentry {
    int32_t outside, node;  // the path's last node outside, the group node it enters
  };
  // CheckConvex's walk for `group`, whose nodes `inside` marks: a path that
  // leaves and re-enters it, or nullopt when the group is convex.
  std::optional<Reentry> FindReentry(std::span<const int32_t> group, std::span<const char> inside,
                                     WalkScratch* scratch) const;

 private:
  // Lists of nodes by node, in one array each (no allocation per node).
  class NodeLists {
   public:
    std::span<const int32_t> operator[](int32_t node) const {
      return {items_.data() + begin_[node], items_.data() + begin_[node + 1]};
    }
    size_t size() const { return begin_.empty() ? 0 : begin_.size() - 1; }
    std::vector<int32_t> begin_, items_;
  };
  const graph::Graph& graph_;
  NodeLists consumers_, producers_;
  graph::ValueUses uses_;
  std::vector<char> is_output_;
};

}  // namespace fusetune::fusion_space
