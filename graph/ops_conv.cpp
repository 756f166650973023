// Convolutional-network ops: Conv (1-D and 2-D, groups, strides, pads,
// auto_pad, dilations, optional bias), BatchNormalization (inference),
// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, HardSigmoid,
// HardSwish, and Pad (constant, reflect, edge; wrap from opset 19). Floats
// compute in f32 storage with double accumulation (this is the oracle); 1-D
// windows run as 2-D ones of height 1.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "graph/conv_geometry.h"
#include "graph/op_helpers.h"

namespace fusetune::graph {
namespace {

using namespace ops;

// ---- window geometry shared by Conv and the pools -----------------------------

// A 1-D or 2-D sliding window, always held as 2-D (height 1 for 1-D).
struct Window2D {
  int64_t spatial_rank = 2;
  int64_t in_h = 1, in_w = 1;
  int64_t k_h = 1, k_w = 1;
  int64_t s_h = 1, s_w = 1;
  int64_t d_h = 1, d_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t out_h = 1, out_w = 1;
};

// Bound on strides, dilations and pads (and Pad's pads): with dims whose
// bytes fit int64, the window arithmetic below cannot overflow.
constexpr int64_t kMaxWindowAttr = int64_t{1} << 31;

// Reads a per-spatial-axis attribute list of `rank` entries (default `fallback`).
Result<std::vector<int64_t>> SpatialAttr(const InferContext* ctx, const Node& node,
                                         const std::string& name, size_t count, int64_t fallback,
                                         int64_t min_value) {
  auto fail = [&](const std::string& msg) -> Error {
    return ctx ? ctx->Fail(ErrorCode::kInvalidArgument, msg)
               : Error(ErrorCode::kInvalidArgument, msg);
  };
  FT_ASSIGN_OR_RETURN(auto values, node.attrs.GetInts(name, std::vector<int64_t>(count, fallback)));
  if (values.size() != count)
    return fail(fmt::format("{} has {} entries, expected {}", name, values.size(), count));
  for (int64_t v : values)
    if (v < min_value || v > kMaxWindowAttr)
      return fail(
          fmt::format("{} must be in [{}, {}], got {}", name, min_value, kMaxWindowAttr, v));
  return values;
}

// Resolves the window of a Conv or pool over `in_spatial` with `kernel`.
// `ceil_mode` rounds the output size up (pools), dropping a last window that
// would start in the end padding, as PyTorch and ONNX Runtime do.
Result<Window2D> ResolveWindow(const InferContext* ctx, const Node& node, const Dims& in_spatial,
                               const std::vector<int64_t>& kernel, bool ceil_mode) {
  auto fail = [&](ErrorCode code, const std::string& msg) -> Error {
    return ctx ? ctx->Fail(code, msg) : Error(code, msg);
  };
  const size_t r = in_spatial.size();
  if (r != 1 && r != 2)
    return fail(ErrorCode::kUnsupported,
                fmt::format("only 1-D and 2-D windows are supported, not {}-D", r));
  if (kernel.size() != r)
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("kernel has {} spatial dims, the input {}", kernel.size(), r));
  for (int64_t k : kernel)
    if (k < 1)
      return fail(ErrorCode::kInvalidArgument, fmt::format("kernel dims must be >= 1, got {}", k));
  FT_ASSIGN_OR_RETURN(auto strides, SpatialAttr(ctx, node, "strides", r, 1, 1));
  FT_ASSIGN_OR_RETURN(auto dilations, SpatialAttr(ctx, node, "dilations", r, 1, 1));
  FT_ASSIGN_OR_RETURN(auto pads, SpatialAttr(ctx, node, "pads", 2 * r, 0, 0));
  FT_ASSIGN_OR_RETURN(const std::string auto_pad, node.attrs.GetString("auto_pad", "NOTSET"));
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = in_spatial[i];
    int64_t extent = 0;
    if (__builtin_mul_overflow(kernel[i] - 1, dilations[i], &extent) || extent >= kMaxWindowAttr)
      return fail(ErrorCode::kShapeMismatch,
                  fmt::format("kernel {} with dilation {} is too large", kernel[i], dilations[i]));
    extent += 1;
    if (auto_pad == "NOTSET") {
      const int64_t span = in + pads[i] + pads[i + r] - extent;
      if (span < 0)
        return fail(ErrorCode::kShapeMismatch,
                    fmt::format("the window (extent {}) is larger than the padded input ({}) "
                                "on spatial axis {}",
                                extent, in + pads[i] + pads[i + r], i));
      out[i] = (ceil_mode ? (span + strides[i] - 1) / strides[i] : span / strides[i]) + 1;
      if (ceil_mode && (out[i] - 1) * strides[i] >= in + pads[i]) --out[i];
    } else if (auto_pad == "VALID") {
      pads[i] = pads[i + r] = 0;
      if (in < extent)
        return fail(ErrorCode::kShapeMismatch,
                    fmt::format("the window (extent {}) is larger than the input ({}) on "
                                "spatial axis {}",
                                extent, in, i));
      out[i] = (in - extent) / strides[i] + 1;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out[i] = (in + strides[i] - 1) / strides[i];
      const int64_t total = std::max<int64_t>(0, (out[i] - 1) * strides[i] + extent - in);
      const int64_t small = total / 2;
      pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      pads[i + r] = total - pads[i];
    } else {
      return fail(ErrorCode::kInvalidArgument, fmt::format("unknown auto_pad '{}'", auto_pad));
    }
    if (out[i] < 1)
      return fail(ErrorCode::kShapeMismatch,
                  fmt::format("output size {} on spatial axis {} is not positive", out[i], i));
  }
  Window2D w;
  w.spatial_rank = static_cast<int64_t>(r);
  if (r == 1) {
    w.in_w = in_spatial[0];
    w.k_w = kernel[0];
    w.s_w = strides[0];
    w.d_w = dilations[0];
    w.pad_left = pads[0];
    w.pad_right = pads[1];
    w.out_w = out[0];
  } else {
    w.in_h = in_spatial[0];
    w.in_w = in_spatial[1];
    w.k_h = kernel[0];
    w.k_w = kernel[1];
    w.s_h = strides[0];
    w.s_w = strides[1];
    w.d_h = dilations[0];
    w.d_w = dilations[1];
    w.pad_top = pads[0];
    w.pad_left = pads[1];
    w.pad_bottom = pads[2];
    w.pad_right = pads[3];
    w.out_h = out[0];
    w.out_w = out[1];
  }
  return w;
}

