// Data movement and constant-producing ops: Transpose, Reshape, Flatten,
// Squeeze, Unsqueeze, Concat, Split, Slice, Gather, Expand, Tile, Trilu,
// Shape, Size, ConstantOfShape, Range, Constant, Identity, Dropout.
#include <cmath>
#include <cstring>
#include <numeric>

#include "graph/op_helpers.h"

namespace fusetune::graph {
namespace {

using namespace ops;

// out[i...] = src[offset + sum(i_d * strides_d)], any element size.
Tensor StridedCopy(const Tensor& src, const Dims& out_dims, const std::vector<int64_t>& strides,
                   int64_t offset) {
  Tensor out(src.dtype(), out_dims);
  const size_t es = DataTypeSize(src.dtype());
  const std::byte* ps = src.raw() + offset * static_cast<int64_t>(es);
  std::byte* po = out.raw();
  std::array<std::vector<int64_t>, 1> st{strides};
  BroadcastLoop<1>(out_dims, st, [&](int64_t o, int64_t n, const auto& off, const auto& inner) {
    if (inner[0] == 1) {
      std::memcpy(po + o * es, ps + off[0] * es, n * es);
      return;
    }
    if (es == 4) {
      auto* d = reinterpret_cast<uint32_t*>(po) + o;
      const auto* s = reinterpret_cast<const uint32_t*>(ps) + off[0];
      for (int64_t i = 0; i < n; ++i) d[i] = s[i * inner[0]];
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(po + (o + i) * es, ps + (off[0] + i * inner[0]) * es, es);
  });
  return out;
}

TensorType WithDims(const TensorType& like, Dims dims) {
  TensorType t;
  t.dtype = like.dtype;
  t.dims = std::move(dims);
  return t;
}

// ---- Transpose ------------------------------------------------------------------

Result<std::vector<int64_t>> TransposePerm(const Node& node, int64_t rank) {
  std::vector<int64_t> perm(rank);
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (node.attrs.Has("perm")) {
    FT_ASSIGN_OR_RETURN(perm, node.attrs.GetInts("perm"));
  }
  return perm;
}

Result<std::vector<TensorType>> InferTranspose(const InferContext& ctx) {
  const TensorType& x = ctx.type(0);
  FT_ASSIGN_OR_RETURN(auto perm, TransposePerm(ctx.node, x.rank()));
  std::vector<bool> seen(x.rank(), false);
  if (static_cast<int64_t>(perm.size()) != x.rank())
    return ctx.Fail(ErrorCode::kInvalidArgument, "perm length differs from the input rank");
  TensorType out = WithDims(x, {});
  for (int64_t p : perm) {
    if (p < 0 || p >= x.rank() || seen[p])
      return ctx.Fail(ErrorCode::kInvalidArgument, "perm is not a permutation");
    seen[p] = true;
    out.dims.push_back(x.dims[p]);
    if (!x.symbols.empty()) out.symbols.push_back(x.symbols[p]);
  }
  return std::vector<TensorType>{out};
}

Result<std::vector<Tensor>> RunTranspose(const KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto perm = TransposePerm(ctx.node, x.rank()).value();
  const auto in_strides = RowMajorStrides(x.dims());
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[perm[i]];
  return std::vector<Tensor>{StridedCopy(x, ctx.output_types[0].dims, strides, 0)};
}

// ---- Reshape family (views: output shares the input buffer) ---------------------

Result<std::vector<TensorType>> InferReshape(const InferContext& ctx) {
  FT_ASSIGN_OR_RETURN(const Tensor* shape_t, ctx.RequireConstant(1, "shape"));
  const auto shape = shape_t->ToInt64Vector();
  const TensorType& x = ctx.type(0);
  FT_ASSIGN_OR_RETURN(const auto attr_allowzero, ctx.node.attrs.GetInt("allowzero", 0));
  const bool allowzero = attr_allowzero != 0;
  Dims dims;
  int64_t infer_at = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == 0 && !allowzero) {
      if (i >= x.dims.size())
        return ctx.Fail(ErrorCode::kShapeMismatch,
                        fmt::format("shape[{}] = 0 copies a dimension the input lacks", i));
      d = x.dims[i];
    }
    if (d == -1) {
      if (infer_at >= 0) return ctx.Fail(ErrorCode::kInvalidArgument, "shape has more than one -1");
      infer_at = static_cast<int64_t>(i);
      dims.push_back(1);
      continue;
    }
    if (d < 0)
      return ctx.Fail(ErrorCode::kInvalidArgument, fmt::format("shape[{}] = {} is negative", i, d));
    if (__builtin_mul_overflow(known, d, &known))
      return ctx.Fail(ErrorCode::kShapeMismatch,
                      fmt::format("shape {} is too large", DimsToString(shape)));
    dims.push_back(d);
  }
  if (infer_at >= 0) {
    if (known == 0 || x.numel() % known != 0)
      return ctx.Fail(
          ErrorCode::kShapeMismatch,
          fmt::format("cannot reshape {} to {}", DimsToString(x.dims), DimsToString(shape)));
    dims[infer_at] = x.numel() / known;
  }
  if (NumElements(dims) != x.numel())
    return ctx.Fail(ErrorCode::kShapeMismatch,
                    fmt::format("cannot reshape {} ({} elements) to {}", DimsToString(x.dims),
                                x.numel(), DimsToString(dims)));
  return std::vector<TensorType>{WithDims(x, dims)};
}

Result<std::vector<Tensor>> RunView(const KernelContext& ctx) {
  return std::vector<Tensor>{ctx.in(0).Reshaped(ctx.output_types[0].dims)};
}

Result<std::vector<TensorType>> InferFlatten(const InferContext& ctx) {
  const TensorType& x = ctx.type(0);
  FT_ASSIGN_OR_RETURN(int64_t axis, ctx.node.attrs.GetInt("axis", 1));
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis > x.rank())
    return ctx.Fail(ErrorCode::kInvalidArgument, "axis out of range");
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? a : b) *= x.dims[i];
  return std::vector<TensorType>{WithDims(x, {a, b})};
}

