// Resize (opsets 10 to 19): nearest and linear interpolation over any axes,
// with scales or sizes that must be constant once shapes are folded. The
// reference kernel is separable: it resizes one axis at a time in double,
// which for nearest and (multi)linear interpolation equals the N-D formula of
// the ONNX reference. Cubic interpolation, antialiasing, exclude_outside and
// keep_aspect_ratio_policy other than "stretch" are reported as unsupported.
#include <algorithm>
#include <cmath>
#include <functional>

#include "graph/op_helpers.h"

namespace fusetune::graph {
namespace {

using namespace ops;

// Everything the kernel needs, resolved from attributes and constant inputs.
struct ResizeSpec {
  bool linear = false;
  std::string coord;    // coordinate_transformation_mode
  std::string nearest;  // nearest_mode
  double extrapolation = 0;
  Dims out;
  std::vector<double> scale;               // per axis of X
  std::vector<double> roi_start, roi_end;  // per axis, tf_crop_and_resize only
};

// The node's inputs by role: opset 10 has (X, scales); 11 and later
// (X, roi, scales, sizes). An empty tensor counts as absent.
struct ResizeInputs {
  const Tensor* roi = nullptr;
  const Tensor* scales = nullptr;
  const Tensor* sizes = nullptr;
};

const Tensor* NonEmpty(const Tensor* t) { return t != nullptr && t->numel() > 0 ? t : nullptr; }

Status CheckModes(const std::function<Error(ErrorCode, const std::string&)>& fail, const Node& node,
                  int64_t opset, ResizeSpec* s) {
  FT_ASSIGN_OR_RETURN(const std::string mode, node.attrs.GetString("mode", "nearest"));
  if (mode == "cubic")
    return fail(ErrorCode::kUnsupported, "attribute mode='cubic' is not supported");
  if (mode != "nearest" && mode != "linear")
    return fail(ErrorCode::kInvalidArgument, fmt::format("unknown attribute mode='{}'", mode));
  s->linear = mode == "linear";
  if (opset < 11) {
    // Resize-10 is Upsample's formula: x_original = x_resized / scale, floored.
    s->coord = "asymmetric";
    s->nearest = "floor";
    return Status::Ok();
  }
  FT_ASSIGN_OR_RETURN(s->coord,
                      node.attrs.GetString("coordinate_transformation_mode", "half_pixel"));
  static const char* kCoords[] = {
      "half_pixel",           "pytorch_half_pixel", "align_corners",       "asymmetric",
      "tf_half_pixel_for_nn", "tf_crop_and_resize", "half_pixel_symmetric"};
  const bool known =
      std::find(std::begin(kCoords), std::end(kCoords), s->coord) != std::end(kCoords);
  if (!known || (s->coord == "half_pixel_symmetric" && opset < 19))
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("unknown attribute coordinate_transformation_mode='{}'", s->coord));
  FT_ASSIGN_OR_RETURN(s->nearest, node.attrs.GetString("nearest_mode", "round_prefer_floor"));
  if (s->nearest != "round_prefer_floor" && s->nearest != "round_prefer_ceil" &&
      s->nearest != "floor" && s->nearest != "ceil")
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("unknown attribute nearest_mode='{}'", s->nearest));
  FT_ASSIGN_OR_RETURN(const int64_t exclude, node.attrs.GetInt("exclude_outside", 0));
  if (exclude != 0)
    return fail(ErrorCode::kUnsupported, "attribute exclude_outside=1 is not supported");
  FT_ASSIGN_OR_RETURN(const int64_t antialias, node.attrs.GetInt("antialias", 0));
  if (antialias != 0)
    return fail(ErrorCode::kUnsupported, "attribute antialias=1 is not supported");
  FT_ASSIGN_OR_RETURN(const std::string policy,
                      node.attrs.GetString("keep_aspect_ratio_policy", "stretch"));
  if (policy != "stretch")
    return fail(ErrorCode::kUnsupported,
                fmt::format("attribute keep_aspect_ratio_policy='{}' is not supported (only "
                            "'stretch')",
                            policy));
  FT_ASSIGN_OR_RETURN(const float extrapolation, node.attrs.GetFloat("extrapolation_value", 0.0f));
  s->extrapolation = extrapolation;
  return Status::Ok();
}

