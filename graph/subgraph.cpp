#include "graph/subgraph.h"

#include <algorithm>
#include <vector>

#include "common/check.h"

namespace fusetune::graph {

Graph ExtractSubgraph(const Graph& graph, std::span<const int32_t> nodes) {
  std::vector<int32_t> sorted(nodes.begin(), nodes.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<bool> inside(graph.nodes.size(), false);
  for (int32_t n : sorted) inside.at(n) = true;

  Graph sub;
  sub.name = graph.name + "/subgraph";
  sub.opset = graph.opset;
  std::vector<ValueId> mapped(graph.values.size(), kNoValue);
  auto map_input = [&](ValueId v) {
    if (v == kNoValue || mapped[v] != kNoValue) return;
    const Value& value = graph.value(v);
    if (value.is_constant()) {
      mapped[v] = sub.AddValue(value.name);
      Value& c = sub.value(mapped[v]);
      c.type = value.type;
      c.has_type = value.has_type;
      c.constant = value.constant;
    } else {
      mapped[v] = sub.AddInput(value.name, value.type);
    }
  };
  for (int32_t n : sorted) {
    const Node& node = graph.nodes[n];
    for (ValueId v : node.inputs) map_input(v);
    Node copy = node;
    for (ValueId& v : copy.inputs)
      if (v != kNoValue) v = mapped[v];
    for (ValueId& v : copy.outputs) {
      if (v == kNoValue) continue;
      const ValueId original = v;
      v = mapped[original] = sub.AddValue(graph.value(original).name);
      sub.value(v).type = graph.type(original);
      sub.value(v).has_type = graph.value(original).has_type;
    }
    sub.AddNode(std::move(copy));
  }

  std::vector<bool> leaves(graph.values.size(), false);
  for (ValueId v : graph.outputs) leaves[v] = true;
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n)
    if (!inside[n])
      for (ValueId v : graph.nodes[n].inputs)
        if (v != kNoValue) leaves[v] = true;
  for (int32_t n : sorted)
    for (ValueId v : graph.nodes[n].outputs)
      if (v != kNoValue && leaves[v]) sub.outputs.push_back(mapped[v]);
  FT_CHECK(sub.Validate().ok(), "extracted subgraph is not valid");
  return sub;
}

}  // namespace fusetune::graph