Result<std::vector<TensorType>> InferSqueeze(const InferContext& ctx) {
  const TensorType& x = ctx.type(0);
  bool present = false;
  FT_ASSIGN_OR_RETURN(auto axes, AxesFromAttrOrInput(ctx, 1, &present));
  std::vector<bool> drop(x.rank(), false);
  if (axes.empty()) {
    for (int64_t i = 0; i < x.rank(); ++i) drop[i] = x.dims[i] == 1;
  }
  for (int64_t a : axes) {
    FT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, a, x.rank()));
    if (x.dims[axis] != 1)
      return ctx.Fail(ErrorCode::kShapeMismatch,
                      fmt::format("cannot squeeze axis {} of size {}", axis, x.dims[axis]));
    drop[axis] = true;
  }
  TensorType out = WithDims(x, {});
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!drop[i]) {
      out.dims.push_back(x.dims[i]);
      if (!x.symbols.empty()) out.symbols.push_back(x.symbols[i]);
    }
  return std::vector<TensorType>{out};
}

Result<std::vector<TensorType>> InferUnsqueeze(const InferContext& ctx) {
  const TensorType& x = ctx.type(0);
  bool present = false;
  FT_ASSIGN_OR_RETURN(auto axes, AxesFromAttrOrInput(ctx, 1, &present));
  if (!present) return ctx.Fail(ErrorCode::kInvalidArgument, "axes are required");
  const int64_t rank = x.rank() + static_cast<int64_t>(axes.size());
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    FT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, a, rank));
    if (inserted[axis]) return ctx.Fail(ErrorCode::kInvalidArgument, "axes repeat");
    inserted[axis] = true;
  }
  TensorType out = WithDims(x, {});
  for (int64_t i = 0, k = 0; i < rank; ++i) {
    const bool ins = inserted[i];
    out.dims.push_back(ins ? 1 : x.dims[k]);
    if (!x.symbols.empty()) out.symbols.push_back(ins ? "" : x.symbols[k]);
    if (!ins) ++k;
  }
  return std::vector<TensorType>{out};
}

// ---- Concat / Split -------------------------------------------------------------

