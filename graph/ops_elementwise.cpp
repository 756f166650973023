// Elementwise ops: unary math, broadcasting binary arithmetic, comparisons,
// logic, Where, Cast and Clip. Floats compute in f32 (f16/bf16 converted at
// the edges), integers in int64.
#include <cmath>
#include <cstring>

#include "graph/op_helpers.h"

namespace fusetune::graph {
namespace {

using namespace ops;

// ---- inference ------------------------------------------------------------

// Copies dimension names from the inputs whose aligned dimension has the same size.
void PropagateSymbols(const InferContext& ctx, TensorType& out) {
  out.symbols.assign(out.dims.size(), "");
  bool any = false;
  for (const TensorType* t : ctx.input_types) {
    if (!t || t->symbols.empty()) continue;
    const size_t off = out.dims.size() - std::min(out.dims.size(), t->dims.size());
    for (size_t i = 0; i < t->dims.size() && off + i < out.dims.size(); ++i)
      if (!t->symbols[i].empty() && t->dims[i] == out.dims[off + i] &&
          out.symbols[off + i].empty()) {
        out.symbols[off + i] = t->symbols[i];
        any = true;
      }
  }
  if (!any) out.symbols.clear();
}

Result<std::vector<TensorType>> InferSameAsInput(const InferContext& ctx) {
  TensorType t = ctx.type(0);
  return std::vector<TensorType>{t};
}

Result<std::vector<TensorType>> InferBroadcast(const InferContext& ctx, DataType out_dtype,
                                               bool require_same_dtype) {
  std::vector<const Dims*> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    shapes.push_back(&ctx.type(i).dims);
    if (require_same_dtype && ctx.type(i).dtype != ctx.type(0).dtype)
      return ctx.Fail(ErrorCode::kShapeMismatch, fmt::format("input 0 is {} but input {} is {}",
                                                             DataTypeName(ctx.type(0).dtype), i,
                                                             DataTypeName(ctx.type(i).dtype)));
  }
  FT_ASSIGN_OR_RETURN(Dims dims, BroadcastDims(ctx, shapes));
  TensorType out;
  out.dtype = out_dtype;
  out.dims = std::move(dims);
  PropagateSymbols(ctx, out);
  return std::vector<TensorType>{out};
}

Result<std::vector<TensorType>> InferArith(const InferContext& ctx) {
  return InferBroadcast(ctx, ctx.type(0).dtype, true);
}
Result<std::vector<TensorType>> InferPow(const InferContext& ctx) {
  return InferBroadcast(ctx, ctx.type(0).dtype, false);
}
Result<std::vector<TensorType>> InferCompare(const InferContext& ctx) {
  return InferBroadcast(ctx, DataType::kBool, true);
}
Result<std::vector<TensorType>> InferLogical(const InferContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.type(i).dtype != DataType::kBool)
      return ctx.Fail(ErrorCode::kShapeMismatch, fmt::format("input {} must be bool", i));
  return InferBroadcast(ctx, DataType::kBool, true);
}
Result<std::vector<TensorType>> InferWhere(const InferContext& ctx) {
  if (ctx.type(0).dtype != DataType::kBool)
    return ctx.Fail(ErrorCode::kShapeMismatch, "condition (input 0) must be bool");
  if (ctx.type(1).dtype != ctx.type(2).dtype)
    return ctx.Fail(ErrorCode::kShapeMismatch, "inputs 1 and 2 must have the same dtype");
  return InferBroadcast(ctx, ctx.type(1).dtype, false);
}
Result<std::vector<TensorType>> InferCast(const InferContext& ctx) {
  FT_ASSIGN_OR_RETURN(int64_t to, ctx.node.attrs.GetInt("to"));
  auto dtype = DataTypeFromOnnx(static_cast<int>(to));
  if (!dtype)
    return ctx.Fail(ErrorCode::kUnsupported,
                    fmt::format("cast to ONNX type {} is not supported", to));
  TensorType t = ctx.type(0);
  t.dtype = *dtype;
  return std::vector<TensorType>{t};
}
Result<std::vector<TensorType>> InferCastLike(const InferContext& ctx) {
  TensorType t = ctx.type(0);
  t.dtype = ctx.type(1).dtype;
  return std::vector<TensorType>{t};
}
Result<std::vector<TensorType>> InferFloatUnary(const InferContext& ctx) {
  if (!IsFloat(ctx.type(0).dtype))
    return ctx.Fail(ErrorCode::kShapeMismatch, fmt::format("input must be a float tensor, not {}",
                                                           DataTypeName(ctx.type(0).dtype)));
  return InferSameAsInput(ctx);
}

