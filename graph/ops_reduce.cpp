// Reductions, normalisations and matrix products: MatMul, Gemm, Reduce*,
// Softmax, LogSoftmax, LayerNormalization. Accumulation is in double for the
// reductions (this is the oracle); products use Eigen in f32.
#include <Eigen/Core>
#include <cmath>
#include <limits>

#include "graph/op_helpers.h"

namespace fusetune::graph {
namespace {

using namespace ops;
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix>;
using MutMap = Eigen::Map<RowMatrix>;

// ---- MatMul -------------------------------------------------------------------

struct MatMulShape {
  Dims a, b;   // after 1-D promotion
  Dims batch;  // broadcast batch dims
  int64_t m, k, n;
  Dims out;  // final output dims (promoted axes removed)
};

Result<MatMulShape> ResolveMatMul(const InferContext* ctx, const Dims& a_in, const Dims& b_in) {
  auto fail = [&](const std::string& msg) -> Error {
    return ctx ? ctx->Fail(ErrorCode::kShapeMismatch, msg) : Error(ErrorCode::kShapeMismatch, msg);
  };
  if (a_in.empty() || b_in.empty()) return fail("MatMul inputs must have rank >= 1");
  MatMulShape s;
  s.a = a_in.size() == 1 ? Dims{1, a_in[0]} : a_in;
  s.b = b_in.size() == 1 ? Dims{b_in[0], 1} : b_in;
  s.m = s.a[s.a.size() - 2];
  s.k = s.a.back();
  s.n = s.b.back();
  if (s.b[s.b.size() - 2] != s.k)
    return fail(
        fmt::format("inner dimensions differ: {} x {}", DimsToString(a_in), DimsToString(b_in)));
  Dims ba(s.a.begin(), s.a.end() - 2), bb(s.b.begin(), s.b.end() - 2);
  const size_t rank = std::max(ba.size(), bb.size());
  s.batch.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + ba.size() >= rank ? ba[i + ba.size() - rank] : 1;
    const int64_t db = i + bb.size() >= rank ? bb[i + bb.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      return fail(fmt::format("batch dimensions do not broadcast: {} x {}", DimsToString(a_in),
                              DimsToString(b_in)));
    s.batch[i] = std::max(da, db);
  }
  s.out = s.batch;
  if (a_in.size() > 1) s.out.push_back(s.m);
  if (b_in.size() > 1) s.out.push_back(s.n);
  return s;
}

Result<std::vector<TensorType>> InferMatMul(const InferContext& ctx) {
  if (!IsFloat(ctx.type(0).dtype) || ctx.type(0).dtype != ctx.type(1).dtype)
    return ctx.Fail(ErrorCode::kShapeMismatch, "MatMul needs two float inputs of the same dtype");
  FT_ASSIGN_OR_RETURN(MatMulShape s, ResolveMatMul(&ctx, ctx.type(0).dims, ctx.type(1).dims));
  TensorType out;
  out.dtype = ctx.type(0).dtype;
  out.dims = s.out;
  // Keep names of batch and row dimensions from A (the sequence axis, typically).
  const TensorType& a = ctx.type(0);
  if (!a.symbols.empty() && a.rank() >= 2 && out.rank() >= 2) {
    out.symbols.assign(out.dims.size(), "");
    const size_t off = out.dims.size() - 1 - (a.dims.size() - 1);
    for (size_t i = 0; i + 1 < a.dims.size(); ++i)
      if (off + i < out.dims.size() && out.dims[off + i] == a.dims[i])
        out.symbols[off + i] = a.symbols[i];
  }
  return std::vector<TensorType>{out};
}

// C[b] = A[b] x B[b] with broadcast batch, rows split across threads.
void BatchedMatMul(const float* a, const float* b, float* c, const MatMulShape& s) {
  const int64_t batches = NumElements(s.batch);
  const Dims ba(s.a.begin(), s.a.end() - 2), bb(s.b.begin(), s.b.end() - 2);
  const auto sa = BroadcastStrides(ba, s.batch), sb = BroadcastStrides(bb, s.batch);
  const int64_t row_block =
      std::max<int64_t>(1, std::min<int64_t>(s.m, 65536 / std::max<int64_t>(s.n, 1)));
  const int64_t blocks_per_batch = (s.m + row_block - 1) / row_block;
  ParallelRange(batches * blocks_per_batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      const int64_t bi = job / blocks_per_batch, blk = job % blocks_per_batch;
      int64_t oa = 0, ob = 0, rem = bi;
      for (int64_t d = static_cast<int64_t>(s.batch.size()) - 1; d >= 0; --d) {
        const int64_t idx = rem % s.batch[d];
        rem /= s.batch[d];
        oa += idx * sa[d];
        ob += idx * sb[d];
      }
      const int64_t r0 = blk * row_block, rows = std::min(row_block, s.m - r0);
      ConstMap A(a + oa * s.m * s.k + r0 * s.k, rows, s.k);
      ConstMap B(b + ob * s.k * s.n, s.k, s.n);
      MutMap C(c + bi * s.m * s.n + r0 * s.n, rows, s.n);
      C.noalias() = A * B;
    }
  });
}

