#include "fusion_space/match_gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "fusion_space/match_util.h"
#include "fusion_space/view.h"
#include "graph/workload_key.h"

namespace fusetune::fusion_space {

namespace match_detail {

double ReferenceActivation(kernels::EpilogueKind kind, double x) {
  using kernels::EpilogueKind;
  switch (kind) {
    case EpilogueKind::kRelu:
      return x > 0 ? x : 0;
    case EpilogueKind::kGeluErf:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case EpilogueKind::kGeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case EpilogueKind::kSilu:
      return x / (1 + std::exp(-x));
    case EpilogueKind::kSigmoid:
      return 1 / (1 + std::exp(-x));
    default:
      return x;
  }
}

}  // namespace match_detail

namespace {

// Activation fits by the workload key of their chain (FitActivationCached).
std::pair<std::mutex, std::unordered_map<uint64_t, ActivationFit>>& FitCache() {
  static std::pair<std::mutex, std::unordered_map<uint64_t, ActivationFit>> cache;
  return cache;
}

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

// Builds the epilogue of one GEMM output by walking back from the value
// that leaves the group to the GEMM's result `c`.
class EpilogueBuilder {
 public:
  EpilogueBuilder(const graph::Graph& g, const std::vector<char>& inside, graph::ValueId c,
                  const GemmNodeShape& shape, KernelInstance* k)
      : g_(g), inside_(inside), c_(c), shape_(shape), k_(k) {}

  FusionDecision Build(graph::ValueId end, std::vector<EpilogueOp>* ops) { return Chain(end, ops); }
  const std::set<int32_t>& visited() const { return visited_; }

 private:
  bool DependsOnC(graph::ValueId v) {
    if (v == c_) return true;
    auto it = depends_.find(v);
    if (it != depends_.end()) return it->second;
    const int32_t p = g_.value(v).producer;
    bool d = false;
    if (p >= 0 && inside_[p])
      for (graph::ValueId in : g_.nodes[p].inputs)
        d = d || (in != graph::kNoValue && DependsOnC(in));
    depends_[v] = d;
    return d;
  }

  // Strides of an operand of the output's shape (rows by columns, per batch).
  FusionDecision OperandOp(EpilogueKind kind, graph::ValueId t, EpilogueOp* op) {
    const graph::Dims& out = g_.type(c_).dims;
    auto s = BroadcastStrides(g_.type(t).dims, out);
    if (!s)
      return FusionDecision::Forbid(
          fmt::format("operand {} {} does not broadcast to {}", g_.value(t).name,
                      graph::DimsToString(g_.type(t).dims), graph::DimsToString(out)));
    op->kind = kind;
    op->col_stride = s->back();
    const size_t lead = out.size() - (shape_.batched ? 2 : 1);
    std::vector<int64_t> lead_dims(out.begin(), out.begin() + lead),
        lead_strides(s->begin(), s->begin() + lead);
    const int64_t outer = shape_.batched ? shape_.batch : shape_.m;
    auto collapsed = ReshapeStrides(lead_dims, lead_strides, std::vector<int64_t>{outer});
    if (!collapsed)
      return FusionDecision::Forbid(fmt::format(
          "operand {} is broadcast in a way the epilogue cannot stride through", g_.value(t).name));
    if (shape_.batched) {
      op->batch_stride = (*collapsed)[0];
      op->row_stride = (*s)[out.size() - 2];
    } else {
      op->row_stride = (*collapsed)[0];
    }
    if (kind == EpilogueKind::kResidualAdd && op->row_stride == 0 && op->batch_stride == 0)
      op->kind = EpilogueKind::kBiasAdd;
    op->data = k_->AddSlot(t);
    return FusionDecision::Allow();
  }

  FusionDecision Chain(graph::ValueId e, std::vector<EpilogueOp>* ops) {
    if (e == c_) return FusionDecision::Allow();
    const int32_t p = g_.value(e).producer;
    const graph::Node& node = g_.nodes[p];
    visited_.insert(p);
    if (node.op_type == "Identity") return Chain(node.inputs[0], ops);
    if (node.op_type == "LayerNormalization") return LayerNormStep(node, p, ops);
    const bool binary =
        node.inputs.size() == 2 && (node.op_type == "Add" || node.op_type == "Mul" ||
                                    node.op_type == "Div" || node.op_type == "Sub");
    if (binary) {
      const bool d0 = DependsOnC(node.inputs[0]), d1 = DependsOnC(node.inputs[1]);
      if (d0 != d1) {
        const graph::ValueId x = d0 ? node.inputs[0] : node.inputs[1];
        const graph::ValueId t = d0 ? node.inputs[1] : node.inputs[0];
        FT_RETURN_IF_DECISION(Chain(x, ops));
        return StepWith(node, p, t, /*t_on_right=*/d0, ops);
      }
    }
    // Not a step with an outside operand: find the nearest value that every
    // path from e back to c passes through, and fit the function in between.
    return ActivationStep(e, ops);
  }