// ---- kernels ----------------------------------------------------------------

template <typename T, typename R, typename F>
Tensor BinaryApply(const Tensor& a, const Tensor& b, DataType out_dtype, const Dims& out_dims,
                   F f) {
  Tensor out(out_dtype, out_dims);
  std::array<std::vector<int64_t>, 2> strides{BroadcastStrides(a.dims(), out_dims),
                                              BroadcastStrides(b.dims(), out_dims)};
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  R* po = out.data<R>();
  BroadcastLoop<2>(out_dims, strides, [&](int64_t o, int64_t n, const auto& off, const auto& st) {
    const T* x = pa + off[0];
    const T* y = pb + off[1];
    R* z = po + o;
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t i = 0; i < n; ++i) z[i] = static_cast<R>(f(x[i], y[i]));
    } else if (st[0] == 1 && st[1] == 0) {
      const T yv = *y;
      for (int64_t i = 0; i < n; ++i) z[i] = static_cast<R>(f(x[i], yv));
    } else {
      for (int64_t i = 0; i < n; ++i) z[i] = static_cast<R>(f(x[i * st[0]], y[i * st[1]]));
    }
  });
  return out;
}

// Arithmetic on any numeric dtype; `compare` selects a bool result.
template <typename F>
Tensor NumericBinary(const Tensor& a, const Tensor& b, const TensorType& out, F f, bool compare) {
  const DataType t = a.dtype();
  if (IsFloat(t) && t != DataType::kFloat64) {
    Tensor fa = AsF32(a),
           fb = AsF32(b.dtype() == DataType::kFloat32 ? b : b.CastTo(DataType::kFloat32));
    if (compare) return BinaryApply<float, uint8_t>(fa, fb, DataType::kBool, out.dims, f);
    return FromF32(BinaryApply<float, float>(fa, fb, DataType::kFloat32, out.dims, f), out.dtype);
  }
  if (t == DataType::kFloat64) {
    Tensor bb = b.dtype() == t ? b : b.CastTo(t);
    if (compare) return BinaryApply<double, uint8_t>(a, bb, DataType::kBool, out.dims, f);
    return BinaryApply<double, double>(a, bb, t, out.dims, f);
  }
  Tensor ia = t == DataType::kInt64 ? a : a.CastTo(DataType::kInt64);
  Tensor ib = b.dtype() == DataType::kInt64 ? b : b.CastTo(DataType::kInt64);
  if (compare) return BinaryApply<int64_t, uint8_t>(ia, ib, DataType::kBool, out.dims, f);
  Tensor r = BinaryApply<int64_t, int64_t>(ia, ib, DataType::kInt64, out.dims, f);
  return out.dtype == DataType::kInt64 ? r : r.CastTo(out.dtype);
}

struct AddOp {
  template <typename T>
  T operator()(T x, T y) const {
    return x + y;
  }
};
struct SubOp {
  template <typename T>
  T operator()(T x, T y) const {
    return x - y;
  }
};
struct MulOp {
  template <typename T>
  T operator()(T x, T y) const {
    return x * y;
  }
};
struct DivOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>)
      return y == 0 ? T(0) : x / y;
    else
      return x / y;
  }
};
struct PowOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      T r = 1;
      for (T i = 0; i < y; ++i) r *= x;
      return r;
    } else if constexpr (std::is_same_v<T, float>) {
      if (y == 2.0f) return x * x;
      if (y == 1.0f) return x;
      if (y == 0.5f) return std::sqrt(x);
      return std::pow(x, y);
    } else {
      return std::pow(x, y);
    }
  }
};
struct MinOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
    }
    return std::min(x, y);
  }
};
struct MaxOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
    }
    return std::max(x, y);
  }
};
struct EqualOp {
  template <typename T>
  bool operator()(T x, T y) const {
    return x == y;
  }
};
struct LessOp {
  template <typename T>
  bool operator()(T x, T y) const {
    return x < y;
  }
};
struct GreaterOp {
  template <typename T>
  bool operator()(T x, T y) const {
    return x > y;
  }
};
struct LessEqOp {
  template <typename T>
  bool operator()(T x, T y) const {
    return x <= y;
  }
};
struct GreaterEqOp {
  template <typename T>
  bool operator()(T x, T y) const {
    return x >= y;
  }
};

