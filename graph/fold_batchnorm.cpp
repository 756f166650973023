// FoldBatchNorm: Conv -> BatchNormalization (inference) with constant
// weights and statistics becomes one Conv with rescaled weights and a bias,
// as eval-mode exports and inference runtimes do. The BN's output value is
// kept (the Conv now produces it), so graph output names never change.
#include <fmt/format.h>

#include <cmath>

#include "graph/passes.h"

namespace fusetune::graph {
namespace {

bool IsFloatConstant(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.value(v).is_constant()) return false;
  const DataType dt = g.value(v).constant->dtype();
  return dt == DataType::kFloat32 || dt == DataType::kFloat64 || dt == DataType::kFloat16 ||
         dt == DataType::kBFloat16;
}

bool IsGraphOutput(const Graph& g, ValueId v) {
  for (ValueId o : g.outputs)
    if (o == v) return true;
  return false;
}

// The Conv node index that BN node `bn` can fold into, or -1.
int32_t FoldableConv(const Graph& g, const ValueUses& uses, const Node& bn) {
  if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() != 5) return -1;
  for (size_t i = 1; i < bn.outputs.size(); ++i)
    if (bn.outputs[i] != kNoValue) return -1;  // training-mode outputs are read
  const auto training = bn.attrs.GetInt("training_mode", 0);
  const auto spatial = bn.attrs.GetInt("spatial", 1);
  if (!training.ok() || *training != 0 || !spatial.ok() || *spatial != 1) return -1;
  const ValueId x = bn.inputs[0];
  if (x == kNoValue || IsGraphOutput(g, x) || uses[x].size() != 1) return -1;
  const int32_t p = g.value(x).producer;
  if (p < 0) return -1;
  const Node& conv = g.nodes[p];
  if (conv.op_type != "Conv" || !conv.domain.empty() || conv.outputs.size() != 1) return -1;
  if (conv.inputs.size() < 2 || !IsFloatConstant(g, conv.inputs[1])) return -1;
  const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] != kNoValue;
  if (has_bias && !IsFloatConstant(g, conv.inputs[2])) return -1;
  for (size_t i = 1; i < 5; ++i)
    if (!IsFloatConstant(g, bn.inputs[i])) return -1;
  const Tensor& w = *g.value(conv.inputs[1]).constant;
  if (w.rank() < 1) return -1;
  const int64_t m = w.dims()[0];
  for (size_t i = 1; i < 5; ++i)
    if (g.value(bn.inputs[i]).constant->numel() != m) return -1;
  if (has_bias && g.value(conv.inputs[2]).constant->numel() != m) return -1;
  return p;
}

// Rewrites Conv `conv` to compute BN(Conv(x)): per output channel m,
// W'[m] = W[m] * a[m] and b'[m] = (b[m] - mean[m]) * a[m] + B[m], with
// a[m] = scale[m] / sqrt(var[m] + eps), in double and rounded once.
Status FoldInto(Graph& g, int32_t conv_index, const Node& bn) {
  FT_ASSIGN_OR_RETURN(const float eps, bn.attrs.GetFloat("epsilon", 1e-5f));
  const Node& conv = g.nodes[conv_index];
  const Tensor w = *g.value(conv.inputs[1]).constant;
  const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] != kNoValue;
  const Tensor* bias = has_bias ? g.value(conv.inputs[2]).constant.get() : nullptr;
  const Tensor& scale = *g.value(bn.inputs[1]).constant;
  const Tensor& shift = *g.value(bn.inputs[2]).constant;
  const Tensor& mean = *g.value(bn.inputs[3]).constant;
  const Tensor& var = *g.value(bn.inputs[4]).constant;
  const int64_t m = w.dims()[0];
  const int64_t per_channel = m == 0 ? 0 : w.numel() / m;
  Tensor w64(DataType::kFloat64, w.dims()), b64(DataType::kFloat64, {m});
  for (int64_t c = 0; c < m; ++c) {
    const double a = scale.GetAsDouble(c) / std::sqrt(var.GetAsDouble(c) + double{eps});
    for (int64_t k = 0; k < per_channel; ++k)
      w64.data<double>()[c * per_channel + k] = w.GetAsDouble(c * per_channel + k) * a;
    const double b = bias ? bias->GetAsDouble(c) : 0.0;
    b64.data<double>()[c] = (b - mean.GetAsDouble(c)) * a + shift.GetAsDouble(c);
  }
  const std::string w_name = g.UniqueName(g.value(conv.inputs[1]).name + "_bnfolded");
  const ValueId new_w = g.AddConstant(w_name, w64.CastTo(w.dtype()));
  const std::string b_name = g.UniqueName(g.value(bn.outputs[0]).name + "_bias");
  const ValueId new_b = g.AddConstant(b_name, b64.CastTo(w.dtype()));
  Node& node = g.nodes[conv_index];  // AddConstant does not move nodes
  node.inputs.resize(3);
  node.inputs[1] = new_w;
  node.inputs[2] = new_b;
  // The Conv takes over the BN's output value; its own output is dropped.
  const ValueId old_out = node.outputs[0], out = bn.outputs[0];
  node.outputs[0] = out;
  g.value(out).producer = conv_index;
  g.value(out).producer_output = 0;
  g.value(old_out).producer = -1;
  return Status::Ok();
}

}  // namespace

Result<int> FoldBatchNorm(Graph& graph) {
  const ValueUses uses = graph.Consumers();
  std::vector<bool> dead(graph.nodes.size(), false);
  int folded = 0;
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n) {
    const Node& bn = graph.nodes[n];
    if (bn.op_type != "BatchNormalization") continue;
    const int32_t conv = FoldableConv(graph, uses, bn);
    if (conv < 0) continue;
    const Node bn_copy = bn;  // FoldInto adds values, not nodes, but reads bn after
    FT_RETURN_IF_ERROR(FoldInto(graph, conv, bn_copy));
    dead[n] = true;
    ++folded;
  }
  if (folded) graph.Compact(dead);
  return folded;
}

}  // namespace fusetune::graph
