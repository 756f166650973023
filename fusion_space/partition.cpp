#include "fusion_space/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "common/check.h"

namespace fusetune::fusion_space {

namespace {

struct StateKey {
  int32_t u;
  uint64_t mask;  // bit i: node u + i is covered
  bool operator==(const StateKey& o) const { return u == o.u && mask == o.mask; }
};
struct StateHash {
  size_t operator()(const StateKey& k) const {
    return std::hash<uint64_t>()(k.mask * 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(k.u));
  }
};

// Walks exact covers: from a state, the groups that can cover node u next.
class CoverWalker {
 public:
  explicit CoverWalker(const CandidateSet& c) : c_(c), n_(static_cast<int32_t>(c.num_nodes)) {
    bits_.resize(c.groups.size());
    for (size_t i = 0; i < c.groups.size(); ++i) {
      const auto& nodes = c.groups[i].nodes;
      FT_CHECK(nodes.back() - nodes.front() < 64, "candidate group spans 64 nodes or more");
      for (int32_t x : nodes) bits_[i] |= uint64_t{1} << (x - nodes.front());
    }
  }
  int32_t n() const { return n_; }
  bool Fits(StateKey s, int32_t g) const { return (s.mask & bits_[g]) == 0; }
  StateKey Next(StateKey s, int32_t g) const {
    uint64_t mask = s.mask | bits_[g];
    int32_t u = s.u;
    while (u < n_ && (mask & 1)) {
      mask >>= 1;
      ++u;
    }
    return {u, mask};
  }
  const std::vector<int32_t>& Options(StateKey s) const { return c_.by_first_node[s.u]; }

 private:
  const CandidateSet& c_;
  int32_t n_;
  std::vector<uint64_t> bits_;
};

class MinCostDp {
 public:
  MinCostDp(const CoverWalker& w, const PartitionObjective& o) : w_(w), o_(o) {}
  double Best(StateKey s) {
    if (s.u >= w_.n()) return 0;
    auto it = memo_.find(s);
    if (it != memo_.end()) return it->second;
    double best = std::numeric_limits<double>::infinity();
    for (int32_t g : w_.Options(s))
      if (w_.Fits(s, g)) best = std::min(best, Step(g) + Best(w_.Next(s, g)));
    memo_.emplace(s, best);
    return best;
  }
  double Step(int32_t g) const { return o_.group_cost[g] + o_.launch_cost; }
  int64_t states() const { return static_cast<int64_t>(memo_.size()); }

 private:
  const CoverWalker& w_;
  const PartitionObjective& o_;
  std::unordered_map<StateKey, double, StateHash> memo_;
};

// Acyclicity and the memory limit of a complete cover.
bool Acceptable(FusionSpace& space, const PartitionObjective& o, const std::vector<int32_t>& chosen,
                int64_t* peak) {
  Plan plan;
  for (int32_t g : chosen) plan.groups.push_back({space.candidates().groups[g].nodes, {}});
  if (!space.Order(&plan)) return false;
  *peak = space.PeakIntermediateBytes(plan);
  return !o.peak_memory_limit || *peak <= *o.peak_memory_limit;
}

// Relative difference below which two partition costs count as equal.
constexpr double kTieMargin = 1e-9;

class BranchAndBound {
 public:
  BranchAndBound(FusionSpace& space, const CoverWalker& w, MinCostDp& dp,
                 const PartitionObjective& o, PartitionChoice* out)
      : space_(space), w_(w), dp_(dp), o_(o), out_(out) {}

