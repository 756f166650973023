#include "kernels/tile_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "kernels/fast_math.h"

namespace fusetune::kernels {

const char* TileOpName(TileOp op) {
  static const char* const kNames[] = {"input",   "const", "neg",      "abs",       "exp",  "log",
                                       "sqrt",    "rsqrt", "recip",    "square",    "tanh", "erf",
                                       "sigmoid", "relu",  "gelu_erf", "gelu_tanh", "silu", "add",
                                       "sub",     "mul",   "div",      "max",       "min",  "pow",
                                       "sum",     "mean",  "rmax",     "rmin"};
  return kNames[static_cast<int>(op)];
}
bool IsUnary(TileOp op) { return op >= TileOp::kNeg && op <= TileOp::kSilu; }
bool IsBinary(TileOp op) { return op >= TileOp::kAdd && op <= TileOp::kPow; }
bool IsReduction(TileOp op) { return op >= TileOp::kReduceSum; }

int TileProgram::Add(TileInstr instr) {
  instrs_.push_back(instr);
  return static_cast<int>(instrs_.size()) - 1;
}
int TileProgram::Input(int index) { return Add({TileOp::kInput, -1, -1, index, 0}); }
int TileProgram::Const(float value) { return Add({TileOp::kConst, -1, -1, -1, value}); }
int TileProgram::Unary(TileOp op, int a) { return Add({op, a, -1, -1, 0}); }
int TileProgram::Binary(TileOp op, int a, int b) {
  // A constant exponent needs no pow() call per element, which costs more
  // than the rest of a norm (RMSNorm's x^2: 5 ns of 6 per element).
  if (op == TileOp::kPow && b >= 0 && b < static_cast<int>(instrs_.size()) &&
      instrs_[b].op == TileOp::kConst) {
    const float e = instrs_[b].value;
    if (e == 1.0f) return a;
    if (e == 2.0f) return Unary(TileOp::kSquare, a);
    if (e == 3.0f) return Binary(TileOp::kMul, Unary(TileOp::kSquare, a), a);
    if (e == 0.5f) return Unary(TileOp::kSqrt, a);
    if (e == -0.5f) return Unary(TileOp::kRsqrt, a);
    if (e == -1.0f) return Unary(TileOp::kReciprocal, a);
  }
  return Add({op, a, b, -1, 0});
}
int TileProgram::Reduce(TileOp op, int a) { return Add({op, a, -1, -1, 0}); }

int TileProgram::num_inputs() const {
  int n = 0;
  for (const TileInstr& i : instrs_)
    if (i.op == TileOp::kInput) n = std::max(n, i.input + 1);
  return n;
}
bool TileProgram::has_reductions() const {
  return std::any_of(instrs_.begin(), instrs_.end(),
                     [](const TileInstr& i) { return IsReduction(i.op); });
}
int TileProgram::transcendentals() const {
  int n = 0;
  for (const TileInstr& i : instrs_)
    if (i.op >= TileOp::kExp && i.op <= TileOp::kSilu && i.op != TileOp::kSquare &&
        i.op != TileOp::kRelu && i.op != TileOp::kReciprocal)
      ++n;
  return n;
}

std::string TileProgram::ToString() const {
  std::string s;
  for (size_t v = 0; v < instrs_.size(); ++v) {
    const TileInstr& i = instrs_[v];
    if (i.op == TileOp::kInput)
      s += fmt::format("%{} = input{}; ", v, i.input);
    else if (i.op == TileOp::kConst)
      s += fmt::format("%{} = {}; ", v, i.value);
    else if (IsBinary(i.op))
      s += fmt::format("%{} = {}(%{}, %{}); ", v, TileOpName(i.op), i.a, i.b);
    else
      s += fmt::format("%{} = {}(%{}); ", v, TileOpName(i.op), i.a);
  }
  s += "out";
  for (int o : outputs_) s += fmt::format(" %{}", o);
  return s;
}

Status TileProgram::Validate(const std::string& where) const {
  auto bad = [&](const std::string& msg) {
    return Status(Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", where, msg)));
  };
  if (outputs_.empty()) return bad("the program has no outputs");
  for (size_t v = 0; v < instrs_.size(); ++v) {
    const TileInstr& i = instrs_[v];
    const int need = i.op == TileOp::kInput || i.op == TileOp::kConst ? 0 : IsBinary(i.op) ? 2 : 1;
    const int operands[2] = {i.a, i.b};
    for (int k = 0; k < need; ++k)
      if (operands[k] < 0 || operands[k] >= static_cast<int>(v))
        return bad(fmt::format("instruction %{} ({}) reads %{}, which is not an earlier value", v,
                               TileOpName(i.op), operands[k]));
    if (i.op == TileOp::kInput && i.input < 0)
      return bad(fmt::format("instruction %{} reads input {}", v, i.input));
  }
  for (int o : outputs_)
    if (o < 0 || o >= static_cast<int>(instrs_.size()))
      return bad(fmt::format("output %{} is not a value of the program", o));
  return Status::Ok();
}

namespace {

ValueShape Broadcast(ValueShape a, ValueShape b) {
  if (a == b) return a;
  return ValueShape::kWide;  // wide with anything, or vector with narrow
}

}  // namespace

Result<TileSchedule> TileSchedule::Make(const TileProgram& program,
                                        const std::vector<ValueShape>& input_shapes,
                                        const std::string& where) {
  FT_RETURN_IF_ERROR(program.Validate(where));
  if (program.num_inputs() > static_cast<int>(input_shapes.size()))
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("{}: the program reads {} inputs, the descriptor has {}", where,
                             program.num_inputs(), input_shapes.size()));
  TileSchedule s;
  s.program_ = program;
  const auto& instrs = program.instrs();
  const int n = static_cast<int>(instrs.size());
  std::vector<int> last_use(n, -1);
  for (int v = 0; v < n; ++v) {
    const TileInstr& i = instrs[v];
    if (i.op == TileOp::kInput) {
      s.shapes_.push_back(input_shapes[i.input]);
    } else if (i.op == TileOp::kConst) {
      s.shapes_.push_back(ValueShape::kNarrow);
    } else if (IsReduction(i.op)) {
      if (s.shapes_[i.a] != ValueShape::kWide)
        return Error(
            ErrorCode::kInvalidArgument,
            fmt::format("{}: instruction %{} reduces %{}, which is not a full row", where, v, i.a));
      s.shapes_.push_back(ValueShape::kNarrow);
    } else {
      s.shapes_.push_back(IsBinary(i.op) ? Broadcast(s.shapes_[i.a], s.shapes_[i.b])
                                         : s.shapes_[i.a]);
    }
    if (i.a >= 0) last_use[i.a] = v;
    if (i.b >= 0) last_use[i.b] = v;
  }
  for (int o : program.outputs()) last_use[o] = n;  // outputs live to the end
  // Linear scan: a value takes a free slot of its shape, freed after its last use.
  std::vector<std::vector<int>> free_slots(3);
  std::vector<ValueShape> slot_shape;
  s.slot_of_.assign(n, -1);
  // Kernels copy every operand in before evaluating anything, so inputs take
  // their slots first; the other values follow in program order.
  std::vector<int> order;
  for (int pass = 0; pass < 2; ++pass)
    for (int v = 0; v < n; ++v)
      if ((instrs[v].op == TileOp::kInput) == (pass == 0)) order.push_back(v);
  for (int v : order) {
    auto& pool = free_slots[static_cast<int>(s.shapes_[v])];
    if (!pool.empty()) {
      s.slot_of_[v] = pool.back();
      pool.pop_back();
    } else {
      s.slot_of_[v] = static_cast<int>(slot_shape.size());
      slot_shape.push_back(s.shapes_[v]);
    }
    // Operands whose last use is this instruction are released after it, so
    // that the result never shares a slot with an operand of another shape.
    const TileInstr& i = instrs[v];
    for (int operand : {i.a, i.b})
      if (operand >= 0 && last_use[operand] == v &&
          (operand != i.b || i.a != i.b))  // release a twice-used operand once
        free_slots[static_cast<int>(s.shapes_[operand])].push_back(s.slot_of_[operand]);
    if (last_use[v] == -1 && instrs[v].op != TileOp::kInput)  // never used: free at once
      free_slots[static_cast<int>(s.shapes_[v])].push_back(s.slot_of_[v]);
  }
  s.slot_shape_ = slot_shape;
  return s;
}

}  // namespace fusetune::kernels
