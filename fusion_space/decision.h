// fusion_space/: the space the tuner searches (issue 4): which node groups of
// a graph can run as one kernel, and why not when they cannot.
//
// Map of the module:
//   decision.h        FusionDecision: Allow() or Forbid("why"), printable in explanations
//   dataflow.h        node-level producers/consumers and value uses; convexity of a group
//   kernel_instance.h a matched group: template descriptor + operand slots
//   view.h            strided views through Reshape/Transpose (and Slice) chains
//   match.h           MatchGroup: any group to its kernel (or the reference kernel)
//   match_tile.h      row-reduction and elementwise tile programs; data movement
//                     (views, one Concat in pieces) in elementwise groups
//   match_gemm.h      GEMM with epilogue chains (and horizontal), attention
//   candidates.h      every legal group up to a size bound, with workload keys
//   tiling_space.h    Tiling, TilingSpace: constraints, enumeration, sampling, size
//   space.h           FusionSpace and Plan: unfused, greedy, random, mutations, validation
//   partition.h       exact minimum-cost partition (DP + branch and bound), counting
//   plan_json.h       the versioned plan file
#pragma once

#include <string>
#include <utility>

namespace fusetune {

// Legality is a value, not an exception or a bool: a forbidden fusion carries
// the reason, which explanations (`fusetune compile --explain`) print.
class FusionDecision {
 public:
  static FusionDecision Allow() { return FusionDecision(true, ""); }
  static FusionDecision Forbid(std::string reason) {
    return FusionDecision(false, std::move(reason));
  }
  bool allowed() const { return allowed_; }
  explicit operator bool() const { return allowed_; }
  const std::string& reason() const { return reason_; }
  std::string ToString() const { return allowed_ ? "allowed" : "forbidden: " + reason_; }

 private:
  FusionDecision(bool allowed, std::string reason)
      : allowed_(allowed), reason_(std::move(reason)) {}
  bool allowed_;
  std::string reason_;
};

}  // namespace fusetune

// Returns a forbidding decision from the enclosing function.
#define FT_RETURN_IF_DECISION(expr)                   \
  do {                                                \
    ::fusetune::FusionDecision ft_decision_ = (expr); \
    if (!ft_decision_) return ft_decision_;           \
  } while (0)
