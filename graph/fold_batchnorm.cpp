// FoldBatchNorm: an inference-mode BatchNormalization after a Conv, Gemm or
// 2-D MatMul with constant weights and statistics is merged into that
// product's weights and bias, as eval-mode exports and inference runtimes
// do. The BN's output value is kept (the producer, or for MatMul the Add of
// the new bias, now produces it), so graph output names never change.
#include <fmt/format.h>

#include <cmath>

#include "graph/batchnorm_form.h"
#include "graph/passes.h"

namespace fusetune::graph {
namespace {

bool IsGraphOutput(const Graph& g, ValueId v) {
  for (ValueId o : g.outputs)
    if (o == v) return true;
  return false;
}

bool HasInput(const Node& n, size_t i) { return n.inputs.size() > i && n.inputs[i] != kNoValue; }

// The BN as a per-channel affine map y = a * x + c.
struct ChannelAffine {
  std::vector<double> a, c;
};

// How a product's weight holds the BN's channels: along its rows (Conv's
// [M, C/g, kh, kw], Gemm's B with transB=1) or its columns (B [K, M]).
struct Host {
  int32_t node = -1;
  bool channel_rows = true;
};

// The inference-mode BN checks that do not depend on the producer.
bool IsFoldableBn(const Graph& g, const ValueUses& uses, const Node& bn) {
  if (!IsInferenceBatchNorm(bn)) return false;
  const ValueId x = bn.inputs[0];
  if (x == kNoValue || IsGraphOutput(g, x) || uses[x].size() != 1) return false;
  for (size_t i = 1; i < 5; ++i)
    if (!IsFloatConstant(g, bn.inputs[i])) return false;
  return g.value(x).producer >= 0;
}

// Gemm's C, when it is one value or one per output column (so that the new
// bias is a vector of M): absent, or [], [1], [M], [1, 1], [1, M].
bool IsRowBias(const Graph& g, const Node& gemm, int64_t m) {
  if (!HasInput(gemm, 2)) return true;
  if (!IsFloatConstant(g, gemm.inputs[2])) return false;
  const Dims& d = g.value(gemm.inputs[2]).constant->dims();
  if (d.size() > 2 || (d.size() == 2 && d[0] != 1)) return false;
  return d.empty() || d.back() == 1 || d.back() == m;
}

// The product that BN node `bn` can fold into, or node -1.
Host FoldableHost(const Graph& g, const ValueUses& uses, const Node& bn) {
  if (!IsFoldableBn(g, uses, bn)) return {};
  const int32_t p = g.value(bn.inputs[0]).producer;
  const Node& n = g.nodes[p];
  if (!n.domain.empty() || n.outputs.size() != 1 || !HasInput(n, 1) ||
      !IsFloatConstant(g, n.inputs[1]))
    return {};
  const Tensor& w = *g.value(n.inputs[1]).constant;
  const int64_t m = g.type(bn.inputs[0]).rank() >= 2 ? g.type(bn.inputs[0]).dims[1] : -1;
  for (size_t i = 1; i < 5; ++i)
    if (g.value(bn.inputs[i]).constant->numel() != m) return {};
  Host h{p, true};
  if (n.op_type == "Conv") {
    if (w.rank() < 1 || w.dims()[0] != m) return {};
    if (HasInput(n, 2) &&
        (!IsFloatConstant(g, n.inputs[2]) || g.value(n.inputs[2]).constant->numel() != m))
      return {};
    return h;
  }
  // A 2-D product [N, M]: BN's channel axis 1 is the weight's output axis.
  if (g.type(bn.inputs[0]).rank() != 2 || w.rank() != 2) return {};
  if (n.op_type == "Gemm") {
    const auto trans_b = n.attrs.GetInt("transB", 0);
    if (!trans_b.ok() || !IsRowBias(g, n, m)) return {};
    h.channel_rows = *trans_b != 0;
    return (h.channel_rows ? w.dims()[0] : w.dims()[1]) == m ? h : Host{};
  }
  if (n.op_type == "MatMul" && g.type(n.inputs[0]).rank() == 2 && w.dims()[1] == m) {
    h.channel_rows = false;
    return h;
  }
  return {};
}

Result<ChannelAffine> BnAffine(const Graph& g, const Node& bn) {
  FT_ASSIGN_OR_RETURN(const float eps, bn.attrs.GetFloat("epsilon", 1e-5f));
  const Tensor& scale = *g.value(bn.inputs[1]).constant;
  const Tensor& shift = *g.value(bn.inputs[2]).constant;
  const Tensor& mean = *g.value(bn.inputs[3]).constant;
  const Tensor& var = *g.value(bn.inputs[4]).constant;
  ChannelAffine f;
  for (int64_t c = 0; c < scale.numel(); ++c) {
    const double a = scale.GetAsDouble(c) / std::sqrt(var.GetAsDouble(c) + double{eps});
    f.a.push_back(a);
    f.c.push_back(shift.GetAsDouble(c) - mean.GetAsDouble(c) * a);
  }
  return f;
}

// W scaled per channel (rows or columns), in double, rounded to W's dtype.
Tensor ScaleChannels(const Tensor& w, const std::vector<double>& a, bool rows) {
  const int64_t m = static_cast<int64_t>(a.size());
  const int64_t inner = rows ? (m == 0 ? 0 : w.numel() / m) : m;
  Tensor out(DataType::kFloat64, w.dims());
  double* po = out.data<double>();
  for (int64_t i = 0; i < w.numel(); ++i)
    po[i] = w.GetAsDouble(i) * a[rows ? i / inner : i % inner];
  return out.CastTo(w.dtype());
}

// The product's bias b (one value or one per channel, 0 when absent) times
// beta, through the BN: a * beta * b + c.
Tensor FoldedBias(const Graph& g, const Node& n, const ChannelAffine& f, double beta,
                  DataType dtype) {
  const int64_t m = static_cast<int64_t>(f.a.size());
  const Tensor* b = HasInput(n, 2) ? g.value(n.inputs[2]).constant.get() : nullptr;
  Tensor out(DataType::kFloat64, {m});
  for (int64_t i = 0; i < m; ++i) {
    const double bi = b == nullptr ? 0.0 : b->GetAsDouble(b->numel() == 1 ? 0 : i);
    out.data<double>()[i] = f.a[i] * beta * bi + f.c[i];
  }
  return out.CastTo(dtype);
}

// Rewrites product `h` to compute BN(product): new weight and bias
// constants (the old ones are left for DCE). Returns whether the BN node
// is now dead (Conv, Gemm) rather than turned into the bias Add (MatMul).
Result<bool> FoldInto(Graph& g, Host h, int32_t bn_index) {
  const Node bn = g.nodes[bn_index];
  FT_ASSIGN_OR_RETURN(const ChannelAffine f, BnAffine(g, bn));
  const Node& n = g.nodes[h.node];
  const Tensor& w = *g.value(n.inputs[1]).constant;
  double beta = 1;
  if (n.op_type == "Gemm") {
    FT_ASSIGN_OR_RETURN(const float b, n.attrs.GetFloat("beta", 1.0f));
    beta = b;
  }
  const ValueId new_w = g.AddConstant(g.UniqueName(g.value(n.inputs[1]).name + "_bnfolded"),
                                      ScaleChannels(w, f.a, h.channel_rows));
  const ValueId new_b = g.AddConstant(g.UniqueName(g.value(bn.outputs[0]).name + "_bias"),
                                      FoldedBias(g, n, f, beta, w.dtype()));
  Node& node = g.nodes[h.node];  // AddConstant does not move nodes
  node.inputs[1] = new_w;
  if (node.op_type == "MatMul") {
    // MatMul has no bias: the BN becomes the Add of one.
    Node& add = g.nodes[bn_index];
    add.op_type = "Add";
    add.inputs = {add.inputs[0], new_b};
    add.outputs.resize(1);
    add.attrs = Attributes();
    return false;
  }
  node.inputs.resize(3);
  node.inputs[2] = new_b;
  node.attrs.Erase("beta");
  // The product takes over the BN's output value; its own output is dropped.
  const ValueId old_out = node.outputs[0], out = bn.outputs[0];
  node.outputs[0] = out;
  g.value(out).producer = h.node;
  g.value(out).producer_output = 0;
  g.value(old_out).producer = -1;
  return true;
}

}  // namespace

Result<int> FoldBatchNorm(Graph& graph) {
  const ValueUses uses = graph.Consumers();
  std::vector<bool> dead(graph.nodes.size(), false);
  int folded = 0;
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n) {
    if (graph.nodes[n].op_type != "BatchNormalization") continue;
    const Host host = FoldableHost(graph, uses, graph.nodes[n]);
    if (host.node < 0) continue;
    FT_ASSIGN_OR_RETURN(const bool bn_dead, FoldInto(graph, host, n));
    dead[n] = bn_dead;
    ++folded;
  }
  if (folded) graph.Compact(dead);
  return folded;
}

}  // namespace fusetune::graph