// The resized axes: opset 18's axes attribute, else all of them.
Result<std::vector<int64_t>> ResizeAxes(
    const std::function<Error(ErrorCode, const std::string&)>& fail, const Node& node,
    int64_t rank) {
  std::vector<int64_t> axes;
  if (!node.attrs.Has("axes")) {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    return axes;
  }
  FT_ASSIGN_OR_RETURN(axes, node.attrs.GetInts("axes"));
  std::vector<bool> seen(rank, false);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank)
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("attribute axes: axis {} is out of range for rank {}", a, rank));
    if (a < 0) a += rank;
    if (seen[a])
      return fail(ErrorCode::kInvalidArgument, fmt::format("attribute axes repeats axis {}", a));
    seen[a] = true;
  }
  return axes;
}

Result<ResizeSpec> ResolveResize(const InferContext* ctx, const Node& node, int64_t opset,
                                 const Dims& x, ResizeInputs in) {
  const std::function<Error(ErrorCode, const std::string&)> fail = [&](ErrorCode code,
                                                                       const std::string& msg) {
    return ctx ? ctx->Fail(code, msg) : Error(code, msg);
  };
  ResizeSpec s;
  FT_RETURN_IF_ERROR(CheckModes(fail, node, opset, &s));
  const int64_t rank = static_cast<int64_t>(x.size());
  FT_ASSIGN_OR_RETURN(const auto axes, ResizeAxes(fail, node, rank));
  const Tensor* scales = NonEmpty(in.scales);
  const Tensor* sizes = NonEmpty(in.sizes);
  if ((scales == nullptr) == (sizes == nullptr))
    return fail(ErrorCode::kInvalidArgument, "exactly one of scales and sizes must be given");
  const Tensor* given = scales ? scales : sizes;
  if (given->numel() != static_cast<int64_t>(axes.size()))
    return fail(ErrorCode::kShapeMismatch,
                fmt::format("{} has {} values, expected {} (one per resized axis)",
                            scales ? "scales" : "sizes", given->numel(), axes.size()));
  s.scale.assign(rank, 1.0);
  s.roi_start.assign(rank, 0.0);
  s.roi_end.assign(rank, 1.0);
  const Tensor* roi = s.coord == "tf_crop_and_resize" ? NonEmpty(in.roi) : nullptr;
  if (s.coord == "tf_crop_and_resize" && roi == nullptr)
    return fail(ErrorCode::kInvalidArgument, "tf_crop_and_resize needs the roi input");
  if (roi != nullptr && roi->numel() != 2 * static_cast<int64_t>(axes.size()))
    return fail(ErrorCode::kShapeMismatch,
                fmt::format("roi has {} values, expected {}", roi->numel(), 2 * axes.size()));
  s.out = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i];
    if (roi != nullptr) {
      s.roi_start[a] = roi->GetAsDouble(static_cast<int64_t>(i));
      s.roi_end[a] = roi->GetAsDouble(static_cast<int64_t>(i + axes.size()));
    }
    if (scales != nullptr) {
      const double sc = scales->GetAsDouble(static_cast<int64_t>(i));
      if (!(sc > 0) || !std::isfinite(sc))
        return fail(ErrorCode::kInvalidArgument,
                    fmt::format("scale {} on axis {} must be positive", sc, a));
      const double len = static_cast<double>(x[a]) * (s.roi_end[a] - s.roi_start[a]) * sc;
      if (!(len >= 0) || len > 1e15)
        return fail(ErrorCode::kShapeMismatch,
                    fmt::format("scale {} gives an invalid size on axis {}", sc, a));
      s.scale[a] = sc;
      s.out[a] = static_cast<int64_t>(std::floor(len));
    } else {
      const int64_t n = sizes->GetAsInt(static_cast<int64_t>(i));
      if (n < 0 || (n > 0 && x[a] == 0))
        return fail(ErrorCode::kShapeMismatch,
                    fmt::format("size {} is invalid for axis {} of length {}", n, a, x[a]));
      s.out[a] = n;
      s.scale[a] = x[a] == 0 ? 1.0 : static_cast<double>(n) / static_cast<double>(x[a]);
    }
    if (s.out[a] > 0 && x[a] == 0)
      return fail(ErrorCode::kShapeMismatch, fmt::format("axis {} of X is empty", a));
  }
  return s;
}

