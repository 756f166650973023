#include "fusion_space/match_conv_chain.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <vector>

#include "fusion_space/match_conv.h"
#include "fusion_space/match_epilogue.h"
#include "fusion_space/match_util.h"
#include "graph/conv_geometry.h"

namespace fusetune::fusion_space {

namespace {

// One Conv of the chain with its resolved shape.
struct ChainConv {
  int32_t node = -1;
  kernels::ConvShape shape;
};

FusionDecision Resolve(const graph::Graph& g, int32_t n, ChainConv* c) {
  c->node = n;
  return ResolveConvNode(g, n, &c->shape);
}

bool Pointwise(const kernels::ConvShape& s) {
  return s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 && s.stride_w == 1 &&
         s.pad_top == 0 && s.pad_left == 0 && s.out_h == s.in_h && s.out_w == s.in_w &&
         s.groups == 1;
}

bool Depthwise(const kernels::ConvShape& s) {
  return s.groups == s.in_channels && s.groups == s.out_channels;
}

FusionDecision CheckRoles(const std::vector<ChainConv>& convs) {
  const ChainConv& project = convs.back();
  const ChainConv& dw = convs[convs.size() - 2];
  if (!Pointwise(project.shape))
    return FusionDecision::Forbid(fmt::format(
        "node {} (Conv) ends a conv chain but is not a 1x1 stride-1 conv of one group: {}",
        project.node, project.shape.ToString()));
  if (!Depthwise(dw.shape))
    return FusionDecision::Forbid(
        fmt::format("node {} (Conv) is not depthwise; a conv chain fuses a depthwise conv: {}",
                    dw.node, dw.shape.ToString()));
  if (convs.size() == 3 && !Pointwise(convs[0].shape))
    return FusionDecision::Forbid(fmt::format(
        "node {} (Conv) starts a conv chain but is not a 1x1 stride-1 conv of one group: {}",
        convs[0].node, convs[0].shape.ToString()));
  return FusionDecision::Allow();
}

// The activations between conv `from`'s output and conv `to`'s input; a
// per-channel add first (a conv without its bias) becomes *bias.
FusionDecision StageActivations(const graph::Graph& g, const std::vector<char>& inside,
                                int32_t from, int32_t to, KernelInstance* k,
                                std::vector<kernels::EpilogueOp>* ops, const float** bias,
                                std::set<int32_t>* covered) {
  EpilogueBuilder builder(g, inside, g.nodes[from].outputs[0], EpilogueFrame{1, 1}, k);
  if (FusionDecision d = builder.Build(g.nodes[to].inputs[0], ops); !d)
    return FusionDecision::Forbid(
        fmt::format("node {} (Conv) does not read node {} (Conv) through activations: {}", to, from,
                    d.reason()));
  AdoptChannelBias(ops, bias);
  for (const kernels::EpilogueOp& op : *ops)
    if (op.reads_memory() || kernels::IsRowNorm(op.kind))
      return FusionDecision::Forbid(fmt::format(
          "{} between two convs of a chain reads an operand; only activations fit there",
          kernels::EpilogueKindName(op.kind)));
  covered->insert(builder.visited().begin(), builder.visited().end());
  return FusionDecision::Allow();
}

// The one value the group writes for others.
FusionDecision LeavingValue(const graph::Graph& g, const Dataflow& flow,
                            std::span<const int32_t> group, const std::vector<char>& inside,
                            graph::ValueId* leaving) {
  std::vector<graph::ValueId> found;
  for (int32_t n : group)
    for (graph::ValueId v : g.nodes[n].outputs)
      if (v != graph::kNoValue && flow.LeavesGroup(v, inside)) found.push_back(v);
  if (found.size() != 1)
    return FusionDecision::Forbid(fmt::format(
        "a conv chain writes one value, the group writes {} (its intermediates stay local)",
        found.size()));
  *leaving = found[0];
  return FusionDecision::Allow();
}

const float* OptionalSlot(const graph::Node& node, size_t input, KernelInstance* k) {
  if (node.inputs.size() <= input || node.inputs[input] == graph::kNoValue) return nullptr;
  return k->AddSlot(node.inputs[input]);
}

std::string Summary(const kernels::ConvChainDesc& d) {
  const kernels::ConvShape& s = d.depthwise;
  return fmt::format(
      "conv chain {}x{}x{}x{}{} -> dw k{}x{} s{}{} -> {}{}", s.batch, d.in_channels, s.in_h, s.in_w,
      d.expand ? fmt::format(" -> {}{}", s.in_channels, EpilogueSummary(d.expand_act)) : "",
      s.kernel_h, s.kernel_w, s.stride_h, EpilogueSummary(d.dw_act), d.out_channels,
      EpilogueSummary(d.epilogue));
}

}  // namespace

FusionDecision MatchConvChainInstance(const graph::Graph& g, const Dataflow& flow,
                                      std::span<const int32_t> group, KernelInstance* k) {
  FT_RETURN_IF_DECISION(flow.CheckConvex(group));
  std::vector<char> inside(g.nodes.size(), 0);
  std::vector<ChainConv> convs;
  for (int32_t n : group) {
    inside[n] = 1;
    if (g.nodes[n].op_type != "Conv") continue;
    FT_RETURN_IF_DECISION(Resolve(g, n, &convs.emplace_back()));
  }
  if (convs.size() < 2 || convs.size() > 3)
    return FusionDecision::Forbid(
        fmt::format("a conv chain fuses 2 or 3 convs, the group has {}", convs.size()));
  std::sort(convs.begin(), convs.end(),
            [](const ChainConv& a, const ChainConv& b) { return a.node < b.node; });
  FT_RETURN_IF_DECISION(CheckRoles(convs));
  graph::ValueId leaving = graph::kNoValue;
  FT_RETURN_IF_DECISION(LeavingValue(g, flow, group, inside, &leaving));

  const bool expand = convs.size() == 3;
  const int32_t dw_node = convs[convs.size() - 2].node;
  const graph::Node& dw = g.nodes[dw_node];
  const graph::Node& project = g.nodes[convs.back().node];
  const graph::ValueId y = project.outputs[0];
  if (g.type(leaving).dims != g.type(y).dims)
    return FusionDecision::Forbid(fmt::format(
        "the group writes {} {}, the project conv (node {}) {}; a conv chain writes the project's "
        "shape (no pool after it)",
        g.value(leaving).name, graph::DimsToString(g.type(leaving).dims), convs.back().node,
        graph::DimsToString(g.type(y).dims)));

  *k = KernelInstance{};
  k->kind = KernelTemplate::kConvChain;
  k->nodes.assign(group.begin(), group.end());
  std::sort(k->nodes.begin(), k->nodes.end());
  kernels::ConvChainDesc& d = k->conv_chain;
  d.depthwise = convs[convs.size() - 2].shape;
  d.in_channels = expand ? convs[0].shape.in_channels : d.depthwise.in_channels;
  d.out_channels = convs.back().shape.out_channels;
  d.expand = expand;
  std::set<int32_t> covered;
  for (const ChainConv& c : convs) covered.insert(c.node);
  if (expand) {
    const graph::Node& e = g.nodes[convs[0].node];
    d.x = k->AddSlot(e.inputs[0]);
    d.expand_w = k->AddSlot(e.inputs[1]);
    d.expand_bias = OptionalSlot(e, 2, k);
    FT_RETURN_IF_DECISION(StageActivations(g, inside, convs[0].node, dw_node, k, &d.expand_act,
                                           &d.expand_bias, &covered));
  } else {
    d.x = k->AddSlot(dw.inputs[0]);
  }
  d.dw_w = k->AddSlot(dw.inputs[1]);
  d.dw_bias = OptionalSlot(dw, 2, k);
  FT_RETURN_IF_DECISION(
      StageActivations(g, inside, dw_node, convs.back().node, k, &d.dw_act, &d.dw_bias, &covered));
  d.project_w = k->AddSlot(project.inputs[1]);
  d.project_bias = OptionalSlot(project, 2, k);
  EpilogueBuilder builder(g, inside, y, EpilogueFrame{1, 1}, k);
  FT_RETURN_IF_DECISION(builder.Build(leaving, &d.epilogue));
  AdoptChannelBias(&d.epilogue, &d.project_bias);
  covered.insert(builder.visited().begin(), builder.visited().end());
  if (covered.size() != group.size())
    return FusionDecision::Forbid(
        "the group holds nodes that are neither the chain's convs nor on the activations "
        "between them or the epilogue after them");
  for (const kernels::EpilogueOp& op : d.epilogue)
    if (kernels::IsRowNorm(op.kind))
      return FusionDecision::Forbid("a row norm after a conv does not fit a conv tile");
  d.y = k->AddSlot(leaving);
  k->outputs = {leaving};
  k->inputs = GroupInputs(g, k->nodes, inside);
  k->summary = Summary(d);
  return FusionDecision::Allow();
}

}  // namespace fusetune::fusion_space
