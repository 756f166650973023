#include "fusion_space/match_tile.h"

#include "fusion_space/view.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

namespace fusetune {

using kernels::TileOp;
using kernels::TileProgram;

const char* TileTemplateName(TileTemplate t) {
  return t == TileTemplate::kRowwise ? "rowwise" : "elementwise";
}

namespace {

std::optional<TileOp> UnaryOf(const std::string& op) {
  static const std::map<std::string, TileOp> kOps = {
      {"Neg", TileOp::kNeg},   {"Abs", TileOp::kAbs},   {"Exp", TileOp::kExp},
      {"Log", TileOp::kLog},   {"Sqrt", TileOp::kSqrt}, {"Reciprocal", TileOp::kReciprocal},
      {"Tanh", TileOp::kTanh}, {"Erf", TileOp::kErf},   {"Sigmoid", TileOp::kSigmoid},
      {"Relu", TileOp::kRelu}};
  auto it = kOps.find(op);
  return it == kOps.end() ? std::nullopt : std::optional<TileOp>(it->second);
}

std::optional<TileOp> BinaryOf(const std::string& op) {
  static const std::map<std::string, TileOp> kOps = {
      {"Add", TileOp::kAdd}, {"Sub", TileOp::kSub}, {"Mul", TileOp::kMul}, {"Div", TileOp::kDiv},
      {"Max", TileOp::kMax}, {"Min", TileOp::kMin}, {"Pow", TileOp::kPow}};
  auto it = kOps.find(op);
  return it == kOps.end() ? std::nullopt : std::optional<TileOp>(it->second);
}

std::optional<TileOp> ReductionOf(const std::string& op) {
  static const std::map<std::string, TileOp> kOps = {{"ReduceSum", TileOp::kReduceSum},
                                                     {"ReduceMean", TileOp::kReduceMean},
                                                     {"ReduceMax", TileOp::kReduceMax},
                                                     {"ReduceMin", TileOp::kReduceMin}};
  auto it = kOps.find(op);
  return it == kOps.end() ? std::nullopt : std::optional<TileOp>(it->second);
}

int64_t IntAttr(const Node& node, const std::string& name, int64_t fallback) {
  auto r = node.attrs.GetInt(name, fallback);
  return r.ok() ? *r : fallback;
}
float FloatAttr(const Node& node, const std::string& name, float fallback) {
  auto r = node.attrs.GetFloat(name, fallback);
  return r.ok() ? *r : fallback;
}

// Builds the program node by node; values entering the group become inputs
// (or constants, for one-element initializers).
class Builder {
 public:
  Builder(const Graph& g, const Dataflow& flow, std::span<const int32_t> group)
      : g_(g), flow_(flow), group_(group.begin(), group.end()) {
    std::sort(group_.begin(), group_.end());
  }

  TileGroupMatch Run() {
    TileGroupMatch m;
    for (int32_t node : group_) {
      const FusionDecision d = AddNode(node);
      if (!d) {
        m.decision = d;
        return m;
      }
    }
    CollectOutputs(m);
    if (m.outputs.empty()) {
      m.decision = FusionDecision::Forbid("the group has no outputs");
      return m;
    }
    m.program = std::move(program_);
    m.inputs = std::move(inputs_);
    m.kind = has_reduction_ ? TileTemplate::kRowwise : TileTemplate::kElementwise;
    m.row_length = row_length_;
    m.decision = FusionDecision::Allow();
    return m;
  }

 private:
  int Operand(ValueId v) {
    auto it = value_of_.find(v);
    if (it != value_of_.end()) return it->second;
    const Value& value = g_.value(v);
    int id;
    if (value.is_constant() && value.constant->numel() == 1) {
      id = program_.Const(static_cast<float>(value.constant->GetAsDouble(0)));
    } else {
      id = program_.Input(static_cast<int>(inputs_.size()));
      inputs_.push_back(v);
    }
    value_of_[v] = id;
    return id;
  }

  FusionDecision CheckRowAxis(const Node& node, int64_t axis, int64_t rank) {
    const int64_t last = rank - 1;
    if ((axis < 0 ? axis + rank : axis) != last)
      return FusionDecision::Forbid(fmt::format(
          "{} reduces axis {} of a rank-{} tensor; the row template reduces the last axis only",
          node.op_type, axis, rank));
    const int64_t length = g_.type(node.inputs[0]).dims.back();
    if (row_length_ != 0 && row_length_ != length)
      return FusionDecision::Forbid(
          fmt::format("reduction axis differs from the group's: rows of {} here, {} before", length,
                      row_length_));
    row_length_ = length;
    has_reduction_ = true;
    return FusionDecision::Allow();
  }