Result<std::vector<TensorType>> InferConcat(const InferContext& ctx) {
  const TensorType& first = ctx.type(0);
  FT_ASSIGN_OR_RETURN(int64_t axis, ctx.node.attrs.GetInt("axis"));
  FT_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, first.rank()));
  Dims dims = first.dims;
  dims[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.type(i);
    if (t.rank() != first.rank() || t.dtype != first.dtype)
      return ctx.Fail(ErrorCode::kShapeMismatch,
                      fmt::format("input {} differs in rank or dtype", i));
    for (int64_t d = 0; d < t.rank(); ++d)
      if (d != axis && t.dims[d] != first.dims[d])
        return ctx.Fail(ErrorCode::kShapeMismatch,
                        fmt::format("input {} has shape {}, input 0 {}", i, DimsToString(t.dims),
                                    DimsToString(first.dims)));
    dims[axis] += t.dims[axis];
  }
  return std::vector<TensorType>{WithDims(first, dims)};
}

Result<std::vector<Tensor>> RunConcat(const KernelContext& ctx) {
  const Dims& out_dims = ctx.output_types[0].dims;
  FT_ASSIGN_OR_RETURN(const auto attr_axis, ctx.node.attrs.GetInt("axis"));
  const int64_t axis = WrapAxis(attr_axis, static_cast<int64_t>(out_dims.size()));
  Tensor out(ctx.in(0).dtype(), out_dims);
  const size_t es = DataTypeSize(out.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(out_dims.size()); ++d) {
    if (d < axis) outer *= out_dims[d];
    if (d > axis) inner *= out_dims[d];
  }
  int64_t pos = 0;
  for (const Tensor* in : ctx.inputs) {
    const int64_t len = in->dims()[axis];
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out.raw() + ((o * out_dims[axis] + pos) * inner) * es,
                  in->raw() + (o * len * inner) * es, len * inner * es);
    pos += len;
  }
  return std::vector<Tensor>{out};
}

Result<std::vector<int64_t>> SplitSizes(const Node& node, int64_t opset, const Tensor* split_input,
                                        int64_t axis_len, size_t outputs) {
  std::vector<int64_t> split;
  if (node.attrs.Has("split")) {
    FT_ASSIGN_OR_RETURN(split, node.attrs.GetInts("split"));
  } else if (split_input) {
    split = split_input->ToInt64Vector();
  } else {
    const int64_t n = static_cast<int64_t>(outputs);
    const int64_t chunk = (axis_len + n - 1) / n;  // opset 18: last chunk may be smaller
    for (int64_t i = 0; i < n; ++i) split.push_back(std::min(chunk, axis_len - i * chunk));
  }
  (void)opset;
  return split;
}

Result<std::vector<TensorType>> InferSplit(const InferContext& ctx) {
  const TensorType& x = ctx.type(0);
  FT_ASSIGN_OR_RETURN(int64_t axis, ctx.node.attrs.GetInt("axis", 0));
  FT_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, x.rank()));
  const Tensor* split_t = nullptr;
  if (ctx.has_input(1)) {
    FT_ASSIGN_OR_RETURN(split_t, ctx.RequireConstant(1, "split"));
  }
  FT_ASSIGN_OR_RETURN(
      auto split, SplitSizes(ctx.node, ctx.opset, split_t, x.dims[axis], ctx.node.outputs.size()));
  if (split.size() != ctx.node.outputs.size() ||
      std::accumulate(split.begin(), split.end(), int64_t{0}) != x.dims[axis])
    return ctx.Fail(ErrorCode::kShapeMismatch,
                    fmt::format("split sizes {} do not cover axis {} of size {} in {} outputs",
                                DimsToString(split), axis, x.dims[axis], ctx.node.outputs.size()));
  std::vector<TensorType> outs;
  for (int64_t s : split) {
    Dims d = x.dims;
    d[axis] = s;
    outs.push_back(WithDims(x, d));
  }
  return outs;
}

