// fusion_space/: the space the tuner searches (issue 4): which node groups of
// a graph can run as one kernel, and why not when they cannot.
//
// Map of the module: fusion_space/README.md (what it offers, one line per file).
#pragma once

#include <string>
#include <utility>

namespace fusetune::fusion_space {

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

}  // namespace fusetune::fusion_space

// Returns a forbidding decision from the enclosing function.
#define FT_RETURN_IF_DECISION(expr)                                 \
  do {                                                              \
    ::fusetune::fusion_space::FusionDecision ft_decision_ = (expr); \
    if (!ft_decision_) return ft_decision_;                         \
  } while (0)
