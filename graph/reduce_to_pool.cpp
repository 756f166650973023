// ReduceToGlobalPool (passes.h): a mean or max over every spatial axis, the
// way `x.mean((2, 3))` exports, is a global pool; as one it runs on the pool
// kernel or inside the conv before it instead of the reference executor.
#include <algorithm>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/passes.h"

namespace fusetune::graph {
namespace {

// The reduced axes of a ReduceMean/ReduceMax: the attribute (opset < 18) or
// the constant second input (opset 18); nullopt when neither gives them.
std::optional<std::vector<int64_t>> ReducedAxes(const Graph& g, const Node& n) {
  if (n.attrs.Has("axes")) {
    auto axes = n.attrs.GetInts("axes");
    return axes.ok() ? std::optional(*axes) : std::nullopt;
  }
  if (n.inputs.size() < 2 || n.inputs[1] == kNoValue || !g.value(n.inputs[1]).is_constant())
    return std::nullopt;
  const Tensor& t = *g.value(n.inputs[1]).constant;
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < t.numel(); ++i) axes.push_back(static_cast<int64_t>(t.GetAsDouble(i)));
  return axes;
}

// Whether `v` is a convolution's or a pool's output, maybe through
// activations, batch norms and residual adds (followed through their first
// input): the feature map of a 1-D CNN.
bool ComesFromConvOrPool(const Graph& g, ValueId v) {
  static const std::set<std::string> kPassThrough = {
      "Relu",      "Clip",      "Sigmoid", "Tanh",     "HardSigmoid",
      "HardSwish", "LeakyRelu", "Elu",     "Identity", "BatchNormalization",
      "Add",       "Mul"};
  for (int hops = 0; hops < 8 && v != kNoValue; ++hops) {
    const int32_t p = g.value(v).producer;
    if (p < 0) return false;
    const Node& node = g.nodes[p];
    if (node.op_type == "Conv" || node.op_type == "ConvTranspose" || node.op_type == "MaxPool" ||
        node.op_type == "AveragePool")
      return true;
    if (!kPassThrough.count(node.op_type) || node.inputs.empty()) return false;
    v = node.inputs[0];
  }
  return false;
}

// f32 [N, C, spatial...] reduced over exactly the spatial axes. A 3-D
// [N, C, L] only when a conv or pool made it: [B, S, D] reduced over D is
// how RMSNorm exports (x.pow(2).mean(-1)), and the row-reduction template
// fuses that mean with the norm's other ops, which a pool node would cut
// apart (three kernels a norm instead of one).
bool IsGlobalPoolReduction(const Graph& g, const Node& n) {
  if ((n.op_type != "ReduceMean" && n.op_type != "ReduceMax") || !n.domain.empty() ||
      n.inputs.empty() || n.outputs.size() != 1 || n.outputs[0] == kNoValue)
    return false;
  const TensorType& x = g.type(n.inputs[0]);
  if (x.dtype != DataType::kFloat32 || x.rank() < 3) return false;
  if (x.rank() == 3 && !ComesFromConvOrPool(g, n.inputs[0])) return false;
  std::optional<std::vector<int64_t>> axes = ReducedAxes(g, n);
  if (!axes) return false;
  for (int64_t& a : *axes)
    if (a < 0) a += x.rank();
  std::sort(axes->begin(), axes->end());
  std::vector<int64_t> spatial(static_cast<size_t>(x.rank() - 2));
  std::iota(spatial.begin(), spatial.end(), 2);
  return *axes == spatial;
}

// The pool in the reduction's place; without keepdims a Flatten drops the
// pooled 1-sized axes ([N, C, 1, 1] -> [N, C], as the reduction gives).
void Rewrite(Graph& g, const Node& n, std::vector<Node>& out) {
  const std::string pool = n.op_type == "ReduceMean" ? "GlobalAveragePool" : "GlobalMaxPool";
  const ValueId y = n.outputs[0];
  const Result<int64_t> keepdims = n.attrs.GetInt("keepdims", 1);
  if (!keepdims.ok() || *keepdims != 0) {
    out.push_back({pool, "", n.name, {n.inputs[0]}, {y}, {}});
    return;
  }
  TensorType pooled_type = g.type(n.inputs[0]);  // a copy: AddValue may move the values
  const ValueId pooled = g.AddValue(g.UniqueName(g.value(y).name + "_pooled"));
  std::fill(pooled_type.dims.begin() + 2, pooled_type.dims.end(), 1);  // [N, C, 1, ...]
  if (!pooled_type.symbols.empty())
    std::fill(pooled_type.symbols.begin() + 2, pooled_type.symbols.end(), std::string());
  g.value(pooled).type = pooled_type;
  g.value(pooled).has_type = true;
  Attributes flatten;
  flatten.Set("axis", int64_t{1});
  out.push_back({pool, "", n.name, {n.inputs[0]}, {pooled}, {}});
  out.push_back({"Flatten", "", n.name.empty() ? "" : n.name + "_flatten", {pooled}, {y}, flatten});
}

}  // namespace

Result<int> ReduceToGlobalPool(Graph& graph) {
  // Decided before any node moves: the decision reads the producers.
  std::vector<char> pool(graph.nodes.size(), 0);
  int rewritten = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    rewritten += pool[i] = IsGlobalPoolReduction(graph, graph.nodes[i]);
  if (rewritten == 0) return 0;
  std::vector<Node> nodes;
  nodes.reserve(graph.nodes.size() + rewritten);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (pool[i])
      Rewrite(graph, graph.nodes[i], nodes);
    else
      nodes.push_back(std::move(graph.nodes[i]));
  }
  graph.nodes = std::move(nodes);
  // The new nodes stand where the old one stood: the order stays
  // topological, and the producers after it move down.
  graph.IndexProducers();
  return rewritten;
}

}  // namespace fusetune::graph
