// Static analysis of a graph for reports: FLOPs and bytes per node and op
// type, parameter counts, and the repeated layers of a model (found without
// node names, from the structure alone).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/workload_key.h"

namespace fusetune::graph {

struct NodeCost {
  double flops = 0;
  double transcendentals = 0;
  double bytes_read = 0;     // all inputs, weights included
  double bytes_written = 0;  // all outputs
};

NodeCost ComputeNodeCost(const Graph& graph, int32_t node);

struct OpTypeSummary {
  int64_t count = 0;
  double flops = 0;
  double bytes = 0;
};

struct GraphSummary {
  std::map<std::string, OpTypeSummary> by_op_type;
  int64_t nodes = 0;
  int64_t parameters = 0;  // elements of float constants
  double parameter_bytes = 0;
  double flops = 0;
  double bytes = 0;  // sum over nodes of bytes read and written
};

GraphSummary SummarizeGraph(const Graph& graph);

// A block of consecutive nodes that the model repeats.
struct RepeatedBlock {
  WorkloadKey key;
  int64_t count = 0;                            // occurrences
  std::vector<std::vector<int32_t>> instances;  // node indices of each occurrence
  double flops = 0;                             // of one occurrence
};

struct LayerStructure {
  // Segments: maximal node ranges between points where a single activation
  // is live (a residual stream, a layer boundary).
  std::vector<std::vector<int32_t>> segments;
  // Layers: the repeating unit of consecutive segments (count >= 2), if any.
  std::vector<RepeatedBlock> layers;
  // Every distinct segment key with its count.
  std::vector<RepeatedBlock> segment_keys;
};

LayerStructure FindLayers(const Graph& graph);

}  // namespace fusetune::graph
