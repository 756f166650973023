#include "fusion_space/space.h"

#include "common/hash.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <queue>
#include <set>

namespace fusetune::fusion_space {

int CountBf16Groups(const Plan& plan) {
  int bf16 = 0;
  for (const PlanGroup& g : plan.groups)
    bf16 += TilingPrecision(g.tiling) == kernels::Precision::kBf16;
  return bf16;
}

bool Plan::operator==(const Plan& other) const {
  if (groups.size() != other.groups.size()) return false;
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i].nodes != other.groups[i].nodes || groups[i].tiling != other.groups[i].tiling)
      return false;
  return true;
}

const char* MutationKindName(MutationKind kind) {
  switch (kind) {
    case MutationKind::kMerge:
      return "merge";
    case MutationKind::kSplit:
      return "split";
    case MutationKind::kMoveNode:
      return "move-node";
    case MutationKind::kRetile:
      return "retile";
  }
  return "?";
}

namespace {

const graph::Graph& Prefetched(const graph::Graph& graph) {
  graph.Prefetch();
  return graph;
}

}  // namespace

FusionSpace::FusionSpace(const graph::Graph& graph, kernels::KernelConfig config,
                         CandidateOptions options)
    : graph_(Prefetched(graph)),
      config_(config),
      flow_(graph),
      memo_(graph_, flow_),
      candidate_options_(options) {}

const CandidateSet& FusionSpace::candidates() const {
  if (!candidates_) candidates_ = EnumerateCandidates(graph_, flow_, candidate_options_);
  return *candidates_;
}

const graph::CanonicalSubgraph& FusionSpace::canonical() const {
  if (!canonical_) canonical_ = graph::CanonicalizeGraph(graph_);
  return *canonical_;
}

graph::WorkloadKey FusionSpace::Key(const std::vector<int32_t>& nodes) const {
  return graph::ComputeWorkloadKey(graph_, nodes, &flow_.all_uses());
}

size_t FusionSpace::NodesHash::operator()(const std::vector<int32_t>& nodes) const {
  return static_cast<size_t>(HashBytes(nodes.data(), nodes.size() * sizeof(int32_t)));
}

const GroupMatch& FusionSpace::Match(const std::vector<int32_t>& nodes) {
  auto it = matches_.find(nodes);
  if (it != matches_.end()) return *it->second;
  std::optional<GroupMatch> reused = memo_.Find(nodes);
  auto m =
      std::make_unique<GroupMatch>(reused ? std::move(*reused) : MatchGroup(graph_, flow_, nodes));
  if (!reused) memo_.Add(nodes, m.get());
  return *matches_.emplace(nodes, std::move(m)).first->second;
}

const CandidateGroup* FusionSpace::EnumeratedCandidate(const std::vector<int32_t>& nodes) const {
  if (!candidates_ || nodes.empty() || nodes.front() >= candidates_->num_nodes) return nullptr;
  for (int32_t i : candidates_->by_first_node[nodes.front()])
    if (candidates_->groups[i].nodes == nodes) return &candidates_->groups[i];
  return nullptr;
}

const TilingSpace& FusionSpace::Tilings(const std::vector<int32_t>& nodes) {
  auto it = tilings_.find(nodes);
  if (it != tilings_.end()) return *it->second;
  // A candidate group's instance is its match (a compile by groups builds
  // the tiling space of every distinct workload among them).
  const CandidateGroup* candidate = EnumeratedCandidate(nodes);
  const KernelInstance& instance =
      candidate && candidate->instance ? *candidate->instance : Match(nodes).instance;
  auto space = std::make_unique<TilingSpace>(instance, config_);
  return *tilings_.emplace(nodes, std::move(space)).first->second;
}

PlanGroup FusionSpace::WithDefaultTiling(std::vector<int32_t> nodes) {
  PlanGroup g;
  g.tiling = Tilings(nodes).Default();
  g.nodes = std::move(nodes);
  return g;
}