Dims OutSpatial(const Window2D& w) {
  return w.spatial_rank == 1 ? Dims{w.out_w} : Dims{w.out_h, w.out_w};
}

Status RequireFloat(const InferContext& ctx, size_t i, const char* what) {
  if (!IsFloat(ctx.type(i).dtype))
    return ctx.Fail(ErrorCode::kShapeMismatch, fmt::format("{} must be a float tensor, not {}",
                                                           what, DataTypeName(ctx.type(i).dtype)));
  return Status::Ok();
}

// ---- Conv ---------------------------------------------------------------------

struct ConvShape {
  int64_t n, c, m, group;
  Window2D w;
};

Result<ConvShape> ResolveConv(const InferContext* ctx, const Node& node, const Dims& x,
                              const Dims& wt, const Dims* bias) {
  auto fail = [&](ErrorCode code, const std::string& msg) -> Error {
    return ctx ? ctx->Fail(code, msg) : Error(code, msg);
  };
  if (x.size() != 3 && x.size() != 4)
    return fail(
        ErrorCode::kUnsupported,
        fmt::format("Conv input X must be [N, C, W] or [N, C, H, W], got {}", DimsToString(x)));
  if (wt.size() != x.size())
    return fail(ErrorCode::kShapeMismatch, fmt::format("Conv weight {} must have the rank of X {}",
                                                       DimsToString(wt), DimsToString(x)));
  FT_ASSIGN_OR_RETURN(const int64_t group, node.attrs.GetInt("group", 1));
  ConvShape s;
  s.n = x[0];
  s.c = x[1];
  s.m = wt[0];
  s.group = group;
  if (group < 1) return fail(ErrorCode::kInvalidArgument, fmt::format("group {} < 1", group));
  if (s.c % group != 0 || s.m % group != 0)
    return fail(ErrorCode::kShapeMismatch,
                fmt::format("group {} does not divide the input channels {} and output "
                            "channels {}",
                            group, s.c, s.m));
  if (wt[1] * group != s.c)
    return fail(ErrorCode::kShapeMismatch,
                fmt::format("weight {} has {} channels per group; X has {} channels in {} "
                            "group(s)",
                            DimsToString(wt), wt[1], s.c, group));
  std::vector<int64_t> kernel(wt.begin() + 2, wt.end());
  if (node.attrs.Has("kernel_shape")) {
    FT_ASSIGN_OR_RETURN(auto ks, node.attrs.GetInts("kernel_shape"));
    if (ks != kernel)
      return fail(ErrorCode::kShapeMismatch,
                  fmt::format("kernel_shape {} differs from the weight's spatial dims {}",
                              DimsToString(ks), DimsToString(kernel)));
  }
  if (bias != nullptr && (bias->size() != 1 || (*bias)[0] != s.m))
    return fail(ErrorCode::kShapeMismatch,
                fmt::format("bias {} must be [{}]", DimsToString(*bias), s.m));
  Dims spatial(x.begin() + 2, x.end());
  FT_ASSIGN_OR_RETURN(s.w, ResolveWindow(ctx, node, spatial, kernel, false));
  return s;
}