template <typename Op>
Result<std::vector<Tensor>> RunArith(const KernelContext& ctx) {
  // Variadic ops (Sum, Min, Max, Mean) fold pairwise; binary ops have two inputs.
  Tensor acc = ctx.in(0);
  if (ctx.inputs.size() == 1) acc = acc.Clone();
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    TensorType step = ctx.output_types[0];
    // Intermediate shapes of a variadic fold broadcast pairwise.
    if (i + 1 < ctx.inputs.size()) step.dims = BroadcastPair(acc.dims(), ctx.in(i).dims());
    Tensor rhs = ctx.in(i);
    if (rhs.dtype() != acc.dtype()) rhs = rhs.CastTo(acc.dtype());
    acc = NumericBinary(acc, rhs, step, Op{}, false);
  }
  return std::vector<Tensor>{acc};
}

Result<std::vector<Tensor>> RunMean(const KernelContext& ctx) {
  FT_ASSIGN_OR_RETURN(auto sum, RunArith<AddOp>(ctx));
  Tensor n = Tensor::ScalarF32(static_cast<float>(ctx.inputs.size())).CastTo(sum[0].dtype());
  return std::vector<Tensor>{NumericBinary(sum[0], n, ctx.output_types[0], DivOp{}, false)};
}

template <typename Op>
Result<std::vector<Tensor>> RunCompare(const KernelContext& ctx) {
  Tensor b =
      ctx.in(1).dtype() == ctx.in(0).dtype() ? ctx.in(1) : ctx.in(1).CastTo(ctx.in(0).dtype());
  return std::vector<Tensor>{NumericBinary(ctx.in(0), b, ctx.output_types[0], Op{}, true)};
}

template <typename F>
Result<std::vector<Tensor>> RunLogical(const KernelContext& ctx, F f) {
  return std::vector<Tensor>{BinaryApply<uint8_t, uint8_t>(ctx.in(0), ctx.in(1), DataType::kBool,
                                                           ctx.output_types[0].dims, f)};
}
Result<std::vector<Tensor>> RunAnd(const KernelContext& c) {
  return RunLogical(c, [](uint8_t x, uint8_t y) { return static_cast<uint8_t>(x && y); });
}
Result<std::vector<Tensor>> RunOr(const KernelContext& c) {
  return RunLogical(c, [](uint8_t x, uint8_t y) { return static_cast<uint8_t>(x || y); });
}
Result<std::vector<Tensor>> RunXor(const KernelContext& c) {
  return RunLogical(
      c, [](uint8_t x, uint8_t y) { return static_cast<uint8_t>((x != 0) != (y != 0)); });
}

#define FT_FLOAT_UNARY(NAME, EXPR)                                                       \
  Result<std::vector<Tensor>> Run##NAME(const KernelContext& ctx) {                      \
    return std::vector<Tensor>{                                                          \
        FloatUnary(ctx.in(0), ctx.output_types[0].dtype, [](float x) { return EXPR; })}; \
  }

FT_FLOAT_UNARY(Sqrt, std::sqrt(x))
FT_FLOAT_UNARY(Reciprocal, 1.0f / x)
FT_FLOAT_UNARY(Exp, std::exp(x))
FT_FLOAT_UNARY(Log, std::log(x))
FT_FLOAT_UNARY(Erf, std::erf(x))
FT_FLOAT_UNARY(Tanh, std::tanh(x))
FT_FLOAT_UNARY(Relu, x > 0.0f ? x : 0.0f)
FT_FLOAT_UNARY(Sigmoid, 1.0f / (1.0f + std::exp(-x)))
FT_FLOAT_UNARY(Sin, std::sin(x))
FT_FLOAT_UNARY(Cos, std::cos(x))
FT_FLOAT_UNARY(Softplus, x > 20.0f ? x : std::log1p(std::exp(x)))
FT_FLOAT_UNARY(Floor, std::floor(x))
FT_FLOAT_UNARY(Ceil, std::ceil(x))
FT_FLOAT_UNARY(Round, std::nearbyint(x))
#undef FT_FLOAT_UNARY

Result<std::vector<Tensor>> RunGelu(const KernelContext& ctx) {
  FT_ASSIGN_OR_RETURN(const std::string approx, ctx.node.attrs.GetString("approximate", "none"));
  if (approx == "tanh") {
    return std::vector<Tensor>{FloatUnary(ctx.in(0), ctx.output_types[0].dtype, [](float x) {
      const float k = 0.7978845608028654f;  // sqrt(2/pi)
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    })};
  }
  return std::vector<Tensor>{FloatUnary(ctx.in(0), ctx.output_types[0].dtype, [](float x) {
    return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
  })};
}

