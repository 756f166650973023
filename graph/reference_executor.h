// The reference executor: runs a graph op by op with the registry's reference
// kernels, in f32. It is the correctness oracle for every kernel and plan.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "graph/graph.h"

namespace fusetune::graph {

using TensorMap = std::map<std::string, Tensor>;

struct ReferenceOptions {
  // Keep every intermediate value (for comparing subgraphs); otherwise values
  // are released after their last use.
  bool keep_intermediates = false;
};

struct ReferenceResult {
  TensorMap outputs;           // by graph output name
  std::vector<Tensor> values;  // by ValueId, filled when keep_intermediates
};

// Checks feeds against the graph inputs (names, dtypes, shapes), with errors
// naming the input; f64/f16 feeds for f32 inputs are converted.
Result<ReferenceResult> RunReference(const Graph& graph, const TensorMap& feeds,
                                     const ReferenceOptions& options = {});

// The feeds checked against the graph inputs as above, and the constants:
// a tensor per ValueId (empty for values computed by nodes). Inputs in
// `held` are the caller's own (a KV cache a program keeps): not fed, left
// empty, and an error when fed.
Result<std::vector<Tensor>> BindFeeds(const Graph& graph, const TensorMap& feeds,
                                      const std::vector<ValueId>& held = {});

// Deterministic random feeds for every graph input (normal for floats, small
// non-negative ints, bools half true), from `seed`.
TensorMap RandomFeeds(const Graph& graph, uint64_t seed);

}  // namespace fusetune::graph
