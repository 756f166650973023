#include "fusion_space/match_conv.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "fusion_space/match_epilogue.h"
#include "fusion_space/match_pool.h"
#include "fusion_space/match_util.h"
#include "graph/conv_geometry.h"

namespace fusetune::fusion_space {

kernels::ConvShape ConvShapeOf(const graph::ConvGeometry& c) {
  kernels::ConvShape s;
  s.batch = c.batch;
  s.in_channels = c.in_channels;
  s.in_h = c.in_h;
  s.in_w = c.in_w;
  s.out_channels = c.out_channels;
  s.out_h = c.out_h;
  s.out_w = c.out_w;
  s.kernel_h = c.kernel_h;
  s.kernel_w = c.kernel_w;
  s.stride_h = c.stride_h;
  s.stride_w = c.stride_w;
  s.pad_top = c.pad_top;
  s.pad_left = c.pad_left;
  s.dilation_h = c.dilation_h;
  s.dilation_w = c.dilation_w;
  s.groups = c.groups;
  return s;
}

namespace {

using kernels::EpilogueKind;
using kernels::EpilogueOp;

// The one value downstream of `y` inside the group that is read outside it.
FusionDecision LeavingValue(const graph::Graph& g, const Dataflow& flow,
                            const std::vector<char>& inside, graph::ValueId y,
                            graph::ValueId* leaving) {
  std::vector<graph::ValueId> found, stack{y};
  std::set<graph::ValueId> seen{y};
  while (!stack.empty()) {
    const graph::ValueId v = stack.back();
    stack.pop_back();
    if (flow.LeavesGroup(v, inside)) found.push_back(v);
    for (auto [node, slot] : flow.uses(v))
      if (inside[node])
        for (graph::ValueId out : g.nodes[node].outputs)
          if (out != graph::kNoValue && seen.insert(out).second) stack.push_back(out);
  }
  if (found.size() != 1)
    return FusionDecision::Forbid(fmt::format(
        "the chain after the Conv has {} values read outside the group; a conv writes one",
        found.size()));
  if (g.type(found[0]).dims != g.type(y).dims)
    return FusionDecision::Forbid("the chain after the Conv changes the shape");
  *leaving = found[0];
  return FusionDecision::Allow();
}

// A pooled conv's tiles hold whole output planes (kernels/conv.h): beyond
// 1024 positions (32x32) a plane of 16 channels outgrows the local buffers
// of the targets modelled once the input band or im2col panel is added, so
// larger maps keep the pool as a kernel of its own. CNNs pool 7x7 maps.
constexpr int64_t kMaxPooledPositions = 1024;

// A MaxPool ending a conv kernel: one output (no Indices), dilation 1, a
// window the conv kernel's tiles can hold (kernels::ConvMaxPool).
FusionDecision ResolveMaxPool(const graph::Graph& g, int32_t pool, const kernels::ConvShape& shape,
                              kernels::ConvMaxPool* out) {
  const graph::Node& node = g.nodes[pool];
  int outputs = 0;
  for (graph::ValueId v : node.outputs) outputs += v != graph::kNoValue;
  if (outputs != 1)
    return FusionDecision::Forbid(
        fmt::format("node {} (MaxPool) has an Indices output; a pooled conv writes values", pool));
  Result<graph::PoolGeometry> p = graph::ResolvePoolGeometry(node, g.type(node.inputs[0]).dims);
  if (!p.ok())
    return FusionDecision::Forbid(fmt::format("node {} (MaxPool): {}", pool, p.error().message()));
  if (p->dilation_h != 1 || p->dilation_w != 1)
    return FusionDecision::Forbid(
        fmt::format("node {} (MaxPool) has dilations; a pooled conv's window has none", pool));
  if (p->in_h != shape.out_h || p->in_w != shape.out_w)
    return FusionDecision::Forbid(
        fmt::format("node {} (MaxPool) pools {}x{}, the conv writes {}x{}", pool, p->in_h, p->in_w,
                    shape.out_h, shape.out_w));
  *out = kernels::ConvMaxPool{p->kernel_h, p->kernel_w, p->stride_h, p->stride_w,
                              p->pad_top,  p->pad_left, p->out_h,    p->out_w};
  return FusionDecision::Allow();
}

// The pool `pool` ends the chain whose result `leaving` is: it reads that
// value, which nothing else reads (only the pooled values leave).
FusionDecision CheckEndPool(const graph::Graph& g, const Dataflow& flow,
                            const std::vector<char>& inside, int32_t pool, graph::ValueId leaving,
                            const kernels::ConvShape& shape) {
  const graph::Node& node = g.nodes[pool];
  if (node.inputs.empty() || node.inputs[0] != leaving)
    return FusionDecision::Forbid(
        fmt::format("node {} ({}) does not read the end of the Conv's chain", pool, node.op_type));
  if (flow.LeavesGroup(leaving, inside))
    return FusionDecision::Forbid(fmt::format(
        "the value node {} ({}) pools is read outside the group too; a pooled conv writes only "
        "the pooled values",
        pool, node.op_type));
  if (node.outputs.empty() || node.outputs[0] == graph::kNoValue ||
      g.type(node.outputs[0]).dtype != graph::DataType::kFloat32)
    return FusionDecision::Forbid(fmt::format("node {} ({}) is not f32", pool, node.op_type));
  if (IsGlobalPoolOp(node) && shape.pixels() > kMaxPooledPositions)
    return FusionDecision::Forbid(fmt::format(
        "node {} ({}) pools {} positions per plane; a pooled conv tile holds at most {}", pool,
        node.op_type, shape.pixels(), kMaxPooledPositions));
  return FusionDecision::Allow();
}

}  // namespace

FusionDecision ResolveConvNode(const graph::Graph& g, int32_t n, kernels::ConvShape* shape) {
  const graph::Node& node = g.nodes[n];
  if (g.type(node.outputs[0]).dtype != graph::DataType::kFloat32 ||
      g.type(node.inputs[0]).dtype != graph::DataType::kFloat32)
    return FusionDecision::Forbid(fmt::format("node {} (Conv) is not f32", n));
  Result<graph::ConvGeometry> geometry =
      graph::ResolveConvGeometry(node, g.type(node.inputs[0]).dims, g.type(node.inputs[1]).dims);
  if (!geometry.ok())
    return FusionDecision::Forbid(fmt::format("node {} (Conv): {}", n, geometry.error().message()));
  *shape = ConvShapeOf(*geometry);
  return FusionDecision::Allow();
}

namespace {

// The group's one Conv and, optionally, one pool that ends it.
FusionDecision FindConvAndPool(const graph::Graph& g, std::span<const int32_t> group,
                               int32_t* conv_out, int32_t* pool_out) {
  int32_t conv = -1, pool = -1;
  for (int32_t n : group) {
    if (IsConvEndPoolOp(g.nodes[n])) {
      if (pool >= 0)
        return FusionDecision::Forbid(
            fmt::format("nodes {} and {} are both pools; a conv kernel ends with one", pool, n));
      pool = n;
      continue;
    }
    if (g.nodes[n].op_type != "Conv") continue;
    if (conv >= 0)
      return FusionDecision::Forbid(fmt::format(
          "nodes {} and {} are both convolutions; a conv kernel computes one", conv, n));
    conv = n;
  }
  if (conv < 0) return FusionDecision::Forbid("the group has no Conv");
  *conv_out = conv;
  *pool_out = pool;
  return FusionDecision::Allow();
}

// Where the epilogue chain from `y` ends: the value that leaves the group,
// or with a pool, the pool's input (the chain is walked as if the pool were
// outside, which `inside` says on return).
FusionDecision EpilogueEnd(const graph::Graph& g, const Dataflow& flow, std::vector<char>& inside,
                           graph::ValueId y, int32_t pool, const kernels::ConvShape& shape,
                           graph::ValueId* end) {
  if (pool < 0) return LeavingValue(g, flow, inside, y, end);
  inside[pool] = 0;
  FT_RETURN_IF_DECISION(LeavingValue(g, flow, inside, y, end));
  inside[pool] = 1;
  const FusionDecision d = CheckEndPool(g, flow, inside, pool, *end, shape);
  inside[pool] = 0;
  return d;
}

std::string PoolSummary(const kernels::ConvDesc& d) {
  if (d.max_pool.active()) return " +" + d.max_pool.ToString();
  if (d.global_pool != kernels::ConvGlobalPool::kNone)
    return std::string(" +") + kernels::ConvGlobalPoolName(d.global_pool) + "_pool";
  return "";
}

}  // namespace

FusionDecision MatchConvInstance(const graph::Graph& g, const Dataflow& flow,
                                 std::span<const int32_t> group, KernelInstance* k) {
  FT_RETURN_IF_DECISION(flow.CheckConvex(group));
  std::vector<char> inside(g.nodes.size(), 0);
  for (int32_t n : group) inside[n] = 1;
  int32_t conv = -1, pool = -1;
  FT_RETURN_IF_DECISION(FindConvAndPool(g, group, &conv, &pool));
  const graph::Node& node = g.nodes[conv];
  const graph::ValueId y = node.outputs[0];
  kernels::ConvShape shape;
  FT_RETURN_IF_DECISION(ResolveConvNode(g, conv, &shape));
  graph::ValueId leaving = graph::kNoValue;
  FT_RETURN_IF_DECISION(EpilogueEnd(g, flow, inside, y, pool, shape, &leaving));

  *k = KernelInstance{};
  k->kind = KernelTemplate::kConv;
  k->nodes.assign(group.begin(), group.end());
  std::sort(k->nodes.begin(), k->nodes.end());
  kernels::ConvDesc& d = k->conv;
  d.shape = shape;
  d.x = k->AddSlot(node.inputs[0]);
  d.w = k->AddSlot(node.inputs[1]);
  if (node.inputs.size() > 2 && node.inputs[2] != graph::kNoValue)
    d.bias = k->AddSlot(node.inputs[2]);
  // N is the batch, C the rows and the spatial dims the columns of a tile.
  EpilogueBuilder builder(g, inside, y, EpilogueFrame{1, 1}, k);
  FT_RETURN_IF_DECISION(builder.Build(leaving, &d.epilogue));
  std::set<int32_t> covered(builder.visited());
  covered.insert(conv);
  if (pool >= 0) covered.insert(pool);
  if (covered.size() != group.size())
    return FusionDecision::Forbid(
        "the group holds nodes that are neither the Conv nor on its epilogue chain");
  for (const EpilogueOp& op : d.epilogue)
    if (kernels::IsRowNorm(op.kind))
      return FusionDecision::Forbid("a row norm after a Conv does not fit a conv tile");
  AdoptChannelBias(&d.epilogue, &d.bias);
  if (pool >= 0) {
    // Y is the pooled [N, C, 1, 1] or [N, C, PH, PW]: the pool's output leaves instead.
    inside[pool] = 1;
    leaving = g.nodes[pool].outputs[0];
    if (g.nodes[pool].op_type == "MaxPool")
      FT_RETURN_IF_DECISION(ResolveMaxPool(g, pool, shape, &d.max_pool));
    else
      d.global_pool = g.nodes[pool].op_type == "GlobalMaxPool" ? kernels::ConvGlobalPool::kMax
                                                               : kernels::ConvGlobalPool::kAverage;
  }
  d.y = k->AddSlot(leaving);
  k->outputs = {leaving};
  k->inputs = GroupInputs(g, k->nodes, inside);
  k->summary = fmt::format("conv {}{}{}{}", d.shape.ToString(), d.bias ? " +bias" : "",
                           EpilogueSummary(d.epilogue), PoolSummary(d));
  return FusionDecision::Allow();
}

}  // namespace fusetune::fusion_space