Result<std::vector<Tensor>> RunMatMul(const KernelContext& ctx) {
  auto s = ResolveMatMul(nullptr, ctx.in(0).dims(), ctx.in(1).dims()).value();
  Tensor a = AsF32(ctx.in(0)), b = AsF32(ctx.in(1));
  Tensor out(DataType::kFloat32, ctx.output_types[0].dims);
  BatchedMatMul(a.data<float>(), b.data<float>(), out.data<float>(), s);
  return std::vector<Tensor>{FromF32(std::move(out), ctx.output_types[0].dtype)};
}

OpCost MatMulCost(const Node&, const std::vector<const TensorType*>& in,
                  const std::vector<const TensorType*>& out) {
  const double k = static_cast<double>(in[0]->dims.back());
  return {2.0 * k * OutputElements(out), 0};
}

// ---- Gemm ---------------------------------------------------------------------

Result<std::vector<TensorType>> InferGemm(const InferContext& ctx) {
  const Dims& a = ctx.type(0).dims;
  const Dims& b = ctx.type(1).dims;
  if (a.size() != 2 || b.size() != 2)
    return ctx.Fail(ErrorCode::kShapeMismatch, "Gemm inputs A and B must be 2-D");
  FT_ASSIGN_OR_RETURN(const auto attr_transA, ctx.node.attrs.GetInt("transA", 0));
  const bool ta = attr_transA != 0;
  FT_ASSIGN_OR_RETURN(const auto attr_transB, ctx.node.attrs.GetInt("transB", 0));
  const bool tb = attr_transB != 0;
  const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb)
    return ctx.Fail(ErrorCode::kShapeMismatch, fmt::format("inner dimensions differ: A {} B {}",
                                                           DimsToString(a), DimsToString(b)));
  if (ctx.has_input(2)) {
    Dims mn{m, n};
    FT_ASSIGN_OR_RETURN(Dims bc, BroadcastDims(ctx, {&ctx.type(2).dims, &mn}));
    if (bc != mn) return ctx.Fail(ErrorCode::kShapeMismatch, "C does not broadcast to [M, N]");
  }
  return One(ctx.type(0).dtype, {m, n});
}