  // LayerNormalization over the last axis of a value on the chain, with
  // gamma and beta from outside the group: a row-norm op and a bias add (the
  // kernel then needs tiles of whole rows; the tiling space sees to that).
  FusionDecision LayerNormStep(const graph::Node& node, int32_t p, std::vector<EpilogueOp>* ops) {
    const graph::Dims& out = g_.type(c_).dims;
    const int64_t axis = MatchIntAttr(node, "axis", -1);
    if (axis != -1 && axis != static_cast<int64_t>(out.size()) - 1)
      return FusionDecision::Forbid(fmt::format(
          "node {} (LayerNormalization) normalises from axis {}, not the last", p, axis));
    if (!DependsOnC(node.inputs[0]))
      return FusionDecision::Forbid(fmt::format(
          "node {} (LayerNormalization) normalises a value the GEMM does not compute", p));
    std::vector<EpilogueOp> params;
    for (size_t i = 1; i < node.inputs.size() && i < 3; ++i) {
      const graph::ValueId t = node.inputs[i];
      if (t == graph::kNoValue) continue;
      const int32_t tp = g_.value(t).producer;
      if (tp >= 0 && inside_[tp])
        return FusionDecision::Forbid(
            fmt::format("node {} (LayerNormalization) takes its {} from inside the group", p,
                        i == 1 ? "scale" : "bias"));
      EpilogueOp op{};
      FT_RETURN_IF_DECISION(OperandOp(EpilogueKind::kBiasAdd, t, &op));
      if (op.row_stride != 0 || op.batch_stride != 0)
        return FusionDecision::Forbid(fmt::format(
            "node {} (LayerNormalization): its {} varies by row", p, i == 1 ? "scale" : "bias"));
      if (i == 1) {
        op.kind = EpilogueKind::kLayerNorm;
        op.scalar = MatchFloatAttr(node, "epsilon", 1e-5f);
      }
      params.push_back(op);
    }
    if (params.empty() || params[0].kind != EpilogueKind::kLayerNorm)
      return FusionDecision::Forbid(fmt::format("node {} (LayerNormalization) has no scale", p));
    FT_RETURN_IF_DECISION(Chain(node.inputs[0], ops));
    ops->insert(ops->end(), params.begin(), params.end());
    return FusionDecision::Allow();
  }

  FusionDecision StepWith(const graph::Node& node, int32_t p, graph::ValueId t, bool t_on_right,
                          std::vector<EpilogueOp>* ops) {
    const int32_t tp = g_.value(t).producer;
    if (tp >= 0 && inside_[tp])
      return FusionDecision::Forbid(
          fmt::format("node {} ({}) combines the GEMM with a value computed inside the group", p,
                      node.op_type));
    double scalar = 0;
    const bool is_scalar = ScalarConstant(g_, t, &scalar);
    const std::string& op = node.op_type;
    if (op == "Mul" && is_scalar) {
      ops->push_back(EpilogueOp::Scale(static_cast<float>(scalar)));
      return FusionDecision::Allow();
    }
    if (op == "Div" && is_scalar && t_on_right && scalar != 0) {
      ops->push_back(EpilogueOp::Scale(static_cast<float>(1.0 / scalar)));
      return FusionDecision::Allow();
    }
    if (op == "Add" || op == "Mul") {
      if (is_scalar && op == "Add")
        return FusionDecision::Forbid(
            fmt::format("node {} (Add) adds a scalar; the GEMM epilogue has no scalar add", p));
      EpilogueOp e{};
      FT_RETURN_IF_DECISION(
          OperandOp(op == "Add" ? EpilogueKind::kResidualAdd : EpilogueKind::kMultiply, t, &e));
      ops->push_back(e);
      return FusionDecision::Allow();
    }
    return FusionDecision::Forbid(
        fmt::format("node {} ({}) with a tensor operand is not a GEMM epilogue step", p, op));
  }