Result<std::vector<Tensor>> RunLeakyRelu(const KernelContext& ctx) {
  FT_ASSIGN_OR_RETURN(const float alpha, ctx.node.attrs.GetFloat("alpha", 0.01f));
  return std::vector<Tensor>{FloatUnary(ctx.in(0), ctx.output_types[0].dtype,
                                        [alpha](float x) { return x >= 0 ? x : alpha * x; })};
}

// Neg, Abs, Sign work on floats and integers.
template <typename F>
Tensor SignedUnary(const Tensor& in, const TensorType& out, F f) {
  if (IsFloat(in.dtype())) return FloatUnary(in, out.dtype, f);
  Tensor x = in.dtype() == DataType::kInt64 ? in : in.CastTo(DataType::kInt64);
  Tensor r(DataType::kInt64, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) r.data<int64_t>()[i] = f(x.data<int64_t>()[i]);
  return out.dtype == DataType::kInt64 ? r : r.CastTo(out.dtype);
}
Result<std::vector<Tensor>> RunNeg(const KernelContext& c) {
  return std::vector<Tensor>{SignedUnary(c.in(0), c.output_types[0], [](auto x) { return -x; })};
}
Result<std::vector<Tensor>> RunAbs(const KernelContext& c) {
  return std::vector<Tensor>{
      SignedUnary(c.in(0), c.output_types[0], [](auto x) { return x < 0 ? -x : x; })};
}
Result<std::vector<Tensor>> RunSign(const KernelContext& c) {
  return std::vector<Tensor>{SignedUnary(c.in(0), c.output_types[0], [](auto x) {
    return static_cast<decltype(x)>((x > 0) - (x < 0));
  })};
}

Result<std::vector<Tensor>> RunNot(const KernelContext& ctx) {
  Tensor out(DataType::kBool, ctx.in(0).dims());
  for (int64_t i = 0; i < out.numel(); ++i) out.data<uint8_t>()[i] = !ctx.in(0).data<uint8_t>()[i];
  return std::vector<Tensor>{out};
}

Result<std::vector<Tensor>> RunWhere(const KernelContext& ctx) {
  const Tensor& cond = ctx.in(0);
  const Tensor& x = ctx.in(1);
  const Tensor& y = ctx.in(2);
  const Dims& dims = ctx.output_types[0].dims;
  Tensor out(x.dtype(), dims);
  const size_t es = DataTypeSize(x.dtype());
  std::array<std::vector<int64_t>, 3> strides{BroadcastStrides(cond.dims(), dims),
                                              BroadcastStrides(x.dims(), dims),
                                              BroadcastStrides(y.dims(), dims)};
  const uint8_t* pc = cond.data<uint8_t>();
  const std::byte* px = x.raw();
  const std::byte* py = y.raw();
  std::byte* po = out.raw();
  BroadcastLoop<3>(dims, strides, [&](int64_t o, int64_t n, const auto& off, const auto& st) {
    for (int64_t i = 0; i < n; ++i) {
      const bool c = pc[off[0] + i * st[0]] != 0;
      const std::byte* src = c ? px + (off[1] + i * st[1]) * es : py + (off[2] + i * st[2]) * es;
      std::memcpy(po + (o + i) * es, src, es);
    }
  });
  return std::vector<Tensor>{out};
}

Result<std::vector<Tensor>> RunCast(const KernelContext& ctx) {
  return std::vector<Tensor>{ctx.in(0).CastTo(ctx.output_types[0].dtype)};
}

Result<std::vector<TensorType>> InferClip(const InferContext& ctx) { return InferSameAsInput(ctx); }

Result<std::vector<Tensor>> RunClip(const KernelContext& ctx) {
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (ctx.opset < 11) {
    FT_ASSIGN_OR_RETURN(lo, ctx.node.attrs.GetFloat("min", lo));
    FT_ASSIGN_OR_RETURN(hi, ctx.node.attrs.GetFloat("max", hi));
  } else {
    if (ctx.has_input(1)) lo = static_cast<float>(ctx.in(1).GetAsDouble(0));
    if (ctx.has_input(2)) hi = static_cast<float>(ctx.in(2).GetAsDouble(0));
  }
  return std::vector<Tensor>{FloatUnary(ctx.in(0), ctx.output_types[0].dtype, [lo, hi](float x) {
    return std::min(std::max(x, lo), hi);
  })};
}

// ---- costs --------------------------------------------------------------------