Result<std::vector<Tensor>> RunGemm(const KernelContext& ctx) {
  const auto& at = ctx.node.attrs;
  FT_ASSIGN_OR_RETURN(const auto attr_transA, at.GetInt("transA", 0));
  FT_ASSIGN_OR_RETURN(const auto attr_transB, at.GetInt("transB", 0));
  const bool ta = attr_transA != 0, tb = attr_transB != 0;
  FT_ASSIGN_OR_RETURN(const auto attr_alpha, at.GetFloat("alpha", 1.0f));
  FT_ASSIGN_OR_RETURN(const auto attr_beta, at.GetFloat("beta", 1.0f));
  const float alpha = attr_alpha, beta = attr_beta;
  Tensor a = AsF32(ctx.in(0)), b = AsF32(ctx.in(1));
  const int64_t m = ctx.output_types[0].dims[0], n = ctx.output_types[0].dims[1];
  const int64_t k = ta ? a.dims()[0] : a.dims()[1];
  Tensor out(DataType::kFloat32, {m, n});
  ConstMap A(a.data<float>(), a.dims()[0], a.dims()[1]);
  ConstMap B(b.data<float>(), b.dims()[0], b.dims()[1]);
  MutMap C(out.data<float>(), m, n);
  if (ta && tb)
    C.noalias() = alpha * (A.transpose() * B.transpose());
  else if (ta)
    C.noalias() = alpha * (A.transpose() * B);
  else if (tb)
    C.noalias() = alpha * (A * B.transpose());
  else
    C.noalias() = alpha * (A * B);
  (void)k;
  if (ctx.has_input(2) && beta != 0.0f) {
    Tensor c = AsF32(ctx.in(2));
    const auto strides = BroadcastStrides(c.dims(), {m, n});
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        C(i, j) += beta * c.data<float>()[i * strides[0] + j * strides[1]];
  }
  return std::vector<Tensor>{FromF32(std::move(out), ctx.output_types[0].dtype)};
}

OpCost GemmCost(const Node& node, const std::vector<const TensorType*>& in,
                const std::vector<const TensorType*>& out) {
  const bool ta = node.attrs.GetInt("transA", 0).value() != 0;
  const double k = static_cast<double>(ta ? in[0]->dims[0] : in[0]->dims[1]);
  return {(2.0 * k + 1) * OutputElements(out), 0};
}

// ---- Reductions ---------------------------------------------------------------

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL2 };

// Axes of a reduce node: attribute (before opset 18, 13 for ReduceSum) or input 1.
Result<std::vector<int64_t>> ReduceAxes(const InferContext& ctx, bool* reduce_all) {
  bool present = false;
  FT_ASSIGN_OR_RETURN(auto axes, AxesFromAttrOrInput(ctx, 1, &present));
  FT_ASSIGN_OR_RETURN(const auto attr_noop_with_empty_axes,
                      ctx.node.attrs.GetInt("noop_with_empty_axes", 0));
  const bool noop = attr_noop_with_empty_axes != 0;
  *reduce_all = axes.empty() && !noop;
  const int64_t rank = ctx.type(0).rank();
  if (rank == 0 && !axes.empty())  // NormalizeAxis lets a scalar's axis -1 or 0 pass
    return ctx.Fail(ErrorCode::kInvalidArgument,
                    fmt::format("reduces axis {} of a scalar, which has none", axes[0]));
  for (int64_t& a : axes) {
    FT_ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, a, rank));
  }
  return axes;
}

