// Whole-graph shape inference. Walks nodes in topological order, infers each
// output's type, and (optionally) folds nodes whose inputs are all constant,
// as well as Shape/Size of statically shaped tensors. Folding while inferring
// is what turns PyTorch's Shape -> Gather -> Concat -> Reshape chains into
// static shapes.
#pragma once

#include "common/status.h"
#include "graph/graph.h"

namespace fusetune::graph {

struct InferOptions {
  bool fold_constants = true;
  // Largest tensor (bytes) that folding may create; bigger results stay as nodes.
  size_t max_folded_bytes = size_t{256} << 20;
  // When inference stops because an op needs the value of a value that is
  // not constant (Reshape's shape computed from a graph input), that value
  // is written here (input_values.h binds the graph inputs it comes from).
  ValueId* needed_value = nullptr;
};

// Errors name the node. Unsupported ops are reported by CheckSupportedOps.
Status InferShapes(Graph& graph, const InferOptions& options = {});

// Ops whose output depends on their input's dims only (Shape, Size): they
// fold with a non-constant input.
bool ReadsOnlyDims(const std::string& op_type);

// One error listing every unsupported op type and the first node using it.
Status CheckSupportedOps(const Graph& graph);

}  // namespace fusetune::graph
