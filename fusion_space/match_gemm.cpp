#include "fusion_space/match_gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "fusion_space/match_epilogue.h"
#include "fusion_space/match_util.h"
#include "fusion_space/view.h"
#include "graph/workload_key.h"

namespace fusetune::fusion_space {

namespace {

using kernels::EpilogueKind;
using kernels::EpilogueOp;

// How one MatMul/Gemm node maps onto GemmDesc (A, one output, alpha/C).
struct GemmNodeShape {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  int64_t a_row = 0, a_batch = 0;
  int64_t b_row = 0, b_col = 1, b_batch = 0;
  int64_t c_row = 0, c_batch = 0;
  bool batched = false;  // rows are M of each batch, not all leading dims flattened
  double alpha = 1;
  graph::ValueId bias = graph::kNoValue;  // Gemm's C
};

FusionDecision ShapeOf(const graph::Graph& g, int32_t index, GemmNodeShape* s) {
  const graph::Node& node = g.nodes[index];
  const graph::Dims& a = g.type(node.inputs[0]).dims;
  const graph::Dims& b = g.type(node.inputs[1]).dims;
  const graph::Dims& c = g.type(node.outputs[0]).dims;
  if (a.size() < 2 || b.size() < 2)
    return FusionDecision::Forbid(
        fmt::format("node {} ({}): vector operands are not a GEMM", index, node.op_type));
  if (node.op_type == "Gemm") {
    if (MatchIntAttr(node, "transA", 0) != 0)
      return FusionDecision::Forbid(fmt::format("node {} (Gemm): transA is not supported", index));
    const bool tb = MatchIntAttr(node, "transB", 0) != 0;
    s->m = a[0];
    s->k = a[1];
    s->n = c[1];
    s->a_row = s->k;
    s->b_row = tb ? 1 : s->n;
    s->b_col = tb ? s->k : 1;
    s->c_row = s->n;
    s->alpha = MatchFloatAttr(node, "alpha", 1.0f);
    if (node.inputs.size() > 2 && node.inputs[2] != graph::kNoValue) {
      if (MatchFloatAttr(node, "beta", 1.0f) != 1.0f)
        return FusionDecision::Forbid(fmt::format("node {} (Gemm): beta != 1", index));
      s->bias = node.inputs[2];
    }
    return FusionDecision::Allow();
  }
  s->k = a.back();
  s->n = b.back();
  s->b_row = s->n;
  s->c_row = s->n;
  s->a_row = s->k;
  if (b.size() == 2) {
    s->m = graph::NumElements(a) / s->k;  // leading dims of A flatten into rows
    return FusionDecision::Allow();
  }
  if (a.size() != b.size() || !std::equal(a.begin(), a.end() - 2, b.begin()))
    return FusionDecision::Forbid(fmt::format(
        "node {} (MatMul): batch dims of A {} and B {} differ (broadcast batches are not fused)",
        index, graph::DimsToString(a), graph::DimsToString(b)));
  s->batched = true;
  s->m = a[a.size() - 2];
  s->batch = graph::NumElements(a) / (s->m * s->k);
  s->a_batch = s->m * s->k;
  s->b_batch = s->k * s->n;
  s->c_batch = s->m * s->n;
  return FusionDecision::Allow();
}

// How the epilogue sees a GEMM's output: rows are the leading dims (one
// batched matrix's M), columns the last.
EpilogueFrame FrameOf(const graph::Graph& g, int32_t gemm, const GemmNodeShape& s) {
  const size_t rank = g.type(g.nodes[gemm].outputs[0]).dims.size();
  return s.batched ? EpilogueFrame{rank - 2, 1} : EpilogueFrame{0, rank - 1};
}

// silu(A x B_gate) * (A x B_up), then an epilogue chain: the GEMM template's
// SwiGLU mode. nullopt when no Mul combines the two GEMMs that way.
std::optional<FusionDecision> MatchSwiglu(const graph::Graph& g, const Dataflow& flow,
                                          std::span<const int32_t> group,
                                          const std::vector<char>& inside,
                                          const std::vector<int32_t>& gemms,
                                          const std::vector<GemmNodeShape>& shapes,
                                          KernelInstance* k) {
  for (int32_t n : group) {
    const graph::Node& mul = g.nodes[n];
    if (mul.op_type != "Mul" || mul.inputs.size() != 2) continue;
    for (int side = 0; side < 2; ++side) {
      const graph::ValueId up_value = mul.inputs[side], gated = mul.inputs[1 - side];
      int up = -1;
      for (int i = 0; i < 2; ++i)
        if (g.nodes[gemms[i]].outputs[0] == up_value) up = i;
      if (up < 0) continue;
      const int gate = 1 - up;
      if (shapes[0].bias != graph::kNoValue || shapes[1].bias != graph::kNoValue ||
          shapes[0].alpha != 1 || shapes[1].alpha != 1 || shapes[0].n != shapes[1].n)
        return FusionDecision::Forbid("SwiGLU GEMMs must have equal widths and no Gemm bias");
      std::vector<EpilogueOp> gate_ops;
      EpilogueBuilder gate_chain(g, inside, g.nodes[gemms[gate]].outputs[0],
                                 FrameOf(g, gemms[gate], shapes[gate]), k);
      // Not this Mul (or not this side) unless the other factor is silu(gate).
      if (!gate_chain.Build(gated, &gate_ops) || gate_ops.size() != 1 ||
          gate_ops[0].kind != EpilogueKind::kSilu)
        continue;
      // The one value leaving the group, downstream of the product.
      std::vector<graph::ValueId> leaving;
      for (int32_t x : group)
        for (graph::ValueId out : g.nodes[x].outputs)
          if (out != graph::kNoValue && flow.LeavesGroup(out, inside)) leaving.push_back(out);
      if (leaving.size() != 1)
        return FusionDecision::Forbid(
            fmt::format("{} values of the SwiGLU group are read outside it; a GEMM writes one",
                        leaving.size()));
      std::vector<EpilogueOp> after;
      EpilogueBuilder tail(g, inside, mul.outputs[0], FrameOf(g, gemms[gate], shapes[gate]), k);
      FT_RETURN_IF_DECISION(tail.Build(leaving[0], &after));
      std::set<int32_t> covered(gemms.begin(), gemms.end());
      covered.insert(n);
      covered.insert(gate_chain.visited().begin(), gate_chain.visited().end());
      covered.insert(tail.visited().begin(), tail.visited().end());
      if (covered.size() != group.size())
        return FusionDecision::Forbid("the group holds nodes outside the SwiGLU pattern");
      auto& d = k->gemm;
      for (int i : {gate, up}) {
        kernels::GemmOutput out;
        out.n = shapes[i].n;
        out.b = k->AddSlot(g.nodes[gemms[i]].inputs[1]);
        out.b_row_stride = shapes[i].b_row;
        out.b_col_stride = shapes[i].b_col;
        out.b_batch_stride = shapes[i].b_batch;
        if (i == gate) {
          out.epilogue = after;
          out.c = k->AddSlot(leaving[0]);
          out.c_row_stride = shapes[i].c_row;
          out.c_batch_stride = shapes[i].c_batch;
        }
        d.outputs.push_back(std::move(out));
      }
      d.swiglu = true;
      k->outputs = {leaving[0]};
      k->inputs = GroupInputs(g, k->nodes, inside);
      k->summary =
          fmt::format("gemm {}x{}x{} swiglu{}", d.m, d.k, shapes[0].n, EpilogueSummary(after));
      return FusionDecision::Allow();
    }
  }
  return std::nullopt;
}

}  // namespace

FusionDecision MatchGemmInstance(const graph::Graph& g, const Dataflow& flow,
                                 std::span<const int32_t> group, KernelInstance* k) {
  FT_RETURN_IF_DECISION(flow.CheckConvex(group));
  std::vector<char> inside(g.nodes.size(), 0);
  std::vector<int32_t> gemms;
  for (int32_t n : group) {
    inside[n] = 1;
    if (g.nodes[n].op_type == "MatMul" || g.nodes[n].op_type == "Gemm") gemms.push_back(n);
  }
  if (gemms.empty()) return FusionDecision::Forbid("the group has no MatMul or Gemm");
  std::sort(gemms.begin(), gemms.end());
  const graph::ValueId a = g.nodes[gemms[0]].inputs[0];
  std::vector<GemmNodeShape> shapes(gemms.size());
  for (size_t i = 0; i < gemms.size(); ++i) {
    const graph::Node& node = g.nodes[gemms[i]];
    if (g.type(node.outputs[0]).dtype != graph::DataType::kFloat32)
      return FusionDecision::Forbid(fmt::format("node {} does not produce f32", gemms[i]));
    if (node.inputs[0] != a)
      return FusionDecision::Forbid(
          fmt::format("nodes {} and {} multiply different A operands; only GEMMs sharing A fuse",
                      gemms[0], gemms[i]));
    FT_RETURN_IF_DECISION(ShapeOf(g, gemms[i], &shapes[i]));
    if (shapes[i].m != shapes[0].m || shapes[i].batch != shapes[0].batch ||
        shapes[i].batched != shapes[0].batched)
      return FusionDecision::Forbid("GEMMs sharing A have different row counts");
    if (shapes[i].batched && gemms.size() > 1)
      return FusionDecision::Forbid("batched GEMMs are not fused horizontally");
  }
  *k = KernelInstance{};
  k->kind = KernelTemplate::kGemm;
  k->nodes.assign(group.begin(), group.end());
  std::sort(k->nodes.begin(), k->nodes.end());
  auto& d = k->gemm;
  d.batch = shapes[0].batch;
  d.m = shapes[0].m;
  d.k = shapes[0].k;
  d.a = k->AddSlot(a);
  d.a_row_stride = shapes[0].a_row;
  d.a_batch_stride = shapes[0].a_batch;
  if (gemms.size() == 2) {
    if (auto swiglu = MatchSwiglu(g, flow, group, inside, gemms, shapes, k)) return *swiglu;
  }
  // Each GEMM's chain ends at the one value of its chain that leaves the group.
  std::set<int32_t> covered(gemms.begin(), gemms.end());
  k->summary =
      fmt::format("gemm {}{}x{}x", d.batch > 1 ? fmt::format("{}x", d.batch) : "", d.m, d.k);
  for (size_t i = 0; i < gemms.size(); ++i) {
    const GemmNodeShape& s = shapes[i];
    const graph::ValueId c = g.nodes[gemms[i]].outputs[0];
    std::vector<graph::ValueId> leaving;
    std::vector<graph::ValueId> stack{c};
    std::set<graph::ValueId> seen{c};
    while (!stack.empty()) {  // forward through the group from c
      const graph::ValueId v = stack.back();
      stack.pop_back();
      if (flow.LeavesGroup(v, inside)) leaving.push_back(v);
      for (auto [node, slot] : flow.uses(v))
        if (inside[node])
          for (graph::ValueId out : g.nodes[node].outputs)
            if (out != graph::kNoValue && seen.insert(out).second) stack.push_back(out);
    }
    if (leaving.size() != 1)
      return FusionDecision::Forbid(fmt::format(
          "the chain after node {} has {} values read outside the group; a GEMM writes one",
          gemms[i], leaving.size()));
    if (g.type(leaving[0]).dims != g.type(c).dims)
      return FusionDecision::Forbid(
          fmt::format("the chain after node {} changes the shape", gemms[i]));
    kernels::GemmOutput out;
    out.n = s.n;
    out.b = k->AddSlot(g.nodes[gemms[i]].inputs[1]);
    out.b_row_stride = s.b_row;
    out.b_col_stride = s.b_col;
    out.b_batch_stride = s.b_batch;
    if (s.alpha != 1) out.epilogue.push_back(EpilogueOp::Scale(static_cast<float>(s.alpha)));
    EpilogueBuilder builder(g, inside, c, FrameOf(g, gemms[i], s), k);
    if (s.bias != graph::kNoValue) {
      kernels::EpilogueOp bias{};
      auto strides = BroadcastStrides(g.type(s.bias).dims, g.type(c).dims);
      if (!strides) return FusionDecision::Forbid("Gemm's C does not broadcast to its output");
      bias.kind = (*strides)[0] == 0 ? EpilogueKind::kBiasAdd : EpilogueKind::kResidualAdd;
      bias.row_stride = (*strides)[0];
      bias.col_stride = (*strides)[1];
      bias.data = k->AddSlot(s.bias);
      out.epilogue.push_back(bias);
    }
    FT_RETURN_IF_DECISION(builder.Build(leaving[0], &out.epilogue));
    covered.insert(builder.visited().begin(), builder.visited().end());
    out.c = k->AddSlot(leaving[0]);
    out.c_row_stride = s.c_row;
    out.c_batch_stride = s.c_batch;
    k->outputs.push_back(leaving[0]);
    k->summary += fmt::format("{}{}{}", i ? "+" : "", s.n, EpilogueSummary(out.epilogue));
    d.outputs.push_back(std::move(out));
  }
  if (covered.size() != group.size())
    return FusionDecision::Forbid(
        "the group holds nodes that are neither a GEMM nor on its epilogue chain");
  k->inputs = GroupInputs(g, k->nodes, inside);
  return FusionDecision::Allow();
}

}  // namespace fusetune::fusion_space