Dims ReducedDims(const Dims& in, const std::vector<bool>& reduced, bool keepdims) {
  Dims out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!reduced[i])
      out.push_back(in[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

std::vector<bool> ReducedMask(int64_t rank, const std::vector<int64_t>& axes, bool all) {
  std::vector<bool> mask(rank, all);
  for (int64_t a : axes) mask[a] = true;
  return mask;
}

Result<std::vector<TensorType>> InferReduce(const InferContext& ctx) {
  bool all = false;
  FT_ASSIGN_OR_RETURN(auto axes, ReduceAxes(ctx, &all));
  FT_ASSIGN_OR_RETURN(const auto attr_keepdims, ctx.node.attrs.GetInt("keepdims", 1));
  const bool keep = attr_keepdims != 0;
  TensorType out;
  out.dtype = ctx.type(0).dtype;
  out.dims = ReducedDims(ctx.type(0).dims, ReducedMask(ctx.type(0).rank(), axes, all), keep);
  return std::vector<TensorType>{out};
}

template <ReduceKind K>
Result<std::vector<Tensor>> RunReduce(const KernelContext& ctx) {
  Tensor x = AsF32(ctx.in(0));
  const int64_t rank = x.rank();
  auto axes = AxesFromAttrOrInput(ctx, 1);
  for (int64_t& a : axes) a = WrapAxis(a, rank);
  FT_ASSIGN_OR_RETURN(const auto attr_noop_with_empty_axes,
                      ctx.node.attrs.GetInt("noop_with_empty_axes", 0));
  const bool noop = attr_noop_with_empty_axes != 0;
  const auto mask = ReducedMask(rank, axes, axes.empty() && !noop);
  // Output offset of each input element: strides of the kept-dims output, 0 on reduced axes.
  const Dims kept = ReducedDims(x.dims(), mask, true);
  const auto kept_strides = RowMajorStrides(kept);
  std::vector<int64_t> ostr(rank);
  for (int64_t i = 0; i < rank; ++i) ostr[i] = mask[i] ? 0 : kept_strides[i];
  const int64_t out_n = NumElements(kept);
  double init = 0;
  if constexpr (K == ReduceKind::kMax) init = -std::numeric_limits<double>::infinity();
  if constexpr (K == ReduceKind::kMin) init = std::numeric_limits<double>::infinity();
  if constexpr (K == ReduceKind::kProd) init = 1;
  std::vector<double> acc(out_n, init);
  const float* px = x.data<float>();
  std::vector<int64_t> idx(rank, 0);
  int64_t o = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = px[i];
    if constexpr (K == ReduceKind::kMax)
      acc[o] = std::max(acc[o], v);
    else if constexpr (K == ReduceKind::kMin)
      acc[o] = std::min(acc[o], v);
    else if constexpr (K == ReduceKind::kProd)
      acc[o] *= v;
    else if constexpr (K == ReduceKind::kSumSquare || K == ReduceKind::kL2)
      acc[o] += v * v;
    else
      acc[o] += v;
    for (int64_t d = rank - 1; d >= 0; --d) {  // odometer over the input index
      o += ostr[d];
      if (++idx[d] < x.dims()[d]) break;
      o -= ostr[d] * idx[d];
      idx[d] = 0;
    }
  }
  const double count = out_n ? static_cast<double>(x.numel()) / out_n : 1;
  Tensor out(DataType::kFloat32, ctx.output_types[0].dims);
  for (int64_t i = 0; i < out_n; ++i) {
    double v = acc[i];
    if constexpr (K == ReduceKind::kMean) v /= count;
    if constexpr (K == ReduceKind::kL2) v = std::sqrt(v);
    out.data<float>()[i] = static_cast<float>(v);
  }
  return std::vector<Tensor>{FromF32(std::move(out), ctx.output_types[0].dtype)};
}

OpCost ReduceCost(const Node&, const std::vector<const TensorType*>& in,
                  const std::vector<const TensorType*>&) {
  return {static_cast<double>(in[0]->numel()), 0};
}

// ---- Softmax / LogSoftmax -----------------------------------------------------

Result<std::vector<TensorType>> InferSoftmax(const InferContext& ctx) {
  const int64_t fallback = ctx.opset >= 13 ? -1 : 1;
  FT_ASSIGN_OR_RETURN(int64_t axis, ctx.node.attrs.GetInt("axis", fallback));
  FT_RETURN_IF_ERROR(NormalizeAxis(ctx, axis, ctx.type(0).rank()));
  if (!IsFloat(ctx.type(0).dtype))
    return ctx.Fail(ErrorCode::kShapeMismatch, "input must be float");
  return std::vector<TensorType>{ctx.type(0)};
}

template <bool kLog>
Result<std::vector<Tensor>> RunSoftmax(const KernelContext& ctx) {
  Tensor x = AsF32(ctx.in(0));
  const int64_t rank = x.rank();
  FT_ASSIGN_OR_RETURN(const auto attr_axis,
                      ctx.node.attrs.GetInt("axis", ctx.opset >= 13 ? -1 : 1));
  const int64_t axis = WrapAxis(attr_axis, rank);
  // Opset < 13 flattens to 2-D at `axis`; opset >= 13 normalises along `axis` alone.
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) {
    if (i < axis)
      outer *= x.dims()[i];
    else if (i == axis || ctx.opset < 13)
      n *= x.dims()[i];
    else
      inner *= x.dims()[i];
  }
  if (rank == 0) n = 1;
  Tensor out(DataType::kFloat32, x.dims());
  const float* px = x.data<float>();
  float* po = out.data<float>();
  ParallelRange(outer * inner, 64, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t base = (r / inner) * n * inner + r % inner;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j) mx = std::max<double>(mx, px[base + j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(px[base + j * inner] - mx);
      for (int64_t j = 0; j < n; ++j) {
        const double v = px[base + j * inner] - mx;
        po[base + j * inner] = static_cast<float>(kLog ? v - std::log(sum) : std::exp(v) / sum);
      }
    }
  });
  return std::vector<Tensor>{FromF32(std::move(out), ctx.output_types[0].dtype)};
}