bool FusionSpace::Order(Plan* plan) const {
  const size_t n = plan->groups.size();
  std::vector<int32_t> group_of(graph_.nodes.size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (int32_t node : plan->groups[i].nodes) group_of[node] = static_cast<int32_t>(i);
  std::vector<std::set<int32_t>> succ(n);
  std::vector<int> indegree(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (int32_t node : plan->groups[i].nodes)
      for (int32_t c : flow_.consumers(node)) {
        const int32_t j = group_of[c];
        if (j != static_cast<int32_t>(i) && succ[i].insert(j).second) indegree[j]++;
      }
  auto first = [&](int32_t i) { return plan->groups[i].nodes.front(); };
  auto later = [&](int32_t a, int32_t b) { return first(a) > first(b); };
  std::priority_queue<int32_t, std::vector<int32_t>, decltype(later)> ready(later);
  for (size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push(static_cast<int32_t>(i));
  std::vector<PlanGroup> ordered;
  std::vector<int32_t> order;
  while (!ready.empty()) {
    const int32_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int32_t j : succ[i])
      if (--indegree[j] == 0) ready.push(j);
  }
  if (order.size() != n) return false;
  for (int32_t i : order) ordered.push_back(std::move(plan->groups[i]));
  plan->groups = std::move(ordered);
  return true;
}

Plan FusionSpace::FromGroups(std::vector<std::vector<int32_t>> groups, Rng* rng) {
  Plan plan;
  for (auto& nodes : groups) {
    if (rng) {
      PlanGroup g;
      g.tiling = Tilings(nodes).Sample(*rng);
      g.nodes = std::move(nodes);
      plan.groups.push_back(std::move(g));
    } else {
      plan.groups.push_back(WithDefaultTiling(std::move(nodes)));
    }
  }
  Order(&plan);
  return plan;
}

Plan FusionSpace::Unfused() {
  std::vector<std::vector<int32_t>> groups;
  for (int32_t i = 0; i < flow_.num_nodes(); ++i) groups.push_back({i});
  return FromGroups(std::move(groups), nullptr);
}

namespace {

// Builds partitions from accepted groups plus singletons, checking acyclicity.
class PartitionBuilder {
 public:
  PartitionBuilder(const FusionSpace& space, int32_t n) : space_(space), taken_(n, 0) {}
  bool TryAdd(const std::vector<int32_t>& nodes) {
    for (int32_t x : nodes)
      if (taken_[x]) return false;
    groups_.push_back(nodes);
    Plan probe = Probe();
    if (!space_.Order(&probe)) {
      groups_.pop_back();
      return false;
    }
    for (int32_t x : nodes) taken_[x] = 1;
    return true;
  }
  std::vector<std::vector<int32_t>> Finish() const {
    std::vector<std::vector<int32_t>> all = groups_;
    for (int32_t i = 0; i < static_cast<int32_t>(taken_.size()); ++i)
      if (!taken_[i]) all.push_back({i});
    return all;
  }

 private:
  Plan Probe() const {
    Plan p;
    for (auto& g : Finish()) p.groups.push_back({g, std::monostate{}});
    return p;
  }
  const FusionSpace& space_;
  std::vector<char> taken_;
  std::vector<std::vector<int32_t>> groups_;
};

}  // namespace

Plan FusionSpace::Greedy() {
  std::vector<int32_t> order;
  for (int32_t i = static_cast<int32_t>(candidates().num_nodes);
       i < static_cast<int32_t>(candidates().groups.size()); ++i)
    order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return candidates().groups[a].nodes.size() > candidates().groups[b].nodes.size();
  });
  PartitionBuilder builder(*this, flow_.num_nodes());
  for (int32_t i : order) builder.TryAdd(candidates().groups[i].nodes);
  return FromGroups(builder.Finish(), nullptr);
}

Plan FusionSpace::Random(Rng& rng) {
  std::vector<int32_t> order;
  for (int32_t i = static_cast<int32_t>(candidates().num_nodes);
       i < static_cast<int32_t>(candidates().groups.size()); ++i)
    order.push_back(i);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  const double accept = 0.1 + 0.9 * rng.Uniform();
  PartitionBuilder builder(*this, flow_.num_nodes());
  for (int32_t i : order)
    if (rng.Uniform() < accept) builder.TryAdd(candidates().groups[i].nodes);
  return FromGroups(builder.Finish(), &rng);
}