Result<std::vector<TensorType>> InferConv(const InferContext& ctx) {
  FT_RETURN_IF_ERROR(RequireFloat(ctx, 0, "X"));
  if (ctx.type(1).dtype != ctx.type(0).dtype)
    return ctx.Fail(ErrorCode::kShapeMismatch, "X and W must have the same dtype");
  if (ctx.has_input(2) && ctx.type(2).dtype != ctx.type(0).dtype)
    return ctx.Fail(ErrorCode::kShapeMismatch, "X and B must have the same dtype");
  const Dims* bias = ctx.has_input(2) ? &ctx.type(2).dims : nullptr;
  FT_ASSIGN_OR_RETURN(ConvShape s,
                      ResolveConv(&ctx, ctx.node, ctx.type(0).dims, ctx.type(1).dims, bias));
  Dims out{s.n, s.m};
  for (int64_t d : OutSpatial(s.w)) out.push_back(d);
  return One(ctx.type(0).dtype, out);
}

Result<std::vector<Tensor>> RunConv(const KernelContext& ctx) {
  const Dims bias_dims = ctx.has_input(2) ? ctx.in(2).dims() : Dims{};
  FT_ASSIGN_OR_RETURN(ConvShape s,
                      ResolveConv(nullptr, ctx.node, ctx.in(0).dims(), ctx.in(1).dims(),
                                  ctx.has_input(2) ? &bias_dims : nullptr));
  Tensor x = AsF32(ctx.in(0)), wt = AsF32(ctx.in(1));
  Tensor bias = ctx.has_input(2) ? AsF32(ctx.in(2)) : Tensor();
  const Window2D& w = s.w;
  const int64_t cg = s.c / s.group, mg = s.m / s.group;
  const int64_t plane_in = w.in_h * w.in_w, plane_out = w.out_h * w.out_w;
  Tensor out(DataType::kFloat32, ctx.output_types[0].dims);
  const float* px = x.data<float>();
  const float* pw = wt.data<float>();
  const float* pb = ctx.has_input(2) ? bias.data<float>() : nullptr;
  float* po = out.data<float>();
  // One job per (image, output channel); each accumulates its plane in double.
  const int64_t work = cg * w.k_h * w.k_w * plane_out;
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(work, 1));
  ParallelRange(s.n * s.m, grain, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(plane_out));
    for (int64_t job = begin; job < end; ++job) {
      const int64_t n = job / s.m, m = job % s.m, g = m / mg;
      std::fill(acc.begin(), acc.end(), pb ? static_cast<double>(pb[m]) : 0.0);
      for (int64_t ci = 0; ci < cg; ++ci) {
        const float* xplane = px + (n * s.c + g * cg + ci) * plane_in;
        for (int64_t kh = 0; kh < w.k_h; ++kh) {
          for (int64_t kw = 0; kw < w.k_w; ++kw) {
            const double wv = pw[((m * cg + ci) * w.k_h + kh) * w.k_w + kw];
            for (int64_t oh = 0; oh < w.out_h; ++oh) {
              const int64_t ih = oh * w.s_h - w.pad_top + kh * w.d_h;
              if (ih < 0 || ih >= w.in_h) continue;
              const float* xrow = xplane + ih * w.in_w;
              double* arow = acc.data() + oh * w.out_w;
              for (int64_t ow = 0; ow < w.out_w; ++ow) {
                const int64_t iw = ow * w.s_w - w.pad_left + kw * w.d_w;
                if (iw < 0 || iw >= w.in_w) continue;
                arow[ow] += wv * xrow[iw];
              }
            }
          }
        }
      }
      float* oplane = po + job * plane_out;
      for (int64_t i = 0; i < plane_out; ++i) oplane[i] = static_cast<float>(acc[i]);
    }
  });
  return std::vector<Tensor>{FromF32(std::move(out), ctx.output_types[0].dtype)};
}

// 2 FLOPs per multiply-add of the direct convolution, plus the bias add.
OpCost ConvCost(const Node&, const std::vector<const TensorType*>& in,
                const std::vector<const TensorType*>& out) {
  const Dims& wt = in[1]->dims;
  double per_output = 1;
  for (size_t i = 1; i < wt.size(); ++i) per_output *= static_cast<double>(wt[i]);
  const bool bias = in.size() > 2 && in[2] != nullptr;
  return {(2 * per_output + (bias ? 1 : 0)) * OutputElements(out), 0};
}

