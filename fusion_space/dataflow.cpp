#include "fusion_space/dataflow.h"

#include <fmt/format.h>

#include <algorithm>

namespace fusetune::fusion_space {

Dataflow::Dataflow(const graph::Graph& graph)
    : graph_(graph), uses_(graph), is_output_(graph.values.size(), 0) {
  for (graph::ValueId v : graph.outputs) is_output_[v] = 1;
  const int32_t n = static_cast<int32_t>(graph.nodes.size());
  // Producers: each node's distinct producer nodes, ascending.
  producers_.begin_.assign(n + 1, 0);
  std::vector<int32_t> consumer_count(n + 1, 0);
  for (int32_t i = 0; i < n; ++i) {
    const size_t start = producers_.items_.size();
    for (graph::ValueId input : graph.nodes[i].inputs) {
      if (input == graph::kNoValue) continue;  // an omitted optional input
      const int32_t producer = graph.value(input).producer;
      if (producer >= 0) producers_.items_.push_back(producer);  // not an input or constant
    }
    const auto first = producers_.items_.begin() + static_cast<std::ptrdiff_t>(start);
    std::sort(first, producers_.items_.end());
    producers_.items_.erase(std::unique(first, producers_.items_.end()), producers_.items_.end());
    producers_.begin_[i + 1] = static_cast<int32_t>(producers_.items_.size());
    for (int32_t p : producers_[i]) ++consumer_count[p + 1];
  }
  // Consumers: the same edges reversed; filled in node order, so ascending.
  for (int32_t i = 0; i < n; ++i) consumer_count[i + 1] += consumer_count[i];
  consumers_.begin_ = consumer_count;
  consumers_.items_.resize(consumer_count[n]);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t p : producers_[i]) consumers_.items_[consumer_count[p]++] = i;
}

bool Dataflow::LeavesGroup(graph::ValueId v, std::span<const char> inside) const {
  if (is_output_[v]) return true;
  for (auto [node, slot] : uses_[v])
    if (!inside[node]) return true;
  return false;
}

FusionDecision Dataflow::CheckConvex(std::span<const int32_t> group) const {
  if (group.empty()) return FusionDecision::Forbid("the group is empty");
  std::vector<char> in_group(consumers_.size(), 0);
  for (int32_t node : group) in_group[node] = 1;
  // Per thread, so that the many checks of candidate matching allocate no
  // visit marks (epochs tell one walk's marks from another's, any graph's).
  thread_local WalkScratch scratch;
  const std::optional<Reentry> r = FindReentry(group, in_group, &scratch);
  if (!r) return FusionDecision::Allow();
  return FusionDecision::Forbid(fmt::format(
      "not convex: a path leaves the group through node {} ({}) and re-enters at node {} ({})",
      r->outside, graph_.nodes[r->outside].op_type, r->node, graph_.nodes[r->node].op_type));
}

std::optional<Dataflow::Reentry> Dataflow::FindReentry(std::span<const int32_t> group,
                                                       std::span<const char> inside,
                                                       WalkScratch* scratch) const {
  WalkScratch& w = *scratch;
  if (w.seen.size() != consumers_.size() || ++w.epoch == 0) {
    w.seen.assign(consumers_.size(), 0);
    w.epoch = 1;
  }
  int32_t last = 0;
  for (int32_t node : group) last = std::max(last, node);
  // Walk forward from the group through outside nodes only; nodes are in
  // topological order, so nothing past the group's last node can lead back.
  w.stack.clear();
  auto visit = [&](int32_t c) {
    if (c < last && w.seen[c] != w.epoch) {
      w.seen[c] = w.epoch;
      w.stack.push_back(c);
    }
  };
  for (int32_t node : group)
    for (int32_t c : consumers_[node])
      if (!inside[c]) visit(c);
  while (!w.stack.empty()) {
    const int32_t outside = w.stack.back();
    w.stack.pop_back();
    for (int32_t c : consumers_[outside]) {
      if (inside[c]) return Reentry{outside, c};
      visit(c);
    }
  }
  return std::nullopt;
}

}  // namespace fusetune::fusion_space