  void Search(StateKey s, double cost) {
    if (budget_out_) return;
    if (++out_->expansions > o_.max_expansions) {
      budget_out_ = true;
      return;
    }
    if (s.u >= w_.n()) {
      int64_t peak = 0;
      if (Acceptable(space_, o_, chosen_, &peak) && (!out_->found || cost < out_->cost)) {
        out_->found = true;
        out_->cost = cost;
        out_->groups = chosen_;
        out_->peak_bytes = peak;
      }
      return;
    }
    std::vector<std::pair<double, int32_t>> options;
    for (int32_t g : w_.Options(s))
      if (w_.Fits(s, g)) options.push_back({dp_.Step(g) + dp_.Best(w_.Next(s, g)), g});
    std::sort(options.begin(), options.end());
    for (auto [bound, g] : options) {
      // Sorted: the rest are no better. The margin: sums of the same costs in
      // another order differ in their last bits, and a model of repeated
      // layers ties everywhere; without it each tie was searched to the end
      // (120 ms of a 12-layer compile).
      if (out_->found && cost + bound >= out_->cost - kTieMargin * std::abs(out_->cost)) break;
      chosen_.push_back(g);
      Search(w_.Next(s, g), cost + dp_.Step(g));
      chosen_.pop_back();
    }
  }
  bool budget_out() const { return budget_out_; }

 private:
  FusionSpace& space_;
  const CoverWalker& w_;
  MinCostDp& dp_;
  const PartitionObjective& o_;
  PartitionChoice* out_;
  std::vector<int32_t> chosen_;
  bool budget_out_ = false;
};

StateKey Start(const CoverWalker&) { return StateKey{0, 0}; }

}  // namespace

PartitionChoice SelectMinCostPartition(FusionSpace& space, const PartitionObjective& o) {
  FT_CHECK(o.group_cost.size() == space.candidates().groups.size(),
           "one cost per candidate group is required");
  CoverWalker walker(space.candidates());
  MinCostDp dp(walker, o);
  PartitionChoice out;
  // Known infeasible: the branch and bound would spend its whole budget
  // (seconds) finding no cover within the limit.
  if (o.peak_memory_limit && *o.peak_memory_limit < space.MinimumPeakIntermediateBytes())
    return out;
  dp.Best(Start(walker));
  BranchAndBound bb(space, walker, dp, o, &out);
  bb.Search(Start(walker), 0);
  out.proven_optimal = out.found && !bb.budget_out();
  out.dp_states = dp.states();
  return out;
}

PartitionChoice BruteForceMinCostPartition(FusionSpace& space, const PartitionObjective& o) {
  CoverWalker walker(space.candidates());
  PartitionChoice out;
  std::vector<int32_t> chosen;
  auto recurse = [&](auto&& self, StateKey s, double cost) -> void {
    if (s.u >= walker.n()) {
      int64_t peak = 0;
      if (Acceptable(space, o, chosen, &peak) && (!out.found || cost < out.cost - 1e-12)) {
        out.found = true;
        out.cost = cost;
        out.groups = chosen;
        out.peak_bytes = peak;
      }
      return;
    }
    for (int32_t g : walker.Options(s))
      if (walker.Fits(s, g)) {
        chosen.push_back(g);
        self(self, walker.Next(s, g), cost + o.group_cost[g] + o.launch_cost);
        chosen.pop_back();
      }
  };
  recurse(recurse, Start(walker), 0);
  out.proven_optimal = out.found;
  return out;
}

double CountPartitions(const CandidateSet& candidates) {
  CoverWalker walker(candidates);
  std::unordered_map<StateKey, double, StateHash> memo;
  auto count = [&](auto&& self, StateKey s) -> double {
    if (s.u >= walker.n()) return 1;
    auto it = memo.find(s);
    if (it != memo.end()) return it->second;
    double total = 0;
    for (int32_t g : walker.Options(s))
      if (walker.Fits(s, g)) total += self(self, walker.Next(s, g));
    memo.emplace(s, total);
    return total;
  };
  return count(count, Start(walker));
}

Plan PlanFromCandidates(FusionSpace& space, const std::vector<int32_t>& groups) {
  Plan plan;
  for (int32_t g : groups) {
    const auto& nodes = space.candidates().groups[g].nodes;
    plan.groups.push_back({nodes, space.Tilings(nodes).Default()});
  }
  space.Order(&plan);
  return plan;
}

}  // namespace fusetune::fusion_space