// ---- BatchNormalization (inference) --------------------------------------------

Result<std::vector<TensorType>> InferBatchNorm(const InferContext& ctx) {
  FT_RETURN_IF_ERROR(RequireFloat(ctx, 0, "X"));
  FT_ASSIGN_OR_RETURN(const int64_t training, ctx.node.attrs.GetInt("training_mode", 0));
  if (training != 0 || ctx.node.outputs.size() > 1)
    return ctx.Fail(ErrorCode::kUnsupported,
                    "only inference-mode BatchNormalization (one output, training_mode=0) is "
                    "supported");
  FT_ASSIGN_OR_RETURN(const int64_t spatial, ctx.node.attrs.GetInt("spatial", 1));
  if (spatial != 1)
    return ctx.Fail(ErrorCode::kUnsupported, "BatchNormalization with spatial=0 is not supported");
  const Dims& x = ctx.type(0).dims;
  if (x.size() < 2)
    return ctx.Fail(ErrorCode::kShapeMismatch,
                    fmt::format("X must be [N, C, ...], got {}", DimsToString(x)));
  static const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    if (!ctx.has_input(i))
      return ctx.Fail(ErrorCode::kInvalidArgument, fmt::format("input {} is missing", kNames[i]));
    FT_RETURN_IF_ERROR(RequireFloat(ctx, i, kNames[i]));
    if (ctx.type(i).dims != Dims{x[1]})
      return ctx.Fail(ErrorCode::kShapeMismatch,
                      fmt::format("{} is {}, expected [{}] (the channels of X {})", kNames[i],
                                  DimsToString(ctx.type(i).dims), x[1], DimsToString(x)));
  }
  return std::vector<TensorType>{ctx.type(0)};
}

Result<std::vector<Tensor>> RunBatchNorm(const KernelContext& ctx) {
  FT_ASSIGN_OR_RETURN(const float eps_f, ctx.node.attrs.GetFloat("epsilon", 1e-5f));
  const double eps = eps_f;
  Tensor x = AsF32(ctx.in(0));
  Tensor scale = AsF32(ctx.in(1)), bias = AsF32(ctx.in(2)), mean = AsF32(ctx.in(3)),
         var = AsF32(ctx.in(4));
  const Dims& d = x.dims();
  const int64_t n = d[0], c = d[1];
  const int64_t inner = c == 0 ? 0 : x.numel() / std::max<int64_t>(1, n * c);
  std::vector<double> a(static_cast<size_t>(c)), b(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i) {
    a[i] = scale.data<float>()[i] / std::sqrt(static_cast<double>(var.data<float>()[i]) + eps);
    b[i] = bias.data<float>()[i] - mean.data<float>()[i] * a[i];
  }
  Tensor y(DataType::kFloat32, d);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(inner, 1));
  ParallelRange(n * c, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t ch = row % c;
      for (int64_t i = row * inner; i < (row + 1) * inner; ++i)
        py[i] = static_cast<float>(px[i] * a[ch] + b[ch]);
    }
  });
  return std::vector<Tensor>{FromF32(std::move(y), ctx.output_types[0].dtype)};
}

OpCost BatchNormCost(const Node&, const std::vector<const TensorType*>&,
                     const std::vector<const TensorType*>& out) {
  return {2 * OutputElements(out), 0};
}

// ---- MaxPool, AveragePool ------------------------------------------------------

Result<Window2D> ResolvePool(const InferContext* ctx, const Node& node, const Dims& x) {
  auto fail = [&](ErrorCode code, const std::string& msg) -> Error {
    return ctx ? ctx->Fail(code, msg) : Error(code, msg);
  };
  if (x.size() != 3 && x.size() != 4)
    return fail(ErrorCode::kUnsupported,
                fmt::format("{} input must be [N, C, W] or [N, C, H, W], got {}", node.op_type,
                            DimsToString(x)));
  if (!node.attrs.Has("kernel_shape"))
    return fail(ErrorCode::kInvalidArgument, "the kernel_shape attribute is required");
  FT_ASSIGN_OR_RETURN(auto kernel, node.attrs.GetInts("kernel_shape"));
  FT_ASSIGN_OR_RETURN(const int64_t ceil_mode, node.attrs.GetInt("ceil_mode", 0));
  if (node.op_type == "MaxPool") {
    FT_ASSIGN_OR_RETURN(const int64_t storage_order, node.attrs.GetInt("storage_order", 0));
    if (storage_order != 0)
      return fail(ErrorCode::kUnsupported, "MaxPool with storage_order=1 is not supported");
  }
  Dims spatial(x.begin() + 2, x.end());
  return ResolveWindow(ctx, node, spatial, kernel, ceil_mode != 0);
}

