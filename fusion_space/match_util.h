// Small helpers shared by the matchers (internal to fusion_space/).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace fusetune::fusion_space {

int64_t MatchIntAttr(const graph::Node& node, const std::string& name, int64_t fallback);
float MatchFloatAttr(const graph::Node& node, const std::string& name, float fallback);

// True when v is a constant with one element; its value in *out.
bool ScalarConstant(const graph::Graph& g, graph::ValueId v, double* out);

// Evaluates value `e` as a scalar function of value `leaf` at leaf = x,
// through elementwise nodes whose other operands are one-element constants.
// nullopt (with *failure set) for a node it cannot evaluate.
std::optional<double> EvalScalarFunction(const graph::Graph& g, graph::ValueId e,
                                         graph::ValueId leaf, double x,
                                         std::map<graph::ValueId, double>* memo,
                                         std::string* failure);

// Values read by the nodes (ascending) that are not produced by them.
std::vector<graph::ValueId> GroupInputs(const graph::Graph& g, const std::vector<int32_t>& nodes,
                                        const std::vector<char>& inside);

}  // namespace fusetune::fusion_space
