#include "fusion_space/match_pool.h"

#include <fmt/format.h>

#include "fusion_space/match_util.h"
#include "graph/conv_geometry.h"

namespace fusetune::fusion_space {

namespace {

kernels::PoolKind KindOf(const std::string& op) {
  if (op == "MaxPool") return kernels::PoolKind::kMax;
  if (op == "AveragePool") return kernels::PoolKind::kAverage;
  if (op == "GlobalMaxPool") return kernels::PoolKind::kGlobalMax;
  return kernels::PoolKind::kGlobalAverage;
}

kernels::PoolDesc DescOf(kernels::PoolKind kind, const graph::PoolGeometry& p) {
  kernels::PoolDesc d;
  d.kind = kind;
  d.batch = p.batch;
  d.channels = p.channels;
  d.in_h = p.in_h;
  d.in_w = p.in_w;
  d.out_h = p.out_h;
  d.out_w = p.out_w;
  d.kernel_h = p.kernel_h;
  d.kernel_w = p.kernel_w;
  d.stride_h = p.stride_h;
  d.stride_w = p.stride_w;
  d.dilation_h = p.dilation_h;
  d.dilation_w = p.dilation_w;
  d.pad_top = p.pad_top;
  d.pad_left = p.pad_left;
  d.pad_bottom = p.pad_bottom;
  d.pad_right = p.pad_right;
  d.count_include_pad = p.count_include_pad;
  return d;
}

}  // namespace

bool IsPoolOp(const graph::Node& node) {
  return node.domain.empty() &&
         (node.op_type == "MaxPool" || node.op_type == "AveragePool" ||
          node.op_type == "GlobalMaxPool" || node.op_type == "GlobalAveragePool");
}

bool IsGlobalPoolOp(const graph::Node& node) {
  return node.domain.empty() &&
         (node.op_type == "GlobalMaxPool" || node.op_type == "GlobalAveragePool");
}

bool IsConvEndPoolOp(const graph::Node& node) {
  return IsGlobalPoolOp(node) || (node.domain.empty() && node.op_type == "MaxPool");
}

FusionDecision MatchPoolInstance(const graph::Graph& g, const Dataflow& flow,
                                 std::span<const int32_t> group, KernelInstance* k) {
  (void)flow;  // one node: nothing to check for convexity
  if (group.size() != 1)
    return FusionDecision::Forbid("a pool kernel computes one pool node, not a fused group");
  const int32_t n = group[0];
  const graph::Node& node = g.nodes[n];
  if (!IsPoolOp(node)) return FusionDecision::Forbid(fmt::format("node {} is not a pool", n));
  int outputs = 0;
  for (graph::ValueId v : node.outputs) outputs += v != graph::kNoValue;
  if (outputs != 1 || node.outputs[0] == graph::kNoValue)
    return FusionDecision::Forbid(fmt::format("node {} (MaxPool) has an Indices output", n));
  const graph::ValueId x = node.inputs[0], y = node.outputs[0];
  if (g.type(x).dtype != graph::DataType::kFloat32 || g.type(y).dtype != graph::DataType::kFloat32)
    return FusionDecision::Forbid(fmt::format("node {} ({}) is not f32", n, node.op_type));
  Result<graph::PoolGeometry> geometry = graph::ResolvePoolGeometry(node, g.type(x).dims);
  if (!geometry.ok())
    return FusionDecision::Forbid(
        fmt::format("node {} ({}): {}", n, node.op_type, geometry.error().message()));

  *k = KernelInstance{};
  k->kind = KernelTemplate::kPool;
  k->nodes = {n};
  kernels::PoolDesc& d = k->pool;
  d = DescOf(KindOf(node.op_type), *geometry);
  if (Status s = kernels::ValidatePoolShape(d); !s.ok())
    return FusionDecision::Forbid(
        fmt::format("node {} ({}): {}", n, node.op_type, s.error().message()));
  d.x = k->AddSlot(x);
  d.y = k->AddSlot(y);
  k->outputs = {y};
  std::vector<char> inside(g.nodes.size(), 0);
  inside[n] = 1;
  k->inputs = GroupInputs(g, k->nodes, inside);
  k->summary = "pool " + d.ToString();
  return FusionDecision::Allow();
}

}  // namespace fusetune::fusion_space