Result<std::vector<TensorType>> InferPool(const InferContext& ctx) {
  FT_RETURN_IF_ERROR(RequireFloat(ctx, 0, "X"));
  if (ctx.node.outputs.size() > 1)
    return ctx.Fail(ErrorCode::kUnsupported, "MaxPool's Indices output is not supported");
  FT_ASSIGN_OR_RETURN(Window2D w, ResolvePool(&ctx, ctx.node, ctx.type(0).dims));
  const Dims& x = ctx.type(0).dims;
  Dims out{x[0], x[1]};
  for (int64_t d : OutSpatial(w)) out.push_back(d);
  return One(ctx.type(0).dtype, out);
}

template <bool kMax>
Result<std::vector<Tensor>> RunPool(const KernelContext& ctx) {
  FT_ASSIGN_OR_RETURN(Window2D w, ResolvePool(nullptr, ctx.node, ctx.in(0).dims()));
  FT_ASSIGN_OR_RETURN(const int64_t include_pad_attr,
                      ctx.node.attrs.GetInt("count_include_pad", 0));
  const bool include_pad = include_pad_attr != 0;
  Tensor x = AsF32(ctx.in(0));
  const Dims& d = x.dims();
  const int64_t planes = d[0] * d[1];
  const int64_t plane_in = w.in_h * w.in_w, plane_out = w.out_h * w.out_w;
  Tensor out(DataType::kFloat32, ctx.output_types[0].dims);
  const float* px = x.data<float>();
  float* po = out.data<float>();
  const int64_t grain =
      std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(plane_out * w.k_h * w.k_w, 1));
  ParallelRange(planes, grain, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const float* xp = px + p * plane_in;
      float* op = po + p * plane_out;
      for (int64_t oh = 0; oh < w.out_h; ++oh) {
        for (int64_t ow = 0; ow < w.out_w; ++ow) {
          const int64_t h0 = oh * w.s_h - w.pad_top, w0 = ow * w.s_w - w.pad_left;
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t count = 0, padded_count = 0;
          for (int64_t kh = 0; kh < w.k_h; ++kh) {
            const int64_t ih = h0 + kh * w.d_h;
            if (ih >= w.in_h + w.pad_bottom) break;
            for (int64_t kw = 0; kw < w.k_w; ++kw) {
              const int64_t iw = w0 + kw * w.d_w;
              if (iw >= w.in_w + w.pad_right) break;
              ++padded_count;  // inside the padded input (not past it, with ceil_mode)
              if (ih < 0 || ih >= w.in_h || iw < 0 || iw >= w.in_w) continue;
              const double v = xp[ih * w.in_w + iw];
              if (kMax) {
                if (v > best || std::isnan(v)) best = v;
              } else {
                sum += v;
              }
              ++count;
            }
          }
          double r;
          if (kMax)
            r = best;
          else {
            const int64_t div = include_pad ? padded_count : count;
            r = div > 0 ? sum / static_cast<double>(div) : 0.0;
          }
          op[oh * w.out_w + ow] = static_cast<float>(r);
        }
      }
    }
  });
  return std::vector<Tensor>{FromF32(std::move(out), ctx.output_types[0].dtype)};
}

OpCost PoolCost(const Node& node, const std::vector<const TensorType*>&,
                const std::vector<const TensorType*>& out) {
  double window = 1;
  if (auto ks = node.attrs.GetInts("kernel_shape"); ks.ok())
    for (int64_t k : *ks) window *= static_cast<double>(k);
  return {window * OutputElements(out), 0};
}

// ---- GlobalAveragePool, GlobalMaxPool ------------------------------------------

Result<std::vector<TensorType>> InferGlobalPool(const InferContext& ctx) {
  FT_RETURN_IF_ERROR(RequireFloat(ctx, 0, "X"));
  const Dims& x = ctx.type(0).dims;
  if (x.size() < 3)
    return ctx.Fail(ErrorCode::kShapeMismatch,
                    fmt::format("X must be [N, C, D1, ...], got {}", DimsToString(x)));
  Dims out = x;
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  return One(ctx.type(0).dtype, out);
}

