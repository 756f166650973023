// Repeated layers in a model's node order. A stacked model (twelve encoder
// layers) lists each layer's nodes in the same order, so node i + period
// does in the next layer what node i does in its own. Candidate enumeration
// finds one layer's groups and shifts them onto the next instead of
// enumerating every layer again (a 12-layer model's connected sets were
// four fifths of a compile that looks groups up one by one).
//
// The shift "maps" node i when node i + period is its exact counterpart:
// the same op, attributes, output types, operand types and semantic
// constants (the exact workload key's view of one node); each operand
// produced by the shifted producer's same output, or the same value, or a
// single-use constant of either node (a layer's own weights); each output
// read by exactly the shifted readers and a graph output in both or
// neither. Where every node in a range maps, the range and its shift are
// the same subgraph: the same connected sets, convexity, matches (value ids
// shifted) and workload keys.
//
// Enumeration from an anchor sees only the nodes from the anchor on, so a
// node may also map "from" a window start: an operand that the layer before
// reads from outside the window (a graph input, or a value made before the
// window) may be, in the next layer, any value of the same type from
// outside the shifted window (the layer before's output). Both are leaves
// of every set there. That lets the second layer shift from the first,
// whose nodes read the graph input.
#pragma once

#include <cstdint>
#include <vector>

#include "fusion_space/dataflow.h"
#include "graph/graph.h"

namespace fusetune::fusion_space {

struct LayerShift {
  int32_t period = 0;      // 0: no repetition worth a shift was found
  std::vector<char> maps;  // per node: the shift maps it (see above)
  // Per node: the first window start (a node index) from which the shift
  // maps it, counting leaves as above; 0 where `maps` holds, kNever where
  // it maps from no window.
  std::vector<int32_t> maps_from;
  static constexpr int32_t kNever = INT32_MAX;
  // Per value: its counterpart in the next layer, for the operands and
  // outputs of nodes mapped from some window; kNoValue elsewhere. One to
  // one: a leaf whose image would be ambiguous leaves its reader unmapped.
  std::vector<graph::ValueId> image;
};

// The period that maps the most nodes, among the distances between
// repeated node signatures; period 0 when it maps fewer nodes than a layer
// holds.
LayerShift FindLayerShift(const graph::Graph& graph, const Dataflow& flow);

// Whether `period` maps node `node` (exposed for tests).
bool ShiftMapsNode(const graph::Graph& graph, const Dataflow& flow,
                   const std::vector<uint64_t>& node_hash, int32_t node, int32_t period);

}  // namespace fusetune::fusion_space
