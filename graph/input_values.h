// Graph inputs that carry shapes. An export may feed Reshape's shape,
// Slice's starts/ends/axes/steps, Squeeze/Unsqueeze's axes, Expand's shape,
// Split's sizes, Trilu's k, Range's bounds or ConstantOfShape's shape from a
// graph input rather than a constant. fusetune plans and compiles static
// shapes, so such an input's value is bound when the run supplies it: the
// input becomes a constant of the graph, and inference (with folding)
// resolves every shape that depends on it. Inputs that only carry data
// (token ids, activations) stay inputs: only the values inference asks for
// are bound.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "graph/graph.h"
#include "graph/shape_inference.h"

namespace fusetune::graph {

// InferShapes, binding graph inputs from `values` (by name) as inference
// needs them: each time an op needs the value of a value computed from graph
// inputs, those inputs are made constants and inference starts again on the
// graph as it was given. A needed input without a value is an error that
// names it and the node that needs it. A value is converted to the input's
// declared element type when that is exact (integers given for an int32,
// float or bool input) and must have its declared shape (a rank-1 value of
// one element binds a scalar). `bound` (optional) receives the names bound.
Status InferShapesBindingInputs(Graph& graph, const std::map<std::string, Tensor>& values,
                                const InferOptions& options = {},
                                std::vector<std::string>* bound = nullptr);

// The graph inputs (not constants) whose values `value` is computed from
// (through a Shape or Size only the dims count: the walk stops there).
std::vector<ValueId> GraphInputsReaching(const Graph& graph, ValueId value);

}  // namespace fusetune::graph