OpCost SoftmaxCost(const Node&, const std::vector<const TensorType*>& in,
                   const std::vector<const TensorType*>&) {
  const double n = static_cast<double>(in[0]->numel());
  return {4 * n, n};
}

// ---- LayerNormalization -------------------------------------------------------

Result<std::vector<TensorType>> InferLayerNorm(const InferContext& ctx) {
  const TensorType& x = ctx.type(0);
  // (NormalizeAxis takes axis -1 of a scalar, which has no dimension to
  // normalise: onnx_import_fuzz)
  if (x.rank() == 0) return ctx.Fail(ErrorCode::kShapeMismatch, "input X is a scalar");
  FT_ASSIGN_OR_RETURN(int64_t axis, ctx.node.attrs.GetInt("axis", -1));
  FT_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, x.rank()));
  const Dims norm(x.dims.begin() + axis, x.dims.end());
  for (size_t i = 1; i <= 2 && i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    Dims d = norm;
    FT_ASSIGN_OR_RETURN(Dims bc, BroadcastDims(ctx, {&ctx.type(i).dims, &d}));
    if (bc != norm)
      return ctx.Fail(ErrorCode::kShapeMismatch,
                      fmt::format("{} {} does not broadcast to the normalised shape {}",
                                  i == 1 ? "scale" : "bias", DimsToString(ctx.type(i).dims),
                                  DimsToString(norm)));
  }
  std::vector<TensorType> outs{x};
  TensorType stat;
  stat.dtype = DataType::kFloat32;
  stat.dims = x.dims;
  for (int64_t i = axis; i < x.rank(); ++i) stat.dims[i] = 1;
  for (size_t i = 1; i < ctx.node.outputs.size(); ++i) outs.push_back(stat);
  return outs;
}