template <bool kMax>
Result<std::vector<Tensor>> RunGlobalPool(const KernelContext& ctx) {
  Tensor x = AsF32(ctx.in(0));
  const Dims& d = x.dims();
  const int64_t planes = d[0] * d[1];
  const int64_t inner = planes == 0 ? 0 : x.numel() / planes;
  Tensor out(DataType::kFloat32, ctx.output_types[0].dims);
  const float* px = x.data<float>();
  float* po = out.data<float>();
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(inner, 1));
  ParallelRange(planes, grain, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const float* xp = px + p * inner;
      double r = kMax ? -std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t i = 0; i < inner; ++i) {
        if (kMax) {
          if (xp[i] > r || std::isnan(xp[i])) r = xp[i];
        } else {
          r += xp[i];
        }
      }
      if (!kMax && inner > 0) r /= static_cast<double>(inner);
      po[p] = static_cast<float>(r);
    }
  });
  return std::vector<Tensor>{FromF32(std::move(out), ctx.output_types[0].dtype)};
}

OpCost GlobalPoolCost(const Node&, const std::vector<const TensorType*>& in,
                      const std::vector<const TensorType*>&) {
  return {InputElements(in), 0};
}

// ---- HardSigmoid, HardSwish ----------------------------------------------------

Result<std::vector<TensorType>> InferFloatSame(const InferContext& ctx) {
  FT_RETURN_IF_ERROR(RequireFloat(ctx, 0, "the input"));
  return std::vector<TensorType>{ctx.type(0)};
}

Result<std::vector<Tensor>> RunHardSigmoid(const KernelContext& ctx) {
  FT_ASSIGN_OR_RETURN(const float alpha, ctx.node.attrs.GetFloat("alpha", 0.2f));
  FT_ASSIGN_OR_RETURN(const float beta, ctx.node.attrs.GetFloat("beta", 0.5f));
  return std::vector<Tensor>{FloatUnary(ctx.in(0), ctx.output_types[0].dtype, [=](float x) {
    return std::max(0.0f, std::min(1.0f, alpha * x + beta));
  })};
}

// HardSwish(x) = x * max(0, min(1, x / 6 + 1 / 2)).
Result<std::vector<Tensor>> RunHardSwish(const KernelContext& ctx) {
  return std::vector<Tensor>{FloatUnary(ctx.in(0), ctx.output_types[0].dtype, [](float x) {
    return x * std::max(0.0f, std::min(1.0f, x / 6.0f + 0.5f));
  })};
}

OpCost PerElement(const Node&, const std::vector<const TensorType*>&,
                  const std::vector<const TensorType*>& out) {
  return {3 * OutputElements(out), 0};
}

// ---- Pad ----------------------------------------------------------------------

// Per input axis the padding before and after (negative: cropped), and the mode.
struct PadSpec {
  std::vector<int64_t> begin, end;
  std::string mode;
  Dims out;
};

// Pads come from the "pads" attribute before opset 11 and from constant input
// 1 after; opset 18's axes input (3) names the padded axes.
Result<PadSpec> ResolvePad(const InferContext* ctx, const Node& node, int64_t opset, const Dims& x,
                           const Tensor* pads_input, const Tensor* axes_input) {
  auto fail = [&](ErrorCode code, const std::string& msg) -> Error {
    return ctx ? ctx->Fail(code, msg) : Error(code, msg);
  };
  const int64_t rank = static_cast<int64_t>(x.size());
  PadSpec p;
  FT_ASSIGN_OR_RETURN(p.mode, node.attrs.GetString("mode", "constant"));
  if (p.mode != "constant" && p.mode != "reflect" && p.mode != "edge" &&
      !(p.mode == "wrap" && opset >= 19))
    return fail(ErrorCode::kInvalidArgument, fmt::format("unknown Pad mode '{}'", p.mode));
  std::vector<int64_t> pads;
  if (opset < 11) {
    FT_ASSIGN_OR_RETURN(pads, node.attrs.GetInts("pads"));
  } else {
    if (pads_input == nullptr)
      return fail(ErrorCode::kInvalidArgument, "the pads input is missing");
    pads = pads_input->ToInt64Vector();
  }
  std::vector<int64_t> axes;
  if (axes_input != nullptr) {
    axes = axes_input->ToInt64Vector();
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  if (pads.size() != 2 * axes.size())
    return fail(
        ErrorCode::kShapeMismatch,
        fmt::format("pads has {} values, expected 2 x {} padded axes", pads.size(), axes.size()));
  p.begin.assign(rank, 0);
  p.end.assign(rank, 0);
  for (int64_t v : pads)
    if (v < -kMaxWindowAttr || v > kMaxWindowAttr)
      return fail(ErrorCode::kInvalidArgument, fmt::format("pad {} is too large", v));
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank)
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("axis {} is out of range for rank {}", a, rank));
    if (a < 0) a += rank;
    p.begin[a] = pads[i];
    p.end[a] = pads[i + axes.size()];
  }
  p.out = x;
  for (int64_t a = 0; a < rank; ++a) {
    p.out[a] = x[a] + p.begin[a] + p.end[a];
    if (p.out[a] < 0)
      return fail(ErrorCode::kShapeMismatch,
                  fmt::format("pads {} and {} leave axis {} of size {} negative", p.begin[a],
                              p.end[a], a, x[a]));
    const bool padded = p.begin[a] > 0 || p.end[a] > 0;
    if (padded && x[a] == 0 && p.mode != "constant")
      return fail(ErrorCode::kShapeMismatch,
                  fmt::format("{} padding of the empty axis {}", p.mode, a));
    if (p.mode == "reflect" && (std::max(p.begin[a], p.end[a]) > x[a] - 1) && padded)
      return fail(ErrorCode::kShapeMismatch,
                  fmt::format("reflect pads {} and {} exceed axis {} of size {} minus one",
                              p.begin[a], p.end[a], a, x[a]));
  }
  return p;
}

