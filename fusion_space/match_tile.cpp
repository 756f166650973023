#include "fusion_space/match_tile.h"

#include "fusion_space/view.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

namespace fusetune::fusion_space {

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

int64_t IntAttr(const graph::Node& node, const std::string& name, int64_t fallback) {
  auto r = node.attrs.GetInt(name, fallback);
  return r.ok() ? *r : fallback;
}
float FloatAttr(const graph::Node& node, const std::string& name, float fallback) {
  auto r = node.attrs.GetFloat(name, fallback);
  return r.ok() ? *r : fallback;
}

bool IsDataMovement(const graph::Node& node) {
  return IsViewOp(node) || node.op_type == "Slice" || node.op_type == "Split";
}

// Builds one program per piece, node by node; values entering the group
// become operands (or constants, for one-element initializers), read
// through the views of the Reshape, Transpose and Slice nodes on the way.
class Builder {
 public:
  Builder(const graph::Graph& g, const Dataflow& flow, std::span<const int32_t> group)
      : g_(g), flow_(flow), group_(group.begin(), group.end()), inside_(g.nodes.size(), 0) {
    std::sort(group_.begin(), group_.end());
    for (int32_t n : group_) inside_[n] = 1;
  }

  TileGroupMatch Run() {
    TileGroupMatch m;
    m.decision = ClassifyPieces(&m.concat);
    if (!m.decision) return m;
    const int pieces = m.concat < 0 ? 1 : static_cast<int>(g_.nodes[m.concat].inputs.size());
    for (int p = 0; p < pieces; ++p) {
      m.decision = BuildPiece(p, m.concat, &m);
      if (!m.decision) return m;
    }
    if (m.outputs.empty()) {
      m.decision = FusionDecision::Forbid("the group has no outputs");
      return m;
    }
    bool moves_data = m.concat >= 0;
    for (int32_t n : group_) moves_data |= IsDataMovement(g_.nodes[n]);
    if (has_reduction_ && moves_data) {
      m.decision = FusionDecision::Forbid(
          "the row template reads no views: the group reduces rows and moves data");
      return m;
    }
    m.kind = has_reduction_ ? TileTemplate::kRowwise : TileTemplate::kElementwise;
    m.row_length = row_length_;
    m.decision = FusionDecision::Allow();
    return m;
  }

 private:
  // With a Concat, marks each computing node that feeds input p with piece p;
  // such a node must feed that input only and stay inside the group.
  FusionDecision ClassifyPieces(int32_t* concat) {
    piece_of_.assign(g_.nodes.size(), -1);
    for (int32_t n : group_) {
      if (g_.nodes[n].op_type != "Concat") continue;
      if (*concat >= 0)
        return FusionDecision::Forbid(
            fmt::format("nodes {} and {} are Concats; a group holds one", *concat, n));
      *concat = n;
    }
    if (*concat < 0) return FusionDecision::Allow();
    const graph::Node& c = g_.nodes[*concat];
    for (size_t p = 0; p < c.inputs.size(); ++p) {
      std::vector<graph::ValueId> work = {c.inputs[p]};
      while (!work.empty()) {
        const int32_t n = g_.value(work.back()).producer;
        work.pop_back();
        if (n < 0 || !inside_[n]) continue;
        if (!IsDataMovement(g_.nodes[n])) {
          if (piece_of_[n] >= 0 && piece_of_[n] != static_cast<int>(p))
            return FusionDecision::Forbid(
                fmt::format("node {} ({}) feeds two inputs of the Concat", n, g_.nodes[n].op_type));
          piece_of_[n] = static_cast<int>(p);
        }
        for (graph::ValueId in : g_.nodes[n].inputs)
          if (in != graph::kNoValue) work.push_back(in);
      }
    }
    for (int32_t n : group_) {
      if (piece_of_[n] < 0) continue;
      for (graph::ValueId out : g_.nodes[n].outputs) {
        if (out == graph::kNoValue) continue;
        if (flow_.is_graph_output(out)) return UpstreamEscapes(n);
        for (auto [user, slot] : flow_.uses(out))
          if (!inside_[user] || (user != *concat && piece_of_[user] != piece_of_[n]))
            return UpstreamEscapes(n);
      }
    }
    return FusionDecision::Allow();
  }

  FusionDecision UpstreamEscapes(int32_t n) const {
    return FusionDecision::Forbid(fmt::format(
        "node {} ({}) feeds the Concat and is read elsewhere too", n, g_.nodes[n].op_type));
  }

