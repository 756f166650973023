// The fusion space of one graph: candidate groups, matching with a cache,
// tiling spaces, and plans (a partition of the nodes into groups, a tiling
// per group, and a kernel order), with the plans every search starts from:
// unfused, greedy maximal fusion, random legal plans, and mutations of a plan.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/rng.h"
#include "fusion_space/candidates.h"
#include "fusion_space/match.h"
#include "fusion_space/match_memo.h"
#include "fusion_space/tiling_space.h"

namespace fusetune::fusion_space {

struct PlanGroup {
  std::vector<int32_t> nodes;  // graph node indices, ascending
  Tiling tiling;
};

// Groups in kernel order.
struct Plan {
  std::vector<PlanGroup> groups;
  bool operator==(const Plan& other) const;
};

// The plan's groups whose tiling computes in bf16.
int CountBf16Groups(const Plan& plan);

enum class MutationKind { kMerge, kSplit, kMoveNode, kRetile };
const char* MutationKindName(MutationKind kind);

class FusionSpace {
 public:
  FusionSpace(const graph::Graph& graph, kernels::KernelConfig config,
              CandidateOptions options = {});
  FusionSpace(const FusionSpace&) = delete;
  FusionSpace& operator=(const FusionSpace&) = delete;

  const graph::Graph& graph() const { return graph_; }
  const Dataflow& flow() const { return flow_; }
  // Enumerated on first use: a plan loaded from a file or a database needs
  // only its own groups matched.
  const CandidateSet& candidates() const;
  const kernels::KernelConfig& config() const { return config_; }

  // The canonical form of the whole graph (workload key, canonical node
  // order for plan files), computed once.
  const graph::CanonicalSubgraph& canonical() const;
  // The workload key of a node set, in time proportional to the set.
  graph::WorkloadKey Key(const std::vector<int32_t>& nodes) const;

  // Match of a node set (cached, and translated from a group of the same
  // structure when there is one; `nodes` ascending).
  const GroupMatch& Match(const std::vector<int32_t>& nodes);
  // Tiling space of a legal group (cached).
  const TilingSpace& Tilings(const std::vector<int32_t>& nodes);
  // The candidate group of exactly these nodes when candidates were
  // enumerated already and hold it, else nullptr (nothing is enumerated).
  const CandidateGroup* EnumeratedCandidate(const std::vector<int32_t>& nodes) const;

  Plan Unfused();
  // Largest legal groups first, as a rule-based compiler fuses; default tilings.
  Plan Greedy();
  // Candidate groups taken in random order with a random acceptance rate,
  // random tilings: a legal plan drawn from `rng`.
  Plan Random(Rng& rng);
  // One mutation of the given kind (or of a random kind when none is given):
  // nullopt when the drawn mutation yields no legal plan.
  std::optional<Plan> Mutate(const Plan& plan, Rng& rng, std::optional<MutationKind> kind = {});

  // Allow() when every node is in exactly one legal group, every tiling is
  // legal for its group, and the kernel order respects the dataflow.
  FusionDecision Validate(const Plan& plan);
  // Puts groups in a dataflow order (stable by first node); false when the
  // groups depend on each other in a cycle.
  bool Order(Plan* plan) const;

  // Bytes moved to and from global memory at kernel boundaries (each group
  // reads its inputs and writes its outputs once): the analytical traffic.
  double Traffic(const Plan& plan);
  // The same for one group (its node set).
  double GroupTraffic(const std::vector<int32_t>& nodes);
  // Peak bytes of intermediate values live at once when run in kernel order.
  int64_t PeakIntermediateBytes(const Plan& plan);
  // A lower bound on every plan's PeakIntermediateBytes: every plan writes
  // each graph output a node produces and keeps it to the end, so at the last
  // step all of them are live. A memory limit under their sum is known
  // infeasible without searching partitions.
  int64_t MinimumPeakIntermediateBytes() const;

 private:
  PlanGroup WithDefaultTiling(std::vector<int32_t> nodes);
  // CheckTiling, remembered per structure for the tilings it allows (the
  // layers of a stored plan mostly repeat one tiling per structure).
  FusionDecision CheckGroupTiling(const GroupMatch& match, const Tiling& tiling);
  Plan FromGroups(std::vector<std::vector<int32_t>> groups, Rng* rng);

  const graph::Graph& graph_;
  kernels::KernelConfig config_;
  Dataflow flow_;
  MatchMemo memo_;  // matches reused across repeated layers
  CandidateOptions candidate_options_;
  mutable std::optional<CandidateSet> candidates_;
  mutable std::optional<graph::CanonicalSubgraph> canonical_;
  // Hashed: a compile asks for each group's match several times (issue 9's
  // 1 ms budget), and ordered lookups compared whole node lists.
  struct NodesHash {
    size_t operator()(const std::vector<int32_t>& nodes) const;
  };
  std::unordered_map<std::vector<int32_t>, std::unique_ptr<GroupMatch>, NodesHash> matches_;
  std::unordered_map<std::vector<int32_t>, std::unique_ptr<TilingSpace>, NodesHash> tilings_;
  std::optional<Plan> last_valid_plan_;
  std::vector<std::vector<Tiling>> valid_tilings_;  // by GroupMatch::structure
};

}  // namespace fusetune::fusion_space