std::optional<Plan> FusionSpace::Mutate(const Plan& plan, Rng& rng,
                                        std::optional<MutationKind> kind) {
  const MutationKind k = kind ? *kind : static_cast<MutationKind>(rng.Below(4));
  std::vector<int32_t> group_of(graph_.nodes.size(), -1);
  for (size_t i = 0; i < plan.groups.size(); ++i)
    for (int32_t node : plan.groups[i].nodes) group_of[node] = static_cast<int32_t>(i);
  auto legal = [&](const std::vector<int32_t>& nodes) {
    return !nodes.empty() && Match(nodes).decision.allowed();
  };
  auto neighbours = [&](const std::vector<int32_t>& nodes, int32_t self) {
    std::set<int32_t> out;
    for (int32_t x : nodes) {
      for (int32_t c : flow_.consumers(x))
        if (group_of[c] != self) out.insert(group_of[c]);
      for (int32_t p : flow_.producers(x))
        if (group_of[p] != self) out.insert(group_of[p]);
    }
    return std::vector<int32_t>(out.begin(), out.end());
  };
  for (int attempt = 0; attempt < 16; ++attempt) {
    Plan next = plan;
    const int32_t a = static_cast<int32_t>(rng.Below(plan.groups.size()));
    const std::vector<int32_t>& an = plan.groups[a].nodes;
    std::vector<std::vector<int32_t>> replace;  // new groups for `remove`
    std::vector<int32_t> remove{a};
    if (k == MutationKind::kRetile) {
      const TilingSpace& space = Tilings(an);
      auto choice = space.ChoiceOf(plan.groups[a].tiling);
      if (space.params().empty() || !choice) continue;
      const size_t p = rng.Below(space.params().size());
      const size_t count = space.params()[p].values.size();
      if (count < 2) continue;
      (*choice)[p] = static_cast<int>(((*choice)[p] + 1 + rng.Below(count - 1)) % count);
      Tiling t = space.At(*choice);
      if (!space.Check(t)) continue;
      next.groups[a].tiling = t;
      return next;
    }
    if (k == MutationKind::kSplit) {
      if (an.size() < 2) continue;
      const int32_t x = an[rng.Below(an.size())];
      std::vector<int32_t> rest;
      for (int32_t y : an)
        if (y != x) rest.push_back(y);
      if (!legal(rest)) continue;
      replace = {{x}, rest};
    } else {
      const std::vector<int32_t> nb = neighbours(an, a);
      if (nb.empty()) continue;
      const int32_t b = nb[rng.Below(nb.size())];
      const std::vector<int32_t>& bn = plan.groups[b].nodes;
      remove.push_back(b);
      if (k == MutationKind::kMerge) {
        std::vector<int32_t> merged = an;
        merged.insert(merged.end(), bn.begin(), bn.end());
        std::sort(merged.begin(), merged.end());
        if (!legal(merged)) continue;
        replace = {merged};
      } else {  // move a node of a that touches b into b
        std::vector<int32_t> movable;
        for (int32_t x : an) {
          bool touches = false;
          for (int32_t c : flow_.consumers(x)) touches = touches || group_of[c] == b;
          for (int32_t p : flow_.producers(x)) touches = touches || group_of[p] == b;
          if (touches) movable.push_back(x);
        }
        if (an.size() < 2 || movable.empty()) continue;
        const int32_t x = movable[rng.Below(movable.size())];
        std::vector<int32_t> a2, b2 = bn;
        for (int32_t y : an)
          if (y != x) a2.push_back(y);
        b2.push_back(x);
        std::sort(b2.begin(), b2.end());
        if (!legal(a2) || !legal(b2)) continue;
        replace = {a2, b2};
      }
    }
    std::sort(remove.begin(), remove.end(), std::greater<>());
    for (int32_t r : remove) next.groups.erase(next.groups.begin() + r);
    for (auto& nodes : replace) next.groups.push_back(WithDefaultTiling(nodes));
    if (!Order(&next)) continue;
    return next;
  }
  return std::nullopt;
}

FusionDecision FusionSpace::CheckGroupTiling(const GroupMatch& match, const Tiling& tiling) {
  if (match.structure < 0) return CheckTiling(match.instance, config_, tiling);
  if (valid_tilings_.size() <= static_cast<size_t>(match.structure))
    valid_tilings_.resize(match.structure + 1);
  std::vector<Tiling>& valid = valid_tilings_[match.structure];
  if (std::find(valid.begin(), valid.end(), tiling) != valid.end()) return FusionDecision::Allow();
  FusionDecision d = CheckTiling(match.instance, config_, tiling);
  if (d) valid.push_back(tiling);
  return d;
}