Result<std::vector<TensorType>> InferPad(const InferContext& ctx) {
  const Tensor* pads = nullptr;
  const Tensor* axes = nullptr;
  if (ctx.opset >= 11) {
    FT_ASSIGN_OR_RETURN(pads, ctx.RequireConstant(1, "pads"));
    if (ctx.has_input(3)) {
      FT_ASSIGN_OR_RETURN(axes, ctx.RequireConstant(3, "axes"));
    }
    if (ctx.has_input(2) && (ctx.type(2).numel() != 1))
      return ctx.Fail(ErrorCode::kShapeMismatch, "constant_value must be a scalar");
  }
  FT_ASSIGN_OR_RETURN(PadSpec p,
                      ResolvePad(&ctx, ctx.node, ctx.opset, ctx.type(0).dims, pads, axes));
  return One(ctx.type(0).dtype, p.out);
}

Result<std::vector<Tensor>> RunPad(const KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const bool inputs = ctx.opset >= 11;
  FT_ASSIGN_OR_RETURN(PadSpec p, ResolvePad(nullptr, ctx.node, ctx.opset, x.dims(),
                                            inputs && ctx.has_input(1) ? &ctx.in(1) : nullptr,
                                            inputs && ctx.has_input(3) ? &ctx.in(3) : nullptr));
  double value = 0;
  if (!inputs) {
    FT_ASSIGN_OR_RETURN(const float v, ctx.node.attrs.GetFloat("value", 0.0f));
    value = v;
  } else if (ctx.has_input(2) && ctx.in(2).numel() > 0) {
    value = ctx.in(2).GetAsDouble(0);
  }
  Tensor fill(DataType::kFloat64, {1});
  fill.data<double>()[0] = value;
  fill = fill.CastTo(x.dtype());
  Tensor out(x.dtype(), p.out);
  const size_t es = DataTypeSize(x.dtype());
  const int64_t rank = static_cast<int64_t>(p.out.size());
  if (out.numel() == 0) return std::vector<Tensor>{out};
  const auto in_strides = RowMajorStrides(x.dims());
  const int64_t inner = rank == 0 ? 1 : p.out[rank - 1];
  const int64_t rows = out.numel() / inner;
  const std::byte* px = x.raw();
  const std::byte* pf = fill.raw();
  std::byte* po = out.raw();
  // The input index that output index o of axis a reads, or -1 for the fill.
  auto source = [&](int64_t a, int64_t o) -> int64_t {
    const int64_t n = x.dims()[a];
    int64_t i = o - p.begin[a];
    if (i >= 0 && i < n) return i;
    if (p.mode == "constant") return -1;
    if (p.mode == "edge") return std::clamp<int64_t>(i, 0, n - 1);
    if (p.mode == "wrap") return ((i % n) + n) % n;
    if (n == 1) return 0;
    const int64_t period = 2 * (n - 1);  // reflect: mirror without repeating the edge
    i = ((i % period) + period) % period;
    return i < n ? i : period - i;
  };
  ParallelRange(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                [&](int64_t begin, int64_t end) {
                  for (int64_t r = begin; r < end; ++r) {
                    int64_t rem = r, base = 0;
                    bool outside = false;
                    for (int64_t a = rank - 2; a >= 0; --a) {
                      const int64_t o = rem % p.out[a];
                      rem /= p.out[a];
                      const int64_t i = source(a, o);
                      if (i < 0)
                        outside = true;
                      else
                        base += i * in_strides[a];
                    }
                    std::byte* orow = po + r * inner * static_cast<int64_t>(es);
                    for (int64_t j = 0; j < inner; ++j) {
                      const int64_t i = rank == 0 ? 0 : source(rank - 1, j);
                      const std::byte* src =
                          outside || i < 0
                              ? pf
                              : px + (base + i * (rank == 0 ? 0 : in_strides[rank - 1])) *
                                         static_cast<int64_t>(es);
                      std::memcpy(orow + j * static_cast<int64_t>(es), src, es);
                    }
                  }
                });
  return std::vector<Tensor>{out};
}

}  // namespace