  FusionDecision AddNode(int32_t index) {
    const Node& node = g_.nodes[index];
    const ValueId out = node.outputs[0];
    if (g_.type(out).dtype != DataType::kFloat32)
      return FusionDecision::Forbid(
          fmt::format("node {} ({}) does not produce f32", index, node.op_type));
    if (node.op_type == "Identity") {
      value_of_[out] = Operand(node.inputs[0]);
      return FusionDecision::Allow();
    }
    if (auto op = UnaryOf(node.op_type)) {
      value_of_[out] = program_.Unary(*op, Operand(node.inputs[0]));
      return FusionDecision::Allow();
    }
    if (auto op = BinaryOf(node.op_type)) {
      value_of_[out] = program_.Binary(*op, Operand(node.inputs[0]), Operand(node.inputs[1]));
      return FusionDecision::Allow();
    }
    const int64_t rank = g_.type(node.inputs[0]).rank();
    if (auto op = ReductionOf(node.op_type)) {
      auto axes = node.attrs.GetInts("axes", std::vector<int64_t>{});
      std::vector<int64_t> list = axes.ok() ? *axes : std::vector<int64_t>{};
      if (list.empty() && node.inputs.size() > 1 && node.inputs[1] != kNoValue &&
          g_.value(node.inputs[1]).is_constant()) {
        const Tensor& t = *g_.value(node.inputs[1]).constant;
        for (int64_t i = 0; i < t.numel(); ++i)
          list.push_back(static_cast<int64_t>(t.GetAsDouble(i)));
      }
      if (list.size() != 1)
        return FusionDecision::Forbid(
            fmt::format("node {} ({}) reduces {} axes; the row template reduces exactly one", index,
                        node.op_type, list.size()));
      if (!IntAttr(node, "keepdims", 1))
        return FusionDecision::Forbid(
            fmt::format("node {} ({}) drops the reduced axis", index, node.op_type));
      FT_RETURN_IF_DECISION(CheckRowAxis(node, list[0], rank));
      value_of_[out] = program_.Reduce(*op, Operand(node.inputs[0]));
      return FusionDecision::Allow();
    }
    if (node.op_type == "Softmax") {
      FT_RETURN_IF_DECISION(CheckRowAxis(node, IntAttr(node, "axis", -1), rank));
      const int x = Operand(node.inputs[0]);
      const int e = program_.Unary(
          TileOp::kExp, program_.Binary(TileOp::kSub, x, program_.Reduce(TileOp::kReduceMax, x)));
      value_of_[out] = program_.Binary(TileOp::kDiv, e, program_.Reduce(TileOp::kReduceSum, e));
      return FusionDecision::Allow();
    }
    if (node.op_type == "LayerNormalization") {
      FT_RETURN_IF_DECISION(CheckRowAxis(node, IntAttr(node, "axis", -1), rank));
      for (size_t o = 1; o < node.outputs.size(); ++o)
        if (node.outputs[o] != kNoValue && IsUsed(node.outputs[o]))
          return FusionDecision::Forbid(fmt::format(
              "node {} (LayerNormalization): its mean and inverse-std outputs are used", index));
      const float eps = FloatAttr(node, "epsilon", 1e-5f);
      const int x = Operand(node.inputs[0]);
      const int d = program_.Binary(TileOp::kSub, x, program_.Reduce(TileOp::kReduceMean, x));
      const int var = program_.Reduce(TileOp::kReduceMean, program_.Unary(TileOp::kSquare, d));
      const int inv =
          program_.Unary(TileOp::kRsqrt, program_.Binary(TileOp::kAdd, var, program_.Const(eps)));
      int y = program_.Binary(TileOp::kMul, program_.Binary(TileOp::kMul, d, inv),
                              Operand(node.inputs[1]));
      if (node.inputs.size() > 2 && node.inputs[2] != kNoValue)
        y = program_.Binary(TileOp::kAdd, y, Operand(node.inputs[2]));
      value_of_[out] = y;
      return FusionDecision::Allow();
    }
    return FusionDecision::Forbid(fmt::format(
        "node {} ({}) is neither elementwise nor a last-axis reduction", index, node.op_type));
  }

  // Values produced inside and read outside (or graph outputs) leave the group.
  void CollectOutputs(TileGroupMatch& m) {
    std::vector<char> inside(g_.nodes.size(), 0);
    for (int32_t n : group_) inside[n] = 1;
    for (int32_t n : group_)
      for (ValueId out : g_.nodes[n].outputs) {
        if (out == kNoValue || !value_of_.count(out)) continue;
        if (flow_.LeavesGroup(out, inside)) {
          program_.Output(value_of_[out]);
          m.outputs.push_back(out);
        }
      }
  }

  bool IsUsed(ValueId v) const { return !flow_.uses(v).empty() || flow_.is_graph_output(v); }

