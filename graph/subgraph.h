// A node subset of a graph as a graph of its own: what a fused group is when
// it is measured alone. Values the subset reads from outside become inputs
// (constants stay constants, shared, not copied); values it produces that are
// read outside it, or are outputs of the whole graph, become its outputs.
#pragma once

#include <cstdint>
#include <span>

#include "graph/graph.h"

namespace fusetune::graph {

// `nodes`: node indices of `graph`, any order, no duplicates. Names, types,
// attributes and the opset are kept; nodes keep their relative order.
Graph ExtractSubgraph(const Graph& graph, std::span<const int32_t> nodes);

}  // namespace fusetune::graph