  FusionDecision BuildPiece(int p, int32_t concat, TileGroupMatch* m) {
    program_ = {};
    operands_.clear();
    computed_.clear();
    operand_of_.clear();
    failure_ = FusionDecision::Allow();
    for (int32_t node : group_) {
      const graph::Node& n = g_.nodes[node];
      if (IsDataMovement(n)) continue;  // read through views where used
      if (piece_of_[node] >= 0 && piece_of_[node] != p) continue;
      local_ = piece_of_[node] == p;
      if (node == concat) {
        local_ = true;
        computed_[n.outputs[0]] = Operand(n.inputs[p]);
        local_ = false;
      } else {
        FT_RETURN_IF_DECISION(AddNode(node));
      }
      FT_RETURN_IF_DECISION(failure_);
    }
    // Values produced inside and read outside (or graph outputs) leave the group.
    local_ = false;
    std::vector<graph::ValueId> outputs;
    for (int32_t n : group_)
      for (graph::ValueId out : g_.nodes[n].outputs) {
        if (out == graph::kNoValue || !flow_.LeavesGroup(out, inside_)) continue;
        if (piece_of_[n] >= 0) return UpstreamEscapes(n);
        program_.Output(Operand(out));
        outputs.push_back(out);
      }
    FT_RETURN_IF_DECISION(failure_);
    m->outputs = std::move(outputs);
    for (const TileOperand& op : operands_)
      if (std::find(m->inputs.begin(), m->inputs.end(), op.view.base) == m->inputs.end())
        m->inputs.push_back(op.view.base);
    m->pieces.push_back({std::move(program_), std::move(operands_)});
    return FusionDecision::Allow();
  }

  // The program value of graph value v: computed in the group, or an operand
  // read through the views in the group (in the coordinates of `local_`).
  int Operand(graph::ValueId v) {
    if (auto it = computed_.find(v); it != computed_.end()) return it->second;
    const std::pair<graph::ValueId, bool> key = {v, local_};
    if (auto it = operand_of_.find(key); it != operand_of_.end()) return it->second;
    TileOperand op{{}, local_};
    FusionDecision d = ResolveReadView(g_, inside_, v, &op.view, /*allow_slices=*/true);
    const int32_t producer = g_.value(op.view.base).producer;
    if (d && producer >= 0 && inside_[producer])
      d = FusionDecision::Forbid(
          fmt::format("node {} ({}) reads a value the group computes; moving it would need a copy",
                      g_.value(v).producer, g_.nodes[g_.value(v).producer].op_type));
    if (!d) {
      if (failure_) failure_ = d;
      return program_.Const(0);
    }
    const graph::Value& base = g_.value(op.view.base);
    int id;
    if (base.is_constant() && base.constant->numel() == 1) {
      id = program_.Const(static_cast<float>(base.constant->GetAsDouble(0)));
    } else {
      id = program_.Input(static_cast<int>(operands_.size()));
      operands_.push_back(std::move(op));
    }
    operand_of_[key] = id;
    return id;
  }