Result<std::vector<Tensor>> RunSplit(const KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  FT_ASSIGN_OR_RETURN(const auto attr_axis, ctx.node.attrs.GetInt("axis", 0));
  const int64_t axis = WrapAxis(attr_axis, x.rank());
  const auto strides = RowMajorStrides(x.dims());
  std::vector<Tensor> outs;
  int64_t pos = 0;
  for (const TensorType& t : ctx.output_types) {
    outs.push_back(StridedCopy(x, t.dims, strides, pos * strides[axis]));
    pos += t.dims[axis];
  }
  return outs;
}

// ---- Slice ----------------------------------------------------------------------

struct SliceSpec {
  Dims out;
  std::vector<int64_t> start, step;  // per input axis
};

Result<SliceSpec> ResolveSlice(const InferContext* ctx, const Dims& in, std::vector<int64_t> starts,
                               std::vector<int64_t> ends, std::vector<int64_t> axes,
                               std::vector<int64_t> steps) {
  auto fail = [&](const std::string& m) {
    return ctx ? ctx->Fail(ErrorCode::kInvalidArgument, m) : Error(ErrorCode::kInvalidArgument, m);
  };
  const int64_t rank = static_cast<int64_t>(in.size());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return fail("starts, ends, axes and steps differ in length");
  SliceSpec s{in, std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 1)};
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank) return fail(fmt::format("slice axis {} out of range", axes[i]));
    const int64_t dim = in[a], step = steps[i];
    if (step == 0) return fail("slice step is 0");
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    // Counted from the clamped distance: `step` may be any int64 (adding it
    // or negating it overflowed: onnx_import_fuzz).
    const int64_t distance = step > 0 ? e - b : b - e;
    s.out[a] =
        distance <= 0 ? 0 : (step > 0 ? (distance - 1) / step : -((distance - 1) / step)) + 1;
    s.start[a] = b;
    s.step[a] = step;
  }
  return s;
}

// Slice inputs: opset >= 10 takes starts/ends/axes/steps as inputs; older as attributes.
Result<SliceSpec> SliceFromInfer(const InferContext& ctx) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset < 10) {
    FT_ASSIGN_OR_RETURN(starts, ctx.node.attrs.GetInts("starts"));
    FT_ASSIGN_OR_RETURN(ends, ctx.node.attrs.GetInts("ends"));
    FT_ASSIGN_OR_RETURN(axes, ctx.node.attrs.GetInts("axes", std::vector<int64_t>{}));
  } else {
    const char* names[] = {"data", "starts", "ends", "axes", "steps"};
    std::vector<int64_t>* slots[] = {nullptr, &starts, &ends, &axes, &steps};
    for (size_t i = 1; i < 5; ++i) {
      if (!ctx.has_input(i)) continue;
      FT_ASSIGN_OR_RETURN(const Tensor* t, ctx.RequireConstant(i, names[i]));
      *slots[i] = t->ToInt64Vector();
    }
  }
  return ResolveSlice(&ctx, ctx.type(0).dims, starts, ends, axes, steps);
}

}  // namespace

Result<SliceWindow> ResolveSliceNode(const Graph& graph, const Node& node) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (node.op_type != "Slice")
    return Error(ErrorCode::kInvalidArgument, node.op_type + " is not a Slice");
  if (graph.opset < 10) {
    FT_ASSIGN_OR_RETURN(starts, node.attrs.GetInts("starts"));
    FT_ASSIGN_OR_RETURN(ends, node.attrs.GetInts("ends"));
    FT_ASSIGN_OR_RETURN(axes, node.attrs.GetInts("axes", std::vector<int64_t>{}));
  } else {
    std::vector<int64_t>* slots[] = {nullptr, &starts, &ends, &axes, &steps};
    for (size_t i = 1; i < 5; ++i) {
      if (i >= node.inputs.size() || node.inputs[i] == kNoValue) continue;
      const Value& v = graph.value(node.inputs[i]);
      if (!v.is_constant())
        return Error(ErrorCode::kUnsupported, "the slice's bounds are not constants");
      *slots[i] = v.constant->ToInt64Vector();
    }
  }
  FT_ASSIGN_OR_RETURN(SliceSpec s, ResolveSlice(nullptr, graph.type(node.inputs[0]).dims, starts,
                                                ends, axes, steps));
  return SliceWindow{s.out, s.start, s.step};
}