// The inputs of a Resize node by role, from a list indexed like node.inputs.
template <typename Get>
ResizeInputs InputsByRole(int64_t opset, Get get) {
  ResizeInputs r;
  if (opset < 11) {
    r.scales = get(1);
  } else {
    r.roi = get(1);
    r.scales = get(2);
    r.sizes = get(3);
  }
  return r;
}

Result<std::vector<TensorType>> InferResize(const InferContext& ctx) {
  if (!IsFloat(ctx.type(0).dtype))
    return ctx.Fail(ErrorCode::kUnsupported, fmt::format("X must be a float tensor, not {}",
                                                         DataTypeName(ctx.type(0).dtype)));
  static const char* kNames[] = {"X", "roi", "scales", "sizes"};
  // roi matters to tf_crop_and_resize only; elsewhere it may be anything.
  FT_ASSIGN_OR_RETURN(const std::string coord,
                      ctx.node.attrs.GetString("coordinate_transformation_mode", "half_pixel"));
  const bool roi_used = ctx.opset >= 11 && coord == "tf_crop_and_resize";
  Status missing = Status::Ok();
  auto get = [&](size_t i) -> const Tensor* {
    if (!ctx.has_input(i) || (ctx.opset >= 11 && i == 1 && !roi_used)) return nullptr;
    auto c = ctx.RequireConstant(i, ctx.opset < 11 ? "scales" : kNames[i]);
    if (!c.ok()) {
      if (missing.ok()) missing = c.error();
      return nullptr;
    }
    return *c;
  };
  const ResizeInputs in = InputsByRole(ctx.opset, get);
  FT_RETURN_IF_ERROR(missing);
  FT_ASSIGN_OR_RETURN(ResizeSpec s, ResolveResize(&ctx, ctx.node, ctx.opset, ctx.type(0).dims, in));
  return One(ctx.type(0).dtype, s.out);
}

// x_original for output index i on one axis (the ONNX formulas). As in the
// ONNX reference and ONNX Runtime, the resized length in them is in * scale,
// not the floored output length: with scales that do not divide evenly,
// align_corners maps the last output index inside the input, not onto its end.
double SourceCoordinate(const ResizeSpec& s, int64_t axis, int64_t i, int64_t in_len,
                        int64_t out_len) {
  const double x = static_cast<double>(i), sc = s.scale[axis];
  const double in = static_cast<double>(in_len), out = in * sc;
  if (s.coord == "asymmetric") return x / sc;
  if (s.coord == "half_pixel") return (x + 0.5) / sc - 0.5;
  if (s.coord == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / sc - 0.5 : 0.0;
  if (s.coord == "align_corners") return out > 1 ? x * (in - 1) / (out - 1) : 0.0;
  if (s.coord == "tf_half_pixel_for_nn") return (x + 0.5) / sc;
  if (s.coord == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out_len) / out;
    const double offset = in / 2 * (1 - adjustment);
    return offset + (x + 0.5) / sc - 0.5;
  }
  // tf_crop_and_resize (the ONNX reference's formula, with in * scale).
  const double a = s.roi_start[axis], b = s.roi_end[axis];
  return out > 1 ? a * (in - 1) + x * (b - a) * (in - 1) / (out - 1) : 0.5 * (a + b) * (in - 1);
}

int64_t NearestIndex(const std::string& mode, double x) {
  const double f = std::floor(x);
  if (mode == "floor") return static_cast<int64_t>(f);
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (x - f == 0.5) return static_cast<int64_t>(mode == "round_prefer_floor" ? f : f + 1);
  return static_cast<int64_t>(std::round(x));
}

// How one output index of an axis reads the input: up to two taps, or the
// extrapolation value (tf_crop_and_resize outside the input).
struct Taps {
  int64_t i0 = 0, i1 = 0;
  double w0 = 1, w1 = 0;
  bool outside = false;
};