  FusionDecision CheckRowAxis(const graph::Node& node, int64_t axis, int64_t rank) {
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

  // Clip (bounds as opset-6 attributes or as inputs, either optional),
  // HardSigmoid and HardSwish as max/min chains; nullopt for other ops.
  std::optional<int> BoundedActivation(const graph::Node& node) {
    const std::string& op = node.op_type;
    if (op == "HardSigmoid" || op == "HardSwish") {
      const int x = Operand(node.inputs[0]);
      const bool swish = op == "HardSwish";
      const float alpha = swish ? 1.0f / 6.0f : FloatAttr(node, "alpha", 0.2f);
      const float beta = swish ? 0.5f : FloatAttr(node, "beta", 0.5f);
      int y = program_.Binary(TileOp::kAdd, program_.Binary(TileOp::kMul, x, program_.Const(alpha)),
                              program_.Const(beta));
      y = program_.Binary(TileOp::kMax, program_.Binary(TileOp::kMin, y, program_.Const(1.0f)),
                          program_.Const(0.0f));
      return swish ? program_.Binary(TileOp::kMul, x, y) : y;
    }
    if (op != "Clip") return std::nullopt;
    int y = Operand(node.inputs[0]);
    for (size_t i = 1; i < 3; ++i) {
      const bool lower = i == 1;
      int bound = -1;
      if (i < node.inputs.size() && node.inputs[i] != graph::kNoValue)
        bound = Operand(node.inputs[i]);
      else if (node.attrs.Has(lower ? "min" : "max"))
        bound = program_.Const(FloatAttr(node, lower ? "min" : "max", 0.0f));
      if (bound >= 0) y = program_.Binary(lower ? TileOp::kMax : TileOp::kMin, y, bound);
    }
    return y;
  }

  FusionDecision AddNode(int32_t index) {
    const graph::Node& node = g_.nodes[index];
    const graph::ValueId out = node.outputs[0];
    if (g_.type(out).dtype != graph::DataType::kFloat32)
      return FusionDecision::Forbid(
          fmt::format("node {} ({}) does not produce f32", index, node.op_type));
    if (node.op_type == "Identity") {
      computed_[out] = Operand(node.inputs[0]);
      return FusionDecision::Allow();
    }
    if (auto op = UnaryOf(node.op_type)) {
      computed_[out] = program_.Unary(*op, Operand(node.inputs[0]));
      return FusionDecision::Allow();
    }
    if (auto op = BinaryOf(node.op_type)) {
      computed_[out] = program_.Binary(*op, Operand(node.inputs[0]), Operand(node.inputs[1]));
      return FusionDecision::Allow();
    }
    if (auto bounded = BoundedActivation(node)) {
      computed_[out] = *bounded;
      return FusionDecision::Allow();
    }
    const int64_t rank = g_.type(node.inputs[0]).rank();
    if (auto op = ReductionOf(node.op_type)) {
      auto axes = node.attrs.GetInts("axes", std::vector<int64_t>{});
      std::vector<int64_t> list = axes.ok() ? *axes : std::vector<int64_t>{};
      if (list.empty() && node.inputs.size() > 1 && node.inputs[1] != graph::kNoValue &&
          g_.value(node.inputs[1]).is_constant()) {
        const graph::Tensor& t = *g_.value(node.inputs[1]).constant;
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
      computed_[out] = program_.Reduce(*op, Operand(node.inputs[0]));
      return FusionDecision::Allow();
    }
    if (node.op_type == "Softmax") {
      FT_RETURN_IF_DECISION(CheckRowAxis(node, IntAttr(node, "axis", -1), rank));
      const int x = Operand(node.inputs[0]);
      const int e = program_.Unary(
          TileOp::kExp, program_.Binary(TileOp::kSub, x, program_.Reduce(TileOp::kReduceMax, x)));
      computed_[out] = program_.Binary(TileOp::kDiv, e, program_.Reduce(TileOp::kReduceSum, e));
      return FusionDecision::Allow();
    }
    if (node.op_type == "LayerNormalization") {
      FT_RETURN_IF_DECISION(CheckRowAxis(node, IntAttr(node, "axis", -1), rank));
      for (size_t o = 1; o < node.outputs.size(); ++o)
        if (node.outputs[o] != graph::kNoValue && IsUsed(node.outputs[o]))
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
      if (node.inputs.size() > 2 && node.inputs[2] != graph::kNoValue)
        y = program_.Binary(TileOp::kAdd, y, Operand(node.inputs[2]));
      computed_[out] = y;
      return FusionDecision::Allow();
    }
    return FusionDecision::Forbid(
        fmt::format("node {} ({}) is neither elementwise, data movement nor a last-axis reduction",
                    index, node.op_type));
  }

  bool IsUsed(graph::ValueId v) const { return !flow_.uses(v).empty() || flow_.is_graph_output(v); }

  const graph::Graph& g_;
  const Dataflow& flow_;
  std::vector<int32_t> group_;
  std::vector<char> inside_;
  std::vector<int> piece_of_;  // per node: the Concat input it feeds, or -1
  // The piece being built.
  TileProgram program_;
  std::vector<TileOperand> operands_;
  std::map<graph::ValueId, int> computed_;
  std::map<std::pair<graph::ValueId, bool>, int> operand_of_;
  bool local_ = false;  // operands read now are in the piece's coordinates
  FusionDecision failure_ = FusionDecision::Allow();
  int64_t row_length_ = 0;
  bool has_reduction_ = false;
};

}  // namespace

TileGroupMatch MatchTileGroup(const graph::Graph& graph, const Dataflow& flow,
                              std::span<const int32_t> group) {
  TileGroupMatch m;
  const FusionDecision convex = flow.CheckConvex(group);
  if (!convex) {
    m.decision = convex;
    return m;
  }
  return Builder(graph, flow, group).Run();
}

}  // namespace fusetune::fusion_space
