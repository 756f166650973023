#include "fusion_space/match.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "fusion_space/match_conv.h"
#include "fusion_space/match_conv_chain.h"
#include "fusion_space/match_gemm.h"
#include "fusion_space/match_pool.h"
#include "fusion_space/match_tile.h"
#include "fusion_space/match_util.h"

namespace fusetune::fusion_space {

bool IsFusibleOp(const graph::Node& node) {
  static const std::set<std::string> kOps = {
      "Add",        "Sub",        "Mul",       "Div",       "Max",         "Min",
      "Pow",        "Neg",        "Abs",       "Exp",       "Log",         "Sqrt",
      "Reciprocal", "Tanh",       "Erf",       "Sigmoid",   "Relu",        "Identity",
      "ReduceSum",  "ReduceMean", "ReduceMax", "ReduceMin", "Softmax",     "LayerNormalization",
      "MatMul",     "Gemm",       "Reshape",   "Transpose", "Where",       "Slice",
      "Concat",     "Split",      "Conv",      "Clip",      "HardSigmoid", "HardSwish"};
  return node.domain.empty() && kOps.count(node.op_type) != 0;
}

namespace {

KernelInstance ReferenceInstance(const graph::Graph& g, int32_t node) {
  KernelInstance k;
  k.kind = KernelTemplate::kReference;
  k.nodes = {node};
  std::vector<char> inside(g.nodes.size(), 0);
  inside[node] = 1;
  k.inputs = GroupInputs(g, k.nodes, inside);
  for (graph::ValueId v : g.nodes[node].outputs)
    if (v != graph::kNoValue) k.outputs.push_back(v);
  k.summary = "reference " + g.nodes[node].op_type;
  return k;
}

}  // namespace

GroupMatch MatchGroup(const graph::Graph& g, const Dataflow& flow, std::span<const int32_t> group) {
  GroupMatch m;
  if (group.empty()) {
    m.decision = FusionDecision::Forbid("the group is empty");
    return m;
  }
  int matmuls = 0, softmaxes = 0, convs = 0, end_pools = 0;
  for (int32_t n : group) {
    const std::string& op = g.nodes[n].op_type;
    matmuls += op == "MatMul" || op == "Gemm";
    softmaxes += op == "Softmax";
    convs += op == "Conv";
    end_pools += IsConvEndPoolOp(g.nodes[n]);
    // A global pool or MaxPool joins a group only at the end of a conv's chain (match_conv).
    if (group.size() > 1 && !IsFusibleOp(g.nodes[n]) && !IsConvEndPoolOp(g.nodes[n])) {
      m.decision = FusionDecision::Forbid(
          fmt::format("node {} ({}) has no fused kernel", n, g.nodes[n].op_type));
      return m;
    }
  }
  FusionDecision d = FusionDecision::Forbid("no template");
  if (group.size() == 1 && IsPoolOp(g.nodes[group[0]])) {
    d = MatchPoolInstance(g, flow, group, &m.instance);
  } else if (convs > 1) {
    d = MatchConvChainInstance(g, flow, group, &m.instance);
  } else if (convs > 0) {
    d = MatchConvInstance(g, flow, group, &m.instance);
  } else if (end_pools > 0) {
    d = FusionDecision::Forbid("a pool fuses only into the Conv kernel before it");
  } else if (matmuls == 0) {
    d = MatchTileInstance(g, flow, group, &m.instance);
  } else if (softmaxes == 0) {
    d = MatchGemmInstance(g, flow, group, &m.instance);
  } else {
    d = MatchAttentionInstance(g, flow, group, &m.instance);
  }
  if (!d && group.size() == 1) {
    m.instance = ReferenceInstance(g, group[0]);
    d = FusionDecision::Allow();
  }
  m.decision = d;
  return m;
}

}  // namespace fusetune::fusion_space
