#include "fusion_space/match_epilogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>

#include "fusion_space/match_gemm.h"
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
    case EpilogueKind::kHardSwish:
      return x * std::clamp(x / 6 + 0.5, 0.0, 1.0);
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

}  // namespace

using kernels::EpilogueKind;
using kernels::EpilogueOp;

class EpilogueBuilder::Walker {
 public:
  Walker(const graph::Graph& g, const std::vector<char>& inside, graph::ValueId c,
         EpilogueFrame frame, KernelInstance* k)
      : g_(g), inside_(inside), c_(c), frame_(frame), k_(k) {}

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

  // Strides of an operand of the output's shape: each of the frame's
  // batch, row and column axis runs collapsed to one stride.
  FusionDecision OperandOp(EpilogueKind kind, graph::ValueId t, EpilogueOp* op) {
    const graph::Dims& out = g_.type(c_).dims;
    auto s = BroadcastStrides(g_.type(t).dims, out);
    if (!s)
      return FusionDecision::Forbid(
          fmt::format("operand {} {} does not broadcast to {}", g_.value(t).name,
                      graph::DimsToString(g_.type(t).dims), graph::DimsToString(out)));
    const size_t rows_end = frame_.batch_axes + frame_.row_axes;
    std::optional<int64_t> batch = Collapse(out, *s, 0, frame_.batch_axes);
    std::optional<int64_t> row = Collapse(out, *s, frame_.batch_axes, rows_end);
    std::optional<int64_t> col = Collapse(out, *s, rows_end, out.size());
    if (!batch || !row || !col)
      return FusionDecision::Forbid(fmt::format(
          "operand {} is broadcast in a way the epilogue cannot stride through", g_.value(t).name));
    op->kind = kind;
    op->batch_stride = *batch;
    op->row_stride = *row;
    op->col_stride = *col;
    if (kind == EpilogueKind::kResidualAdd && op->row_stride == 0 && op->batch_stride == 0)
      op->kind = EpilogueKind::kBiasAdd;
    op->data = k_->AddSlot(t);
    return FusionDecision::Allow();
  }

  // The one stride of axes [from, to) read as a single flattened axis
  // (0 for no axes), or nullopt when they do not flatten.
  static std::optional<int64_t> Collapse(const graph::Dims& dims, const std::vector<int64_t>& s,
                                         size_t from, size_t to) {
    if (from >= to) return 0;
    if (to - from == 1) return s[from];
    int64_t n = 1;
    for (size_t i = from; i < to; ++i) n *= dims[i];
    auto c = ReshapeStrides(std::span<const int64_t>(dims.data() + from, to - from),
                            std::span<const int64_t>(s.data() + from, to - from),
                            std::vector<int64_t>{n});
    if (!c) return std::nullopt;
    return (*c)[0];
  }

  FusionDecision Chain(graph::ValueId e, std::vector<EpilogueOp>* ops) {
    if (e == c_) return FusionDecision::Allow();
    const int32_t p = g_.value(e).producer;
    // Every matcher calls this with an end downstream of the result; a chain
    // that runs out of the group instead does not reach the result at all.
    if (p < 0 || !inside_[p])
      return FusionDecision::Forbid(
          fmt::format("value {} is not computed from the result inside "
                      "the group",
                      g_.value(e).name));
    const graph::Node& node = g_.nodes[p];
    visited_.insert(p);
    if (node.op_type == "Identity") return Chain(node.inputs[0], ops);
    if (node.op_type == "LayerNormalization") return LayerNormStep(node, p, ops);
    if (auto bounded = BoundedActivation(node, p)) {
      if (!bounded->first) return bounded->first;
      FT_RETURN_IF_DECISION(Chain(node.inputs[0], ops));
      ops->push_back(bounded->second);
      return FusionDecision::Allow();
    }
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

  // Clip with constant bounds (ReLU6), HardSigmoid and HardSwish: ops whose
  // parameters the activation fit would have to guess. nullopt for other ops.
  std::optional<std::pair<FusionDecision, EpilogueOp>> BoundedActivation(const graph::Node& node,
                                                                         int32_t p) {
    const std::string& op = node.op_type;
    if (op == "HardSwish")
      return std::pair{FusionDecision::Allow(), EpilogueOp::Act(EpilogueKind::kHardSwish)};
    if (op == "HardSigmoid")
      return std::pair{FusionDecision::Allow(),
                       EpilogueOp::HardSigmoid(MatchFloatAttr(node, "alpha", 0.2f),
                                               MatchFloatAttr(node, "beta", 0.5f))};
    if (op != "Clip") return std::nullopt;
    double bound[2] = {-INFINITY, INFINITY};
    if (node.attrs.Has("min") || node.attrs.Has("max")) {  // opset 6
      bound[0] = MatchFloatAttr(node, "min", -INFINITY);
      bound[1] = MatchFloatAttr(node, "max", INFINITY);
    }
    for (size_t i = 1; i < node.inputs.size() && i < 3; ++i)
      if (node.inputs[i] != graph::kNoValue && !ScalarConstant(g_, node.inputs[i], &bound[i - 1]))
        return std::pair{FusionDecision::Forbid(fmt::format(
                             "node {} (Clip) has a bound that is not a constant scalar", p)),
                         EpilogueOp{}};
    return std::pair{FusionDecision::Allow(),
                     EpilogueOp::Clip(static_cast<float>(bound[0]), static_cast<float>(bound[1]))};
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
  EpilogueFrame frame_;
  KernelInstance* k_;
  std::map<graph::ValueId, bool> depends_;
  std::set<int32_t> visited_;
};

EpilogueBuilder::EpilogueBuilder(const graph::Graph& g, const std::vector<char>& inside,
                                 graph::ValueId result, EpilogueFrame frame, KernelInstance* k)
    : walker_(std::make_unique<Walker>(g, inside, result, frame, k)) {}

EpilogueBuilder::~EpilogueBuilder() = default;

FusionDecision EpilogueBuilder::Build(graph::ValueId end, std::vector<EpilogueOp>* ops) {
  return walker_->Build(end, ops);
}

const std::set<int32_t>& EpilogueBuilder::visited() const { return walker_->visited(); }

void AdoptChannelBias(std::vector<EpilogueOp>* ops, const float** bias) {
  if (*bias != nullptr || ops->empty()) return;
  const EpilogueOp& op = ops->front();
  if (op.kind != EpilogueKind::kResidualAdd || op.batch_stride != 0 || op.row_stride != 1 ||
      op.col_stride != 0)
    return;
  *bias = op.data;
  ops->erase(ops->begin());
}

std::string EpilogueSummary(const std::vector<EpilogueOp>& ops) {
  std::string s;
  for (const auto& op : ops) s += fmt::format(" +{}", kernels::EpilogueKindName(op.kind));
  return s;
}

void ClearActivationFitCache() {
  auto& [mutex, cache] = FitCache();
  std::lock_guard<std::mutex> lock(mutex);
  cache.clear();
}

}  // namespace fusetune::fusion_space
