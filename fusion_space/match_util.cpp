#include "fusion_space/match_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fusetune::fusion_space {

int64_t MatchIntAttr(const graph::Node& node, const std::string& name, int64_t fallback) {
  auto r = node.attrs.GetInt(name, fallback);
  return r.ok() ? *r : fallback;
}

float MatchFloatAttr(const graph::Node& node, const std::string& name, float fallback) {
  auto r = node.attrs.GetFloat(name, fallback);
  return r.ok() ? *r : fallback;
}

bool ScalarConstant(const graph::Graph& g, graph::ValueId v, double* out) {
  const graph::Value& value = g.value(v);
  if (!value.is_constant() || value.constant->numel() != 1) return false;
  *out = value.constant->GetAsDouble(0);
  return true;
}

namespace {
// Clip's bounds are optional inputs (opset 11+) or attributes (opset 6): read
// by position, not as the list of present inputs.
std::optional<double> EvalClip(const graph::Graph& g, const graph::Node& node, graph::ValueId leaf,
                               double x, std::map<graph::ValueId, double>* memo,
                               std::string* failure) {
  auto in = EvalScalarFunction(g, node.inputs[0], leaf, x, memo, failure);
  if (!in) return std::nullopt;
  double lo = MatchFloatAttr(node, "min", -INFINITY), hi = MatchFloatAttr(node, "max", INFINITY);
  for (size_t i = 1; i < node.inputs.size() && i < 3; ++i) {
    if (node.inputs[i] == graph::kNoValue) continue;
    auto b = EvalScalarFunction(g, node.inputs[i], leaf, x, memo, failure);
    if (!b) return std::nullopt;
    (i == 1 ? lo : hi) = *b;
  }
  return std::min(std::max(*in, lo), hi);
}
}  // namespace

std::optional<double> EvalScalarFunction(const graph::Graph& g, graph::ValueId e,
                                         graph::ValueId leaf, double x,
                                         std::map<graph::ValueId, double>* memo,
                                         std::string* failure) {
  if (e == leaf) return x;
  double c;
  if (ScalarConstant(g, e, &c)) return c;
  if (auto it = memo->find(e); it != memo->end()) return it->second;
  const int32_t p = g.value(e).producer;
  if (p < 0) {
    *failure = fmt::format("value {} is not a function of the chain", g.value(e).name);
    return std::nullopt;
  }
  const graph::Node& node = g.nodes[p];
  if (node.op_type == "Clip") return EvalClip(g, node, leaf, x, memo, failure);
  std::vector<double> in;
  for (graph::ValueId v : node.inputs) {
    if (v == graph::kNoValue) continue;
    auto r = EvalScalarFunction(g, v, leaf, x, memo, failure);
    if (!r) return std::nullopt;
    in.push_back(*r);
  }
  const std::string& op = node.op_type;
  double y;
  auto need = [&](size_t n) { return in.size() == n; };
  if (op == "Identity" && need(1))
    y = in[0];
  else if (op == "Neg" && need(1))
    y = -in[0];
  else if (op == "Abs" && need(1))
    y = std::abs(in[0]);
  else if (op == "Exp" && need(1))
    y = std::exp(in[0]);
  else if (op == "Log" && need(1))
    y = std::log(in[0]);
  else if (op == "Sqrt" && need(1))
    y = std::sqrt(in[0]);
  else if (op == "Reciprocal" && need(1))
    y = 1 / in[0];
  else if (op == "Tanh" && need(1))
    y = std::tanh(in[0]);
  else if (op == "Erf" && need(1))
    y = std::erf(in[0]);
  else if (op == "Sigmoid" && need(1))
    y = 1 / (1 + std::exp(-in[0]));
  else if (op == "HardSigmoid" && need(1))
    y = std::clamp(MatchFloatAttr(node, "alpha", 0.2f) * in[0] + MatchFloatAttr(node, "beta", 0.5f),
                   0.0, 1.0);
  else if (op == "HardSwish" && need(1))
    y = in[0] * std::clamp(in[0] / 6 + 0.5, 0.0, 1.0);
  else if (op == "Relu" && need(1))
    y = std::max(in[0], 0.0);
  else if (op == "Add" && need(2))
    y = in[0] + in[1];
  else if (op == "Sub" && need(2))
    y = in[0] - in[1];
  else if (op == "Mul" && need(2))
    y = in[0] * in[1];
  else if (op == "Div" && need(2))
    y = in[0] / in[1];
  else if (op == "Pow" && need(2))
    y = std::pow(in[0], in[1]);
  else if (op == "Max" && need(2))
    y = std::max(in[0], in[1]);
  else if (op == "Min" && need(2))
    y = std::min(in[0], in[1]);
  else {
    *failure = fmt::format("node {} ({}) is not an elementwise scalar function", p, op);
    return std::nullopt;
  }
  (*memo)[e] = y;
  return y;
}

std::vector<graph::ValueId> GroupInputs(const graph::Graph& g, const std::vector<int32_t>& nodes,
                                        const std::vector<char>& inside) {
  std::vector<graph::ValueId> inputs;
  for (int32_t n : nodes)
    for (graph::ValueId v : g.nodes[n].inputs) {
      if (v == graph::kNoValue) continue;
      const int32_t p = g.value(v).producer;
      if (p >= 0 && inside[p]) continue;
      if (std::find(inputs.begin(), inputs.end(), v) == inputs.end()) inputs.push_back(v);
    }
  return inputs;
}

}  // namespace fusetune::fusion_space