namespace {

Result<std::vector<TensorType>> InferSlice(const InferContext& ctx) {
  FT_ASSIGN_OR_RETURN(SliceSpec s, SliceFromInfer(ctx));
  return std::vector<TensorType>{WithDims(ctx.type(0), s.out)};
}

Result<std::vector<Tensor>> RunSlice(const KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset < 10) {
    FT_ASSIGN_OR_RETURN(starts, ctx.node.attrs.GetInts("starts"));
    FT_ASSIGN_OR_RETURN(ends, ctx.node.attrs.GetInts("ends"));
    FT_ASSIGN_OR_RETURN(axes, ctx.node.attrs.GetInts("axes", std::vector<int64_t>{}));
  } else {
    starts = ctx.in(1).ToInt64Vector();
    ends = ctx.in(2).ToInt64Vector();
    if (ctx.has_input(3)) axes = ctx.in(3).ToInt64Vector();
    if (ctx.has_input(4)) steps = ctx.in(4).ToInt64Vector();
  }
  FT_ASSIGN_OR_RETURN(SliceSpec s, ResolveSlice(nullptr, x.dims(), starts, ends, axes, steps));
  const auto in_strides = RowMajorStrides(x.dims());
  std::vector<int64_t> strides(x.rank());
  int64_t offset = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    strides[d] = in_strides[d] * s.step[d];
    offset += s.start[d] * in_strides[d];
  }
  return std::vector<Tensor>{StridedCopy(x, s.out, strides, offset)};
}

// ---- Gather -----------------------------------------------------------------------

Result<std::vector<TensorType>> InferGather(const InferContext& ctx) {
  const TensorType& x = ctx.type(0);
  const TensorType& idx = ctx.type(1);
  if (idx.dtype != DataType::kInt64 && idx.dtype != DataType::kInt32)
    return ctx.Fail(ErrorCode::kShapeMismatch, "indices must be int32 or int64");
  FT_ASSIGN_OR_RETURN(int64_t axis, ctx.node.attrs.GetInt("axis", 0));
  FT_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, x.rank()));
  if (ctx.input_constants.size() > 1 && ctx.input_constants[1]) {
    for (int64_t v : ctx.input_constants[1]->ToInt64Vector())
      if (v < -x.dims[axis] || v >= x.dims[axis])
        return ctx.Fail(
            ErrorCode::kInvalidArgument,
            fmt::format("index {} is out of range for axis {} of size {}", v, axis, x.dims[axis]));
  }
  Dims dims(x.dims.begin(), x.dims.begin() + axis);
  dims.insert(dims.end(), idx.dims.begin(), idx.dims.end());
  dims.insert(dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  return std::vector<TensorType>{WithDims(x, dims)};
}

Result<std::vector<Tensor>> RunGather(const KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto indices = ctx.in(1).ToInt64Vector();
  FT_ASSIGN_OR_RETURN(const auto attr_axis, ctx.node.attrs.GetInt("axis", 0));
  const int64_t axis = WrapAxis(attr_axis, x.rank());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d < axis) outer *= x.dims()[d];
    if (d > axis) inner *= x.dims()[d];
  }
  const int64_t n = x.dims()[axis];
  const size_t es = DataTypeSize(x.dtype());
  Tensor out(x.dtype(), ctx.output_types[0].dims);
  const int64_t k = static_cast<int64_t>(indices.size());
  for (int64_t i = 0; i < k; ++i)
    if (indices[i] < -n || indices[i] >= n)
      return Error(
          ErrorCode::kInvalidArgument,
          fmt::format("Gather index {} is out of range for an axis of size {}", indices[i], n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < k; ++i) {
      const int64_t src = indices[i] < 0 ? indices[i] + n : indices[i];
      std::memcpy(out.raw() + ((o * k + i) * inner) * es, x.raw() + ((o * n + src) * inner) * es,
                  inner * es);
    }
  return std::vector<Tensor>{out};
}

// ---- Expand / Tile / Trilu -----------------------------------------------------------