  // Fitting probes the chain at many points (tens of microseconds); the
  // chain (ops, attributes, shapes, scalar constants by value, wiring from
  // d) determines the fit, so repeated layers fit once per process.
  template <typename Fit>
  ActivationFit FitActivationCached(const std::set<int32_t>& between, graph::ValueId d, Fit&& fit,
                                    std::string* failure) {
    auto& [mutex, cache] = FitCache();
    const std::vector<int32_t> nodes(between.begin(), between.end());
    // Repeated layers list a chain's nodes in the same order, so the
    // ordered hash finds them (a third of the cost of a canonical key).
    const uint64_t key = graph::OrderedSubsetHash(g_, nodes, d);
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (auto it = cache.find(key); it != cache.end()) return it->second;
    }
    const ActivationFit result = fit();
    // Failure messages name this graph's nodes: only successful fits are shared.
    if (!failure->empty()) return result;
    std::lock_guard<std::mutex> lock(mutex);
    if (cache.size() > 4096) cache.clear();  // bounded: a long-lived process sees many models
    cache.emplace(key, result);
    return result;
  }

  FusionDecision ActivationStep(graph::ValueId e, std::vector<EpilogueOp>* ops) {
    std::vector<graph::ValueId> candidates;  // c-dependent ancestors of e inside the group
    std::set<graph::ValueId> seen;
    std::vector<graph::ValueId> stack{e};
    while (!stack.empty()) {
      const graph::ValueId v = stack.back();
      stack.pop_back();
      const int32_t p = g_.value(v).producer;
      if (v == c_ || p < 0 || !inside_[p]) continue;
      for (graph::ValueId in : g_.nodes[p].inputs)
        if (in != graph::kNoValue && DependsOnC(in) && seen.insert(in).second) {
          candidates.push_back(in);
          stack.push_back(in);
        }
    }
    std::sort(candidates.begin(), candidates.end(), [&](graph::ValueId a, graph::ValueId b) {
      return g_.value(a).producer > g_.value(b).producer;
    });
    for (graph::ValueId d : candidates) {
      std::set<int32_t> between;
      if (!OnlyThrough(e, d, &between)) continue;
      std::string failure;
      const ActivationFit fit = FitActivationCached(
          between, d,
          [&] {
            return FitActivation([&](double x) {
              std::map<graph::ValueId, double> memo;
              auto v = EvalScalarFunction(g_, e, d, x, &memo, &failure);
              return v ? *v : std::nan("");
            });
          },
          &failure);
      if (!failure.empty()) return FusionDecision::Forbid(failure);
      if (!fit.found)
        return FusionDecision::Forbid(
            fmt::format("nodes {}..{} compute a function that is not a known activation",
                        *between.begin(), *between.rbegin()));
      FT_RETURN_IF_DECISION(Chain(d, ops));
      visited_.insert(between.begin(), between.end());
      if (!fit.identity) ops->push_back(EpilogueOp::Act(fit.kind));
      if (std::abs(fit.scale - 1) > 1e-6)
        ops->push_back(EpilogueOp::Scale(static_cast<float>(fit.scale)));
      return FusionDecision::Allow();
    }
    return FusionDecision::Forbid(
        fmt::format("node {} ({}) combines values that do not reduce to one epilogue chain",
                    g_.value(e).producer, g_.nodes[g_.value(e).producer].op_type));
  }

  // True when every path from e back to non-constant values passes through d;
  // collects the nodes in between.
  bool OnlyThrough(graph::ValueId e, graph::ValueId d, std::set<int32_t>* between) {
    std::vector<graph::ValueId> stack{e};
    std::set<graph::ValueId> seen{e};
    while (!stack.empty()) {
      const graph::ValueId v = stack.back();
      stack.pop_back();
      if (v == d) continue;
      double unused;
      if (ScalarConstant(g_, v, &unused)) continue;
      const int32_t p = g_.value(v).producer;
      if (v == c_ || p < 0 || !inside_[p]) return false;
      between->insert(p);
      for (graph::ValueId in : g_.nodes[p].inputs)
        if (in != graph::kNoValue && seen.insert(in).second) stack.push_back(in);
    }
    return true;
  }

  const graph::Graph& g_;
  const std::vector<char>& inside_;
  graph::ValueId c_;
  const GemmNodeShape& shape_;
  KernelInstance* k_;
  std::map<graph::ValueId, bool> depends_;
  std::set<int32_t> visited_;
};

std::string EpilogueSummary(const std::vector<EpilogueOp>& ops) {
  std::string s;
  for (const auto& op : ops) s += fmt::format(" +{}", kernels::EpilogueKindName(op.kind));
  return s;
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
      EpilogueBuilder gate_chain(g, inside, g.nodes[gemms[gate]].outputs[0], shapes[gate], k);
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
      EpilogueBuilder tail(g, inside, mul.outputs[0], shapes[gate], k);
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
    EpilogueBuilder builder(g, inside, c, s, k);
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

void ClearActivationFitCache() {
  auto& [mutex, cache] = FitCache();
  std::lock_guard<std::mutex> lock(mutex);
  cache.clear();
}

}  // namespace fusetune::fusion_space