std::vector<Taps> AxisTaps(const ResizeSpec& s, int64_t axis, int64_t in_len, int64_t out_len) {
  std::vector<Taps> taps(static_cast<size_t>(out_len));
  for (int64_t i = 0; i < out_len; ++i) {
    const double x = SourceCoordinate(s, axis, i, in_len, out_len);
    Taps& t = taps[i];
    if (s.coord == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in_len - 1))) {
      t.outside = true;
      continue;
    }
    if (!s.linear) {
      t.i0 = t.i1 = std::clamp<int64_t>(NearestIndex(s.nearest, x), 0, in_len - 1);
      continue;
    }
    // Clamping equals the reference's edge padding of the input.
    const double c = std::clamp(x, 0.0, static_cast<double>(in_len - 1));
    t.i0 = static_cast<int64_t>(std::floor(c));
    t.i1 = std::min(t.i0 + 1, in_len - 1);
    t.w1 = c - static_cast<double>(t.i0);
    t.w0 = 1 - t.w1;
  }
  return taps;
}

bool IsIdentity(const std::vector<Taps>& taps, int64_t in_len) {
  if (static_cast<int64_t>(taps.size()) != in_len) return false;
  for (int64_t i = 0; i < in_len; ++i)
    if (taps[i].outside || taps[i].i0 != i || taps[i].w0 != 1) return false;
  return true;
}

// Resizes axis `axis` of the f64 tensor `x` to `out_len` with `taps`.
Tensor ResizeAxis(const Tensor& x, int64_t axis, int64_t out_len, const std::vector<Taps>& taps,
                  double extrapolation) {
  Dims dims = x.dims();
  const int64_t in_len = dims[axis];
  dims[axis] = out_len;
  Tensor out(DataType::kFloat64, dims);
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= dims[a];
  for (size_t a = axis + 1; a < dims.size(); ++a) inner *= dims[a];
  const double* px = x.data<double>();
  double* po = out.data<double>();
  const int64_t rows = outer * out_len;
  ParallelRange(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                [&](int64_t begin, int64_t end) {
                  for (int64_t r = begin; r < end; ++r) {
                    const int64_t o = r / out_len, i = r % out_len;
                    const Taps& t = taps[i];
                    double* dst = po + r * inner;
                    if (t.outside) {
                      std::fill(dst, dst + inner, extrapolation);
                      continue;
                    }
                    const double* a = px + (o * in_len + t.i0) * inner;
                    const double* b = px + (o * in_len + t.i1) * inner;
                    // One tap reads one value: no 0 * inf from the unused neighbour.
                    if (t.w1 == 0) {
                      std::copy(a, a + inner, dst);
                      continue;
                    }
                    for (int64_t k = 0; k < inner; ++k) dst[k] = t.w0 * a[k] + t.w1 * b[k];
                  }
                });
  return out;
}

Result<std::vector<Tensor>> RunResize(const KernelContext& ctx) {
  auto get = [&](size_t i) { return ctx.has_input(i) ? &ctx.in(i) : nullptr; };
  FT_ASSIGN_OR_RETURN(ResizeSpec s, ResolveResize(nullptr, ctx.node, ctx.opset, ctx.in(0).dims(),
                                                  InputsByRole(ctx.opset, get)));
  Tensor cur = ctx.in(0).CastTo(DataType::kFloat64);
  for (int64_t a = 0; a < static_cast<int64_t>(s.out.size()); ++a) {
    const int64_t in_len = cur.dims()[a];
    const auto taps = AxisTaps(s, a, in_len, s.out[a]);
    if (IsIdentity(taps, in_len)) continue;
    cur = ResizeAxis(cur, a, s.out[a], taps, s.extrapolation);
  }
  return std::vector<Tensor>{cur.CastTo(ctx.output_types[0].dtype)};
}

// Linear: one multiply-add (2 FLOPs) per tap, two taps per resized axis;
// nearest moves data only.
OpCost ResizeCost(const Node& node, const std::vector<const TensorType*>& in,
                  const std::vector<const TensorType*>& out) {
  auto mode = node.attrs.GetString("mode", "nearest");
  if (!mode.ok() || *mode != "linear" || in.empty() || in[0] == nullptr || out.empty() ||
      out[0] == nullptr)
    return {0, 0};
  int resized = 0;
  for (size_t a = 0; a < out[0]->dims.size() && a < in[0]->dims.size(); ++a)
    resized += out[0]->dims[a] != in[0]->dims[a];
  return {4.0 * resized * OutputElements(out), 0};
}

}  // namespace

void AppendResizeOps(std::vector<OpSchema>& t) {
  t.push_back({"Resize", OpKind::kDataMovement, 1, 4, InferResize, RunResize, ResizeCost});
}

}  // namespace fusetune::graph