  const Graph& g_;
  const Dataflow& flow_;
  std::vector<int32_t> group_;
  TileProgram program_;
  std::vector<ValueId> inputs_;
  std::map<ValueId, int> value_of_;
  int64_t row_length_ = 0;
  bool has_reduction_ = false;
};

}  // namespace

TileGroupMatch MatchTileGroup(const Graph& graph, const Dataflow& flow,
                              std::span<const int32_t> group) {
  TileGroupMatch m;
  const FusionDecision convex = flow.CheckConvex(group);
  if (!convex) {
    m.decision = convex;
    return m;
  }
  return Builder(graph, flow, group).Run();
}

}  // namespace fusetune

namespace fusetune {

namespace {

Dims BroadcastAll(const Graph& g, const std::vector<ValueId>& values) {
  Dims space;
  for (ValueId v : values) {
    const Dims& d = g.type(v).dims;
    if (d.size() > space.size()) space.insert(space.begin(), d.size() - space.size(), 1);
    for (size_t i = 0; i < d.size(); ++i) {
      int64_t& s = space[space.size() - d.size() + i];
      s = std::max(s, d[i]);
    }
  }
  return space;
}

}  // namespace

FusionDecision MatchTileInstance(const Graph& g, const Dataflow& flow,
                                 std::span<const int32_t> group, KernelInstance* k) {
  TileGroupMatch m = MatchTileGroup(g, flow, group);
  if (!m.decision) return m.decision;
  std::vector<ValueId> all = m.inputs;
  all.insert(all.end(), m.outputs.begin(), m.outputs.end());
  Dims space = BroadcastAll(g, all);
  if (space.empty()) space = {1};
  k->nodes.assign(group.begin(), group.end());
  std::sort(k->nodes.begin(), k->nodes.end());
  k->inputs = m.inputs;
  k->outputs = m.outputs;
  for (ValueId v : m.inputs)
    if (!BroadcastStrides(g.type(v).dims, space))
      return FusionDecision::Forbid(fmt::format("input {} {} does not broadcast to the group's {}",
                                                g.value(v).name, DimsToString(g.type(v).dims),
                                                DimsToString(space)));
  if (m.kind == TileTemplate::kElementwise) {
    k->kind = KernelTemplate::kElementwise;
    auto& d = k->elementwise;
    d.dims = space;
    for (ValueId v : m.inputs)
      d.inputs.push_back({k->AddSlot(v), *BroadcastStrides(g.type(v).dims, space)});
    for (ValueId v : m.outputs) {
      if (g.type(v).numel() != NumElements(space))
        return FusionDecision::Forbid(
            fmt::format("output {} {} is smaller than the group's iteration space {}",
                        g.value(v).name, DimsToString(g.type(v).dims), DimsToString(space)));
      d.outputs.push_back(k->AddSlot(v));
    }
    d.program = std::move(m.program);
    k->summary = "elementwise " + DimsToString(space);
  } else {
    k->kind = KernelTemplate::kRowwise;
    auto& d = k->rowwise;
    d.cols = space.back();
    if (d.cols != m.row_length)
      return FusionDecision::Forbid(fmt::format(
          "reduction axis differs from the group's: rows of {} reduced, the group spans {}",
          m.row_length, d.cols));
    d.row_dims.assign(space.begin(), space.end() - 1);
    if (d.row_dims.empty()) d.row_dims = {1};
    Dims narrow = space;
    narrow.back() = 1;
    for (ValueId v : m.inputs) {
      std::vector<int64_t> s = *BroadcastStrides(g.type(v).dims, space);
      const int64_t col = s.back();
      s.pop_back();
      if (s.empty()) s = {0};
      d.inputs.push_back(
          {k->AddSlot(v), s, g.type(v).dims.empty() || g.type(v).dims.back() == 1 ? 0 : col});
    }
    for (ValueId v : m.outputs) {
      const Dims& od = g.type(v).dims;
      const bool wide = od.size() == space.size() && od == space;
      const bool per_row = od.size() == space.size() && od == narrow;
      if (!wide && !per_row)
        return FusionDecision::Forbid(
            fmt::format("output {} {} is neither the group's rows {} nor one value per row",
                        g.value(v).name, DimsToString(od), DimsToString(space)));
      std::vector<int64_t> s = RowMajorStrides(od);
      s.pop_back();
      if (s.empty()) s = {0};
      d.outputs.push_back({k->AddSlot(v), s, wide ? 1 : 0});
    }
    d.program = std::move(m.program);
    // Programs whose outputs do not vary by row, or whose per-row outputs
    // would land in a wide tensor, are rejected by the template itself.
    kernels::KernelConfig unlimited;
    unlimited.local_buffer_bytes = size_t{1} << 40;
    Status st = kernels::ValidateRowwise(d, kernels::RowwiseTiling{1, 1, 0}, unlimited);
    if (!st.ok()) return FusionDecision::Forbid(st.error().message());
    k->summary = fmt::format("rowwise {} rows of {}", NumElements(d.row_dims), d.cols);
  }
  return FusionDecision::Allow();
}

}  // namespace fusetune