OpCost PerOutputElement(const Node&, const std::vector<const TensorType*>& in,
                        const std::vector<const TensorType*>& out) {
  return {OutputElements(out) * std::max<double>(1, static_cast<double>(in.size()) - 1), 0};
}
OpCost Transcendental(const Node&, const std::vector<const TensorType*>&,
                      const std::vector<const TensorType*>& out) {
  return {OutputElements(out), OutputElements(out)};
}
OpCost GeluCost(const Node&, const std::vector<const TensorType*>&,
                const std::vector<const TensorType*>& out) {
  return {8 * OutputElements(out), OutputElements(out)};
}

}  // namespace

void AppendElementwiseOps(std::vector<OpSchema>& t) {
  const OpKind ew = OpKind::kElementwise;
  auto add = [&](const char* name, int min_in, int max_in, InferFn infer, KernelFn run,
                 CostFn cost) {
    t.push_back(OpSchema{name, ew, min_in, max_in, infer, run, cost});
  };
  add("Add", 2, 2, InferArith, RunArith<AddOp>, PerOutputElement);
  add("Sub", 2, 2, InferArith, RunArith<SubOp>, PerOutputElement);
  add("Mul", 2, 2, InferArith, RunArith<MulOp>, PerOutputElement);
  add("Div", 2, 2, InferArith, RunArith<DivOp>, PerOutputElement);
  add("Pow", 2, 2, InferPow, RunArith<PowOp>, Transcendental);
  add("Sum", 1, -1, InferArith, RunArith<AddOp>, PerOutputElement);
  add("Mean", 1, -1, InferArith, RunMean, PerOutputElement);
  add("Min", 1, -1, InferArith, RunArith<MinOp>, PerOutputElement);
  add("Max", 1, -1, InferArith, RunArith<MaxOp>, PerOutputElement);
  add("Equal", 2, 2, InferCompare, RunCompare<EqualOp>, PerOutputElement);
  add("Less", 2, 2, InferCompare, RunCompare<LessOp>, PerOutputElement);
  add("Greater", 2, 2, InferCompare, RunCompare<GreaterOp>, PerOutputElement);
  add("LessOrEqual", 2, 2, InferCompare, RunCompare<LessEqOp>, PerOutputElement);
  add("GreaterOrEqual", 2, 2, InferCompare, RunCompare<GreaterEqOp>, PerOutputElement);
  add("And", 2, 2, InferLogical, RunAnd, PerOutputElement);
  add("Or", 2, 2, InferLogical, RunOr, PerOutputElement);
  add("Xor", 2, 2, InferLogical, RunXor, PerOutputElement);
  add("Not", 1, 1, InferLogical, RunNot, PerOutputElement);
  add("Where", 3, 3, InferWhere, RunWhere, PerOutputElement);
  add("Cast", 1, 1, InferCast, RunCast, NoCost);
  add("CastLike", 2, 2, InferCastLike, RunCast, NoCost);
  add("Clip", 1, 3, InferClip, RunClip, PerOutputElement);
  add("Neg", 1, 1, InferSameAsInput, RunNeg, PerOutputElement);
  add("Abs", 1, 1, InferSameAsInput, RunAbs, PerOutputElement);
  add("Sign", 1, 1, InferSameAsInput, RunSign, PerOutputElement);
  add("Sqrt", 1, 1, InferFloatUnary, RunSqrt, Transcendental);
  add("Reciprocal", 1, 1, InferFloatUnary, RunReciprocal, PerOutputElement);
  add("Exp", 1, 1, InferFloatUnary, RunExp, Transcendental);
  add("Log", 1, 1, InferFloatUnary, RunLog, Transcendental);
  add("Erf", 1, 1, InferFloatUnary, RunErf, Transcendental);
  add("Tanh", 1, 1, InferFloatUnary, RunTanh, Transcendental);
  add("Relu", 1, 1, InferFloatUnary, RunRelu, PerOutputElement);
  add("LeakyRelu", 1, 1, InferFloatUnary, RunLeakyRelu, PerOutputElement);
  add("Sigmoid", 1, 1, InferFloatUnary, RunSigmoid, Transcendental);
  add("Sin", 1, 1, InferFloatUnary, RunSin, Transcendental);
  add("Cos", 1, 1, InferFloatUnary, RunCos, Transcendental);
  add("Softplus", 1, 1, InferFloatUnary, RunSoftplus, Transcendental);
  add("Floor", 1, 1, InferFloatUnary, RunFloor, PerOutputElement);
  add("Ceil", 1, 1, InferFloatUnary, RunCeil, PerOutputElement);
  add("Round", 1, 1, InferFloatUnary, RunRound, PerOutputElement);
  add("Gelu", 1, 1, InferFloatUnary, RunGelu, GeluCost);
}

}  // namespace fusetune::graph
