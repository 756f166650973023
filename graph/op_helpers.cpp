#include "graph/op_helpers.h"

namespace fusetune::graph::ops {

Result<int64_t> NormalizeAxis(const InferContext& ctx, int64_t axis, int64_t rank) {
  const int64_t lo = -std::max<int64_t>(rank, 1), hi = std::max<int64_t>(rank, 1) - 1;
  if (axis < lo || axis > hi)
    return ctx.Fail(ErrorCode::kInvalidArgument,
                    fmt::format("axis {} is out of range for rank {}", axis, rank));
  return axis < 0 ? axis + rank : axis;
}

int64_t WrapAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

Result<Dims> BroadcastDims(const InferContext& ctx, const std::vector<const Dims*>& shapes) {
  size_t rank = 0;
  for (const Dims* s : shapes) rank = std::max(rank, s->size());
  Dims out(rank, 1);
  for (const Dims* s : shapes) {
    const size_t off = rank - s->size();
    for (size_t i = 0; i < s->size(); ++i) {
      const int64_t d = (*s)[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string list;
      for (const Dims* t : shapes) list += (list.empty() ? "" : " and ") + DimsToString(*t);
      return ctx.Fail(ErrorCode::kShapeMismatch, fmt::format("shapes {} do not broadcast", list));
    }
  }
  return out;
}

Dims BroadcastPair(const Dims& a, const Dims& b) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank, 1);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t da = k + a.size() >= rank ? a[k + a.size() - rank] : 1;
    const int64_t db = k + b.size() >= rank ? b[k + b.size() - rank] : 1;
    out[k] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> BroadcastStrides(const Dims& in, const Dims& out) {
  std::vector<int64_t> strides(out.size(), 0);
  const auto in_strides = RowMajorStrides(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) strides[off + i] = in[i] == 1 ? 0 : in_strides[i];
  return strides;
}

Tensor AsF32(const Tensor& t) {
  return t.dtype() == DataType::kFloat32 ? t : t.CastTo(DataType::kFloat32);
}

Tensor FromF32(Tensor t, DataType dtype) {
  return dtype == DataType::kFloat32 ? t : t.CastTo(dtype);
}

OpCost NoCost(const Node&, const std::vector<const TensorType*>&,
              const std::vector<const TensorType*>&) {
  return {};
}

double OutputElements(const std::vector<const TensorType*>& outputs) {
  double n = 0;
  for (const TensorType* t : outputs)
    if (t) n += static_cast<double>(t->numel());
  return n;
}

double InputElements(const std::vector<const TensorType*>& inputs) {
  double n = 0;
  for (const TensorType* t : inputs)
    if (t) n += static_cast<double>(t->numel());
  return n;
}

Result<std::vector<int64_t>> AxesFromAttrOrInput(const InferContext& ctx, size_t input_index,
                                                 bool* present) {
  *present = false;
  if (ctx.node.attrs.Has("axes")) {
    *present = true;
    return ctx.node.attrs.GetInts("axes");
  }
  if (ctx.has_input(input_index)) {
    FT_ASSIGN_OR_RETURN(const Tensor* axes, ctx.RequireConstant(input_index, "axes"));
    *present = true;
    return axes->ToInt64Vector();
  }
  return std::vector<int64_t>{};
}

std::vector<int64_t> AxesFromAttrOrInput(const KernelContext& ctx, size_t input_index) {
  if (ctx.node.attrs.Has("axes")) return ctx.node.attrs.GetInts("axes").value();
  if (ctx.has_input(input_index)) return ctx.in(input_index).ToInt64Vector();
  return {};
}

}  // namespace fusetune::graph::ops