Result<std::vector<TensorType>> InferExpand(const InferContext& ctx) {
  FT_ASSIGN_OR_RETURN(const Tensor* shape_t, ctx.RequireConstant(1, "shape"));
  const Dims shape = shape_t->ToInt64Vector();
  FT_ASSIGN_OR_RETURN(Dims dims, BroadcastDims(ctx, {&ctx.type(0).dims, &shape}));
  return std::vector<TensorType>{WithDims(ctx.type(0), dims)};
}

Result<std::vector<Tensor>> RunExpand(const KernelContext& ctx) {
  const Dims& out = ctx.output_types[0].dims;
  return std::vector<Tensor>{
      StridedCopy(ctx.in(0), out, BroadcastStrides(ctx.in(0).dims(), out), 0)};
}

Result<std::vector<TensorType>> InferTile(const InferContext& ctx) {
  FT_ASSIGN_OR_RETURN(const Tensor* rep_t, ctx.RequireConstant(1, "repeats"));
  const auto reps = rep_t->ToInt64Vector();
  if (static_cast<int64_t>(reps.size()) != ctx.type(0).rank())
    return ctx.Fail(ErrorCode::kShapeMismatch, "repeats length differs from the input rank");
  Dims dims = ctx.type(0).dims;
  for (size_t i = 0; i < dims.size(); ++i) dims[i] *= reps[i];
  return std::vector<TensorType>{WithDims(ctx.type(0), dims)};
}

Result<std::vector<Tensor>> RunTile(const KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Dims& out_dims = ctx.output_types[0].dims;
  Tensor out(x.dtype(), out_dims);
  const size_t es = DataTypeSize(x.dtype());
  const auto in_strides = RowMajorStrides(x.dims());
  std::vector<int64_t> idx(out_dims.size(), 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rem = i, off = 0;
    for (int64_t d = static_cast<int64_t>(out_dims.size()) - 1; d >= 0; --d) {
      off += ((rem % out_dims[d]) % x.dims()[d]) * in_strides[d];
      rem /= out_dims[d];
    }
    std::memcpy(out.raw() + i * es, x.raw() + off * es, es);
  }
  return std::vector<Tensor>{out};
}

Result<std::vector<TensorType>> InferTrilu(const InferContext& ctx) {
  if (ctx.type(0).rank() < 2)
    return ctx.Fail(ErrorCode::kShapeMismatch, "input must have rank >= 2");
  if (ctx.has_input(1)) {
    FT_RETURN_IF_ERROR(ctx.RequireConstant(1, "k"));
  }
  return std::vector<TensorType>{ctx.type(0)};
}

Result<std::vector<Tensor>> RunTrilu(const KernelContext& ctx) {
  Tensor out = ctx.in(0).Clone();
  FT_ASSIGN_OR_RETURN(const auto attr_upper, ctx.node.attrs.GetInt("upper", 1));
  const bool upper = attr_upper != 0;
  const int64_t k = ctx.has_input(1) ? ctx.in(1).GetAsInt(0) : 0;
  const int64_t rows = out.dims()[out.rank() - 2], cols = out.dims()[out.rank() - 1];
  const size_t es = DataTypeSize(out.dtype());
  const int64_t mats = (rows * cols) != 0 ? out.numel() / (rows * cols) : 0;
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const bool keep = upper ? (j - i >= k) : (j - i <= k);
        if (!keep) std::memset(out.raw() + ((m * rows + i) * cols + j) * es, 0, es);
      }
  return std::vector<Tensor>{out};
}

// ---- constant producers -------------------------------------------------------------