Result<ConvGeometry> ResolveConvGeometry(const Node& node, const Dims& x, const Dims& w) {
  FT_ASSIGN_OR_RETURN(const ConvShape s, ResolveConv(nullptr, node, x, w, nullptr));
  ConvGeometry g;
  g.spatial_rank = s.w.spatial_rank;
  g.batch = s.n;
  g.in_channels = s.c;
  g.out_channels = s.m;
  g.groups = s.group;
  g.in_h = s.w.in_h;
  g.in_w = s.w.in_w;
  g.out_h = s.w.out_h;
  g.out_w = s.w.out_w;
  g.kernel_h = s.w.k_h;
  g.kernel_w = s.w.k_w;
  g.stride_h = s.w.s_h;
  g.stride_w = s.w.s_w;
  g.dilation_h = s.w.d_h;
  g.dilation_w = s.w.d_w;
  g.pad_top = s.w.pad_top;
  g.pad_left = s.w.pad_left;
  g.pad_bottom = s.w.pad_bottom;
  g.pad_right = s.w.pad_right;
  return g;
}

Result<PoolGeometry> ResolvePoolGeometry(const Node& node, const Dims& x) {
  PoolGeometry g;
  if (node.op_type == "GlobalMaxPool" || node.op_type == "GlobalAveragePool") {
    if (x.size() < 3)
      return Error(ErrorCode::kShapeMismatch,
                   fmt::format("X must be [N, C, D1, ...], got {}", DimsToString(x)));
    g.global = true;
    g.spatial_rank = static_cast<int64_t>(x.size()) - 2;
    g.batch = x[0];
    g.channels = x[1];
    for (size_t i = 2; i + 1 < x.size(); ++i) g.in_h *= x[i];
    g.in_w = x.back();
    return g;
  }
  if (node.op_type != "MaxPool" && node.op_type != "AveragePool")
    return Error(ErrorCode::kInvalidArgument, node.op_type + " is not a pool");
  FT_ASSIGN_OR_RETURN(const Window2D w, ResolvePool(nullptr, node, x));
  FT_ASSIGN_OR_RETURN(const int64_t include_pad, node.attrs.GetInt("count_include_pad", 0));
  g.spatial_rank = w.spatial_rank;
  g.batch = x[0];
  g.channels = x[1];
  g.in_h = w.in_h;
  g.in_w = w.in_w;
  g.out_h = w.out_h;
  g.out_w = w.out_w;
  g.kernel_h = w.k_h;
  g.kernel_w = w.k_w;
  g.stride_h = w.s_h;
  g.stride_w = w.s_w;
  g.dilation_h = w.d_h;
  g.dilation_w = w.d_w;
  g.pad_top = w.pad_top;
  g.pad_left = w.pad_left;
  g.pad_bottom = w.pad_bottom;
  g.pad_right = w.pad_right;
  g.count_include_pad = node.op_type == "AveragePool" && include_pad != 0;
  return g;
}

void AppendConvOps(std::vector<OpSchema>& t) {
  t.push_back({"Conv", OpKind::kMatMul, 2, 3, InferConv, RunConv, ConvCost});
  t.push_back({"BatchNormalization", OpKind::kElementwise, 5, 5, InferBatchNorm, RunBatchNorm,
               BatchNormCost});
  t.push_back({"MaxPool", OpKind::kReduction, 1, 1, InferPool, RunPool<true>, PoolCost});
  t.push_back({"AveragePool", OpKind::kReduction, 1, 1, InferPool, RunPool<false>, PoolCost});
  t.push_back({"GlobalMaxPool", OpKind::kReduction, 1, 1, InferGlobalPool, RunGlobalPool<true>,
               GlobalPoolCost});
  t.push_back({"GlobalAveragePool", OpKind::kReduction, 1, 1, InferGlobalPool, RunGlobalPool<false>,
               GlobalPoolCost});
  t.push_back(
      {"HardSigmoid", OpKind::kElementwise, 1, 1, InferFloatSame, RunHardSigmoid, PerElement});
  t.push_back({"HardSwish", OpKind::kElementwise, 1, 1, InferFloatSame, RunHardSwish, PerElement});
  t.push_back({"Pad", OpKind::kDataMovement, 1, 4, InferPad, RunPad, NoCost});
}

}  // namespace fusetune::graph