FusionDecision FusionSpace::Validate(const Plan& plan) {
  // A plan read from a database is validated when read and again when
  // lowered; the second check is a comparison.
  if (last_valid_plan_ && *last_valid_plan_ == plan) return FusionDecision::Allow();
  const int32_t n = flow_.num_nodes();
  std::vector<int32_t> group_of(n, -1);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const PlanGroup& g = plan.groups[i];
    if (g.nodes.empty()) return FusionDecision::Forbid(fmt::format("group {} is empty", i));
    for (size_t j = 0; j < g.nodes.size(); ++j) {
      const int32_t x = g.nodes[j];
      if (x < 0 || x >= n)
        return FusionDecision::Forbid(fmt::format("group {}: node {} out of range", i, x));
      if (j > 0 && x <= g.nodes[j - 1])
        return FusionDecision::Forbid(fmt::format("group {}: nodes are not ascending", i));
      if (group_of[x] >= 0)
        return FusionDecision::Forbid(
            fmt::format("node {} is in groups {} and {}", x, group_of[x], i));
      group_of[x] = static_cast<int32_t>(i);
    }
  }
  for (int32_t x = 0; x < n; ++x)
    if (group_of[x] < 0) return FusionDecision::Forbid(fmt::format("node {} is in no group", x));
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const PlanGroup& g = plan.groups[i];
    const GroupMatch& m = Match(g.nodes);
    if (!m.decision)
      return FusionDecision::Forbid(
          fmt::format("group {} is not legal: {}", i, m.decision.reason()));
    const FusionDecision t = CheckGroupTiling(m, g.tiling);
    if (!t)
      return FusionDecision::Forbid(fmt::format("group {} ({}): tiling {} is invalid: {}", i,
                                                m.instance.summary, TilingToString(g.tiling),
                                                t.reason()));
    for (int32_t x : g.nodes)
      for (int32_t p : flow_.producers(x))
        if (group_of[p] > static_cast<int32_t>(i))
          return FusionDecision::Forbid(fmt::format(
              "group {} runs before group {}, which produces its input", i, group_of[p]));
  }
  last_valid_plan_ = plan;
  return FusionDecision::Allow();
}

double FusionSpace::Traffic(const Plan& plan) {
  double bytes = 0;
  for (const PlanGroup& g : plan.groups) bytes += GroupTraffic(g.nodes);
  return bytes;
}

double FusionSpace::GroupTraffic(const std::vector<int32_t>& nodes) {
  const KernelInstance& k = Match(nodes).instance;
  double bytes = 0;
  for (graph::ValueId v : k.inputs) bytes += static_cast<double>(graph_.type(v).nbytes());
  for (graph::ValueId v : k.outputs) bytes += static_cast<double>(graph_.type(v).nbytes());
  return bytes;
}

int64_t FusionSpace::PeakIntermediateBytes(const Plan& plan) {
  const auto steps = static_cast<int32_t>(plan.groups.size());
  // Per value a kernel writes: the step that writes it and the last that
  // reads it (or the last step, for graph outputs).
  std::vector<std::pair<int32_t, int32_t>> live(graph_.values.size(), {-1, -1});
  std::vector<graph::ValueId> written;
  for (int32_t s = 0; s < steps; ++s) {
    const KernelInstance& k = Match(plan.groups[s].nodes).instance;
    for (graph::ValueId v : k.outputs) {
      live[v] = {s, flow_.is_graph_output(v) ? steps - 1 : s};
      written.push_back(v);
    }
    for (graph::ValueId v : k.inputs)
      if (live[v].first >= 0) live[v].second = std::max(live[v].second, s);
  }
  // Bytes live at each step, from where each value starts and stops.
  std::vector<int64_t> change(steps + 1, 0);
  for (graph::ValueId v : written) {
    const auto bytes = static_cast<int64_t>(graph_.type(v).nbytes());
    change[live[v].first] += bytes;
    change[live[v].second + 1] -= bytes;
  }
  int64_t at = 0, peak = 0;
  for (int32_t s = 0; s < steps; ++s) peak = std::max(peak, at += change[s]);
  return peak;
}

int64_t FusionSpace::MinimumPeakIntermediateBytes() const {
  int64_t bound = 0;
  for (const graph::Node& node : graph_.nodes)
    for (graph::ValueId v : node.outputs)  // an omitted optional output is kNoValue
      if (v != graph::kNoValue && flow_.is_graph_output(v))
        bound += static_cast<int64_t>(graph_.type(v).nbytes());
  return bound;
}

}  // namespace fusetune::fusion_space
