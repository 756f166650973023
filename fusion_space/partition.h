// Exact selection of the minimum-cost partition of a graph into candidate
// groups (every node in exactly one group; single nodes are candidates too),
// given a cost per candidate group, a cost per kernel launch, and an
// optional limit on the peak bytes of live intermediate values.
//
// Dynamic programming over (first uncovered node, which of the next 64 nodes
// are covered): exact because candidate groups span fewer than 64 node
// positions (CandidateOptions::max_span). Acyclicity of the kernel order and
// the memory limit are not additive, so a branch and bound search runs on
// top, with the DP value of the remaining nodes as its (exact) lower bound.
// Costs within 1e-9 relative of each other count as equal (a model of
// repeated layers ties everywhere, up to the last bits of its sums).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fusion_space/space.h"

namespace fusetune::fusion_space {

struct PartitionObjective {
  std::vector<double> group_cost;            // per index of space.candidates().groups
  double launch_cost = 0;                    // added per group (kernel launch)
  std::optional<int64_t> peak_memory_limit;  // bytes of live intermediates
  int64_t max_expansions = 2'000'000;        // branch-and-bound budget
};

struct PartitionChoice {
  bool found = false;
  bool proven_optimal = false;  // false when the search budget ran out first
  std::vector<int32_t> groups;  // candidate indices
  double cost = 0;
  int64_t peak_bytes = 0;
  int64_t dp_states = 0;
  int64_t expansions = 0;
};

PartitionChoice SelectMinCostPartition(FusionSpace& space, const PartitionObjective& objective);
// The same by enumerating every partition (tests, graphs of a few dozen nodes).
PartitionChoice BruteForceMinCostPartition(FusionSpace& space, const PartitionObjective& objective);

// The number of ways to cover the nodes exactly with candidate groups. It
// counts partitions whose groups would depend on each other in a cycle too,
// so it bounds the number of legal plans from above.
double CountPartitions(const CandidateSet& candidates);

// A plan from chosen candidate groups, with default tilings, in kernel order.
Plan PlanFromCandidates(FusionSpace& space, const std::vector<int32_t>& groups);

}  // namespace fusetune::fusion_space
