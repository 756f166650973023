// LowerBatchNorm: an inference-mode BatchNormalization that FoldBatchNorm
// left (its input is not a foldable Conv/Gemm/MatMul output) becomes
// Mul(x, a) -> Add(., c) by per-channel constants shaped [C, 1, ..., 1],
// a = scale / sqrt(var + eps) and c = B - mean * a (computed in double,
// rounded once): ops the elementwise tile programs fuse with their
// neighbours, where a BatchNormalization node runs only on the reference
// kernel. The Add produces the BN's output value, so names never change.
#include <cmath>

#include "graph/batchnorm_form.h"
#include "graph/passes.h"

namespace fusetune::graph {
namespace {

// The BNs this pass rewrites: inference form, per-channel (spatial) statistics
// that are constants, and an f32 input of rank >= 2 with a known channel
// count. Other dtypes stay BNs: in f16 the product would be rounded before
// the Add, where the BN rounds once.
bool IsLowerableBn(const Graph& g, const Node& bn) {
  if (!IsInferenceBatchNorm(bn)) return false;
  const ValueId x = bn.inputs[0];
  if (x == kNoValue || g.type(x).dtype != DataType::kFloat32 || g.type(x).rank() < 2) return false;
  const int64_t c = g.type(x).dims[1];
  if (c <= 0) return false;
  for (size_t i = 1; i < 5; ++i)
    if (!IsFloatConstant(g, bn.inputs[i]) || g.value(bn.inputs[i]).constant->numel() != c)
      return false;
  return true;
}

// The per-channel factor and offset, as f32 tensors shaped [C, 1, ..., 1]
// (rank - 1 axes) so that they broadcast along axis 1 of x.
Result<std::pair<Tensor, Tensor>> ChannelConstants(const Graph& g, const Node& bn) {
  FT_ASSIGN_OR_RETURN(const float eps, bn.attrs.GetFloat("epsilon", 1e-5f));
  const Tensor& scale = *g.value(bn.inputs[1]).constant;
  const Tensor& shift = *g.value(bn.inputs[2]).constant;
  const Tensor& mean = *g.value(bn.inputs[3]).constant;
  const Tensor& var = *g.value(bn.inputs[4]).constant;
  const TensorType& xt = g.type(bn.inputs[0]);
  Dims dims(static_cast<size_t>(xt.rank() - 1), 1);
  dims[0] = xt.dims[1];
  Tensor a(DataType::kFloat32, dims), c(DataType::kFloat32, dims);
  for (int64_t i = 0; i < dims[0]; ++i) {
    const double ai = scale.GetAsDouble(i) / std::sqrt(var.GetAsDouble(i) + double{eps});
    a.data<float>()[i] = static_cast<float>(ai);
    c.data<float>()[i] = static_cast<float>(shift.GetAsDouble(i) - mean.GetAsDouble(i) * ai);
  }
  return std::pair{std::move(a), std::move(c)};
}

// Appends Mul and Add for `bn` to `out`; the new intermediate value has x's type.
Status Lower(Graph& g, const Node& bn, std::vector<Node>& out) {
  FT_ASSIGN_OR_RETURN(auto constants, ChannelConstants(g, bn));
  const ValueId y = bn.outputs[0];
  const std::string base = g.value(y).name;
  const ValueId a = g.AddConstant(g.UniqueName(base + "_bn_scale"), std::move(constants.first));
  const ValueId c = g.AddConstant(g.UniqueName(base + "_bn_shift"), std::move(constants.second));
  const ValueId scaled = g.AddValue(g.UniqueName(base + "_bn_scaled"));
  g.value(scaled).type = g.type(bn.inputs[0]);
  g.value(scaled).has_type = true;
  out.push_back(
      {"Mul", "", bn.name.empty() ? "" : bn.name + "_mul", {bn.inputs[0], a}, {scaled}, {}});
  out.push_back({"Add", "", bn.name.empty() ? "" : bn.name + "_add", {scaled, c}, {y}, {}});
  return Status::Ok();
}

}  // namespace

Result<int> LowerBatchNorm(Graph& graph) {
  int lowered = 0;
  for (const Node& n : graph.nodes) lowered += IsLowerableBn(graph, n);
  if (lowered == 0) return 0;
  std::vector<Node> nodes;
  nodes.reserve(graph.nodes.size() + lowered);
  for (Node& n : graph.nodes) {
    if (IsLowerableBn(graph, n)) {
      FT_RETURN_IF_ERROR(Lower(graph, n, nodes));
    } else {
      nodes.push_back(std::move(n));
    }
  }
  graph.nodes = std::move(nodes);
  // The new nodes stand where the old one stood: the order stays
  // topological, and the producers after it move down.
  graph.IndexProducers();
  return lowered;
}

}  // namespace fusetune::graph
