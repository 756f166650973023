// Matching any node group to the kernel that implements it: the entry point
// the rest of fusion_space/ uses. A single node is always legal (a template
// instance when one fits, else the reference kernel); a larger group is legal
// when it is convex and one template implements it.
#pragma once

#include <span>

#include "fusion_space/dataflow.h"
#include "fusion_space/kernel_instance.h"

namespace fusetune::fusion_space {

struct GroupMatch {
  FusionDecision decision = FusionDecision::Forbid("not matched");
  KernelInstance instance;
  // Groups with one id have one structure (MatchMemo): the same instance
  // but for node and value ids, so the same legal tilings and traffic.
  // -1: not known to share its structure.
  int32_t structure = -1;
};

GroupMatch MatchGroup(const graph::Graph& graph, const Dataflow& flow,
                      std::span<const int32_t> group);

// Ops a multi-node group may contain at all (cheap pre-filter for enumeration).
bool IsFusibleOp(const graph::Node& node);

}  // namespace fusetune::fusion_space
