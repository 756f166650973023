#include "fusion_space/dataflow.h"

#include <fmt/format.h>

#include <algorithm>

namespace fusetune {

Dataflow::Dataflow(const Graph& graph)
    : graph_(graph), uses_(graph.Consumers()), is_output_(graph.values.size(), 0) {
  for (ValueId v : graph.outputs) is_output_[v] = 1;
  const int32_t n = static_cast<int32_t>(graph.nodes.size());
  consumers_.resize(n);
  producers_.resize(n);
  for (int32_t i = 0; i < n; ++i)
    for (ValueId input : graph.nodes[i].inputs) {
      if (input == kNoValue) continue;  // an omitted optional input
      const int32_t producer = graph.value(input).producer;
      if (producer < 0) continue;  // a graph input or constant
      producers_[i].push_back(producer);
      consumers_[producer].push_back(i);
    }
  for (auto* lists : {&consumers_, &producers_})
    for (auto& list : *lists) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
}

bool Dataflow::LeavesGroup(ValueId v, std::span<const char> inside) const {
  if (is_output_[v]) return true;
  for (auto [node, slot] : uses_[v])
    if (!inside[node]) return true;
  return false;
}

FusionDecision Dataflow::CheckConvex(std::span<const int32_t> group) const {
  if (group.empty()) return FusionDecision::Forbid("the group is empty");
  std::vector<char> in_group(consumers_.size(), 0);
  int32_t last = 0;
  for (int32_t node : group) {
    in_group[node] = 1;
    last = std::max(last, node);
  }
  // Walk forward from the group through outside nodes only; nodes are in
  // topological order, so nothing past the group's last node can lead back.
  std::vector<char> seen(consumers_.size(), 0);
  std::vector<int32_t> stack;
  for (int32_t node : group)
    for (int32_t c : consumers_[node])
      if (!in_group[c] && c < last && !seen[c]) {
        seen[c] = 1;
        stack.push_back(c);
      }
  while (!stack.empty()) {
    const int32_t outside = stack.back();
    stack.pop_back();
    for (int32_t c : consumers_[outside]) {
      if (in_group[c])
        return FusionDecision::Forbid(
            fmt::format("not convex: a path leaves the group through node {} ({}) and re-enters "
                        "at node {} ({})",
                        outside, graph_.nodes[outside].op_type, c, graph_.nodes[c].op_type));
      if (c < last && !seen[c]) {
        seen[c] = 1;
        stack.push_back(c);
      }
    }
  }
  return FusionDecision::Allow();
}

}  // namespace fusetune