Result<std::vector<Tensor>> RunLayerNorm(const KernelContext& ctx) {
  Tensor x = AsF32(ctx.in(0));
  FT_ASSIGN_OR_RETURN(const auto attr_axis, ctx.node.attrs.GetInt("axis", -1));
  const int64_t axis = WrapAxis(attr_axis, x.rank());
  FT_ASSIGN_OR_RETURN(const double eps, ctx.node.attrs.GetFloat("epsilon", 1e-5f));
  int64_t rows = 1, cols = 1;
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? rows : cols) *= x.dims()[i];
  const Dims norm(x.dims().begin() + axis, x.dims().end());
  auto param = [&](size_t i, float fallback) {
    if (!ctx.has_input(i)) {
      Tensor t(DataType::kFloat32, norm);
      for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = fallback;
      return t;
    }
    Tensor p = AsF32(ctx.in(i));
    if (p.dims() == norm) return p;
    Tensor t(DataType::kFloat32, norm);  // broadcast to the normalised shape
    const auto st = BroadcastStrides(p.dims(), norm);
    std::vector<int64_t> idx(norm.size(), 0);
    for (int64_t k = 0; k < t.numel(); ++k) {
      int64_t rem = k, off = 0;
      for (int64_t d = static_cast<int64_t>(norm.size()) - 1; d >= 0; --d) {
        off += (rem % norm[d]) * st[d];
        rem /= norm[d];
      }
      t.data<float>()[k] = p.data<float>()[off];
    }
    return t;
  };
  Tensor scale = param(1, 1.0f), bias = param(2, 0.0f);
  Tensor y(DataType::kFloat32, x.dims());
  Tensor mean_t(DataType::kFloat32,
                ctx.output_types.size() > 1 ? ctx.output_types[1].dims : Dims{rows});
  Tensor inv_t(DataType::kFloat32,
               ctx.output_types.size() > 2 ? ctx.output_types[2].dims : Dims{rows});
  ParallelRange(rows, 16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* px = x.data<float>() + r * cols;
      double mean = 0, var = 0;
      for (int64_t j = 0; j < cols; ++j) mean += px[j];
      mean /= static_cast<double>(cols);
      for (int64_t j = 0; j < cols; ++j) var += (px[j] - mean) * (px[j] - mean);
      var /= static_cast<double>(cols);
      const double inv = 1.0 / std::sqrt(var + eps);
      float* py = y.data<float>() + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        py[j] = static_cast<float>((px[j] - mean) * inv * scale.data<float>()[j] +
                                   bias.data<float>()[j]);
      mean_t.data<float>()[r] = static_cast<float>(mean);
      inv_t.data<float>()[r] = static_cast<float>(inv);
    }
  });
  std::vector<Tensor> outs{FromF32(std::move(y), ctx.output_types[0].dtype)};
  if (ctx.output_types.size() > 1) outs.push_back(mean_t);
  if (ctx.output_types.size() > 2) outs.push_back(inv_t);
  return outs;
}

OpCost LayerNormCost(const Node&, const std::vector<const TensorType*>& in,
                     const std::vector<const TensorType*>&) {
  const double n = static_cast<double>(in[0]->numel());
  return {8 * n, n / std::max<double>(1, static_cast<double>(in[0]->dims.back()))};
}

}  // namespace

void AppendReductionOps(std::vector<OpSchema>& t) {
  t.push_back({"MatMul", OpKind::kMatMul, 2, 2, InferMatMul, RunMatMul, MatMulCost});
  t.push_back({"Gemm", OpKind::kMatMul, 2, 3, InferGemm, RunGemm, GemmCost});
  const OpKind red = OpKind::kReduction;
  t.push_back({"ReduceSum", red, 1, 2, InferReduce, RunReduce<ReduceKind::kSum>, ReduceCost});
  t.push_back({"ReduceMean", red, 1, 2, InferReduce, RunReduce<ReduceKind::kMean>, ReduceCost});
  t.push_back({"ReduceMax", red, 1, 2, InferReduce, RunReduce<ReduceKind::kMax>, ReduceCost});
  t.push_back({"ReduceMin", red, 1, 2, InferReduce, RunReduce<ReduceKind::kMin>, ReduceCost});
  t.push_back({"ReduceProd", red, 1, 2, InferReduce, RunReduce<ReduceKind::kProd>, ReduceCost});
  t.push_back(
      {"ReduceSumSquare", red, 1, 2, InferReduce, RunReduce<ReduceKind::kSumSquare>, ReduceCost});
  t.push_back({"ReduceL2", red, 1, 2, InferReduce, RunReduce<ReduceKind::kL2>, ReduceCost});
  const OpKind norm = OpKind::kNormalization;
  t.push_back({"Softmax", norm, 1, 1, InferSoftmax, RunSoftmax<false>, SoftmaxCost});
  t.push_back({"LogSoftmax", norm, 1, 1, InferSoftmax, RunSoftmax<true>, SoftmaxCost});
  t.push_back({"LayerNormalization", norm, 1, 3, InferLayerNorm, RunLayerNorm, LayerNormCost});
}

}  // namespace fusetune::graph