Result<std::vector<TensorType>> InferShape(const InferContext& ctx) {
  const int64_t rank = ctx.type(0).rank();
  FT_ASSIGN_OR_RETURN(int64_t start, ctx.node.attrs.GetInt("start", 0));
  FT_ASSIGN_OR_RETURN(int64_t end, ctx.node.attrs.GetInt("end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return One(DataType::kInt64, {std::max<int64_t>(0, end - start)});
}

Result<std::vector<Tensor>> RunShape(const KernelContext& ctx) {
  const Dims& d = ctx.in(0).dims();
  const int64_t rank = static_cast<int64_t>(d.size());
  FT_ASSIGN_OR_RETURN(int64_t start, ctx.node.attrs.GetInt("start", 0));
  if (start < 0) start += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  const int64_t n = ctx.output_types[0].dims[0];
  std::vector<int64_t> v(d.begin() + start, d.begin() + start + n);
  return std::vector<Tensor>{Tensor::FromVector<int64_t>(DataType::kInt64, {n}, v)};
}

Result<std::vector<TensorType>> InferSize(const InferContext&) { return One(DataType::kInt64, {}); }
Result<std::vector<Tensor>> RunSize(const KernelContext& ctx) {
  return std::vector<Tensor>{Tensor::ScalarI64(ctx.in(0).numel())};
}

Result<std::vector<TensorType>> InferConstantOfShape(const InferContext& ctx) {
  FT_ASSIGN_OR_RETURN(const Tensor* shape_t, ctx.RequireConstant(0, "shape"));
  DataType dtype = DataType::kFloat32;
  if (ctx.node.attrs.Has("value")) {
    FT_ASSIGN_OR_RETURN(const Tensor value, ctx.node.attrs.GetTensor("value"));
    dtype = value.dtype();
  }
  return One(dtype, shape_t->ToInt64Vector());
}

Result<std::vector<Tensor>> RunConstantOfShape(const KernelContext& ctx) {
  Tensor value = Tensor::ScalarF32(0);
  if (ctx.node.attrs.Has("value")) {
    FT_ASSIGN_OR_RETURN(value, ctx.node.attrs.GetTensor("value"));
  }
  Tensor out(value.dtype(), ctx.output_types[0].dims);
  const size_t es = DataTypeSize(value.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(out.raw() + i * es, value.raw(), es);
  return std::vector<Tensor>{out};
}

Result<std::vector<TensorType>> InferRange(const InferContext& ctx) {
  FT_ASSIGN_OR_RETURN(const Tensor* start, ctx.RequireConstant(0, "start"));
  FT_ASSIGN_OR_RETURN(const Tensor* limit, ctx.RequireConstant(1, "limit"));
  FT_ASSIGN_OR_RETURN(const Tensor* delta, ctx.RequireConstant(2, "delta"));
  const double s = start->GetAsDouble(0), l = limit->GetAsDouble(0), d = delta->GetAsDouble(0);
  if (d == 0) return ctx.Fail(ErrorCode::kInvalidArgument, "delta is 0");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((l - s) / d)));
  return One(ctx.type(0).dtype, {n});
}

Result<std::vector<Tensor>> RunRange(const KernelContext& ctx) {
  const double s = ctx.in(0).GetAsDouble(0), d = ctx.in(2).GetAsDouble(0);
  const int64_t n = ctx.output_types[0].dims[0];
  Tensor out(DataType::kFloat64, {n});
  for (int64_t i = 0; i < n; ++i) out.data<double>()[i] = s + static_cast<double>(i) * d;
  if (ctx.output_types[0].dtype == DataType::kInt64) {
    Tensor r(DataType::kInt64, {n});
    const int64_t si = ctx.in(0).GetAsInt(0), di = ctx.in(2).GetAsInt(0);
    for (int64_t i = 0; i < n; ++i) r.data<int64_t>()[i] = si + i * di;
    return std::vector<Tensor>{r};
  }
  return std::vector<Tensor>{out.CastTo(ctx.output_types[0].dtype)};
}

Result<Tensor> ConstantValue(const Node& node) {
  const Attributes& a = node.attrs;
  if (a.Has("value")) return a.GetTensor("value");
  if (a.Has("value_float")) return Tensor::ScalarF32(a.GetFloat("value_float").value());
  if (a.Has("value_int")) return Tensor::ScalarI64(a.GetInt("value_int").value());
  if (a.Has("value_floats")) {
    auto v = a.GetFloats("value_floats").value();
    return Tensor::FromVector<float>(DataType::kFloat32, {static_cast<int64_t>(v.size())}, v);
  }
  if (a.Has("value_ints")) {
    auto v = a.GetInts("value_ints").value();
    return Tensor::FromVector<int64_t>(DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
  }
  return Error(ErrorCode::kUnsupported,
               "Constant needs a value, value_float(s) or value_int(s) attribute");
}

Result<std::vector<TensorType>> InferConstant(const InferContext& ctx) {
  auto v = ConstantValue(ctx.node);
  if (!v.ok()) return ctx.Fail(v.error().code(), v.error().message());
  return One(v->dtype(), v->dims());
}

Result<std::vector<Tensor>> RunConstant(const KernelContext& ctx) {
  FT_ASSIGN_OR_RETURN(Tensor v, ConstantValue(ctx.node));
  return std::vector<Tensor>{v};
}

Result<std::vector<TensorType>> InferIdentity(const InferContext& ctx) {
  return std::vector<TensorType>{ctx.type(0)};
}
Result<std::vector<Tensor>> RunIdentity(const KernelContext& ctx) {
  return std::vector<Tensor>{ctx.in(0)};
}

// Dropout in inference: the identity, with an all-true mask when asked for.
Result<std::vector<TensorType>> InferDropout(const InferContext& ctx) {
  if (ctx.has_input(2)) {
    auto training = ctx.RequireConstant(2, "training_mode");
    if (!training.ok()) return training.error();
    if ((*training)->GetAsInt(0) != 0)
      return ctx.Fail(ErrorCode::kUnsupported,
                      "Dropout in training mode is not supported (inference only)");
  }
  std::vector<TensorType> outs{ctx.type(0)};
  if (ctx.node.outputs.size() > 1)
    outs.push_back(WithDims(TensorType{DataType::kBool, {}, {}}, ctx.type(0).dims));
  return outs;
}

Result<std::vector<Tensor>> RunDropout(const KernelContext& ctx) {
  std::vector<Tensor> outs{ctx.in(0)};
  if (ctx.output_types.size() > 1) {
    Tensor mask(DataType::kBool, ctx.in(0).dims());
    std::memset(mask.raw(), 1, mask.nbytes());
    outs.push_back(mask);
  }
  return outs;
}

}  // namespace

void AppendShapeOps(std::vector<OpSchema>& t) {
  const OpKind mv = OpKind::kDataMovement, cst = OpKind::kConstant;
  t.push_back({"Transpose", mv, 1, 1, InferTranspose, RunTranspose, NoCost});
  t.push_back({"Reshape", mv, 2, 2, InferReshape, RunView, NoCost});
  t.push_back({"Flatten", mv, 1, 1, InferFlatten, RunView, NoCost});
  t.push_back({"Squeeze", mv, 1, 2, InferSqueeze, RunView, NoCost});
  t.push_back({"Unsqueeze", mv, 1, 2, InferUnsqueeze, RunView, NoCost});
  t.push_back({"Concat", mv, 1, -1, InferConcat, RunConcat, NoCost});
  t.push_back({"Split", mv, 1, 2, InferSplit, RunSplit, NoCost});
  t.push_back({"Slice", mv, 1, 5, InferSlice, RunSlice, NoCost});
  t.push_back({"Gather", mv, 2, 2, InferGather, RunGather, NoCost});
  t.push_back({"Expand", mv, 2, 2, InferExpand, RunExpand, NoCost});
  t.push_back({"Tile", mv, 2, 2, InferTile, RunTile, NoCost});
  t.push_back({"Trilu", mv, 1, 2, InferTrilu, RunTrilu, NoCost});
  t.push_back({"Identity", mv, 1, 1, InferIdentity, RunIdentity, NoCost});
  t.push_back({"Dropout", mv, 1, 3, InferDropout, RunDropout, NoCost});
  t.push_back({"Shape", cst, 1, 1, InferShape, RunShape, NoCost});
  t.push_back({"Size", cst, 1, 1, InferSize, RunSize, NoCost});
  t.push_back({"ConstantOfShape", cst, 1, 1, InferConstantOfShape, RunConstantOfShape, NoCost});
  t.push_back({"Range", cst, 3, 3, InferRange, RunRange, NoCost});
  t.push_back({"Constant", cst, 0, 0, InferConstant, RunConstant, NoCost});
}

}  // namespace fusetune::graph
