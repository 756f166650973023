#include "fusion_space/view.h"

#include <fmt/format.h>

#include "graph/op_registry.h"

namespace fusetune::fusion_space {

bool IsViewOp(const graph::Node& node) {
  return node.op_type == "Reshape" || node.op_type == "Transpose";
}

std::optional<std::vector<int64_t>> ReshapeStrides(std::span<const int64_t> dims,
                                                   std::span<const int64_t> strides,
                                                   std::span<const int64_t> new_dims) {
  // Drop size-1 dims (their strides do not matter), then match groups of old
  // dims to groups of new dims with equal products; inside an old group the
  // dims must be contiguous relative to each other.
  std::vector<int64_t> od, os;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != 1) od.push_back(dims[i]), os.push_back(strides[i]);
  std::vector<int64_t> out(new_dims.size(), 0);
  size_t oi = 0, ni = 0;
  while (oi < od.size() || ni < new_dims.size()) {
    if (ni < new_dims.size() && new_dims[ni] == 1) {
      out[ni++] = 0;
      continue;
    }
    if (oi >= od.size() || ni >= new_dims.size()) return std::nullopt;
    size_t oj = oi + 1, nj = ni + 1;
    int64_t op = od[oi], np = new_dims[ni];
    while (op != np) {
      if (op < np) {
        if (oj >= od.size()) return std::nullopt;
        op *= od[oj++];
      } else {
        if (nj >= new_dims.size()) return std::nullopt;
        np *= new_dims[nj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (os[k] != od[k + 1] * os[k + 1]) return std::nullopt;  // not mergeable without a copy
    int64_t stride = os[oj - 1];
    for (size_t k = nj; k-- > ni;) {
      out[k] = stride;
      stride *= new_dims[k];
    }
    oi = oj;
    ni = nj;
  }
  return out;
}

std::optional<std::vector<int64_t>> BroadcastStrides(const graph::Dims& dims,
                                                     const graph::Dims& space) {
  if (dims.size() > space.size()) return std::nullopt;
  const std::vector<int64_t> contiguous = graph::RowMajorStrides(dims);
  std::vector<int64_t> strides(space.size(), 0);
  const size_t lead = space.size() - dims.size();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == space[lead + i]) {
      strides[lead + i] = dims[i] == 1 ? 0 : contiguous[i];
    } else if (dims[i] != 1) {
      return std::nullopt;
    }
  }
  return strides;
}

namespace {

std::vector<int64_t> Perm(const graph::Graph& g, const graph::Node& node) {
  auto perm = node.attrs.GetInts("perm", std::vector<int64_t>{});
  std::vector<int64_t> p = perm.ok() ? *perm : std::vector<int64_t>{};
  const int64_t rank = g.type(node.inputs[0]).rank();
  if (p.empty())
    for (int64_t i = rank - 1; i >= 0; --i) p.push_back(i);
  return p;
}

}  // namespace

namespace {

bool IsSliceLike(const graph::Node& node) {
  return node.op_type == "Slice" || node.op_type == "Split";
}

// Where output `out` of a Split starts along its axis: the sum of the
// extents of the outputs before it (their inferred shapes).
std::pair<int64_t, int64_t> SplitAxisAndStart(const graph::Graph& g, const graph::Node& node,
                                              graph::ValueId out) {
  const int64_t rank = g.type(node.inputs[0]).rank();
  auto attr = node.attrs.GetInt("axis", 0);
  int64_t axis = attr.ok() ? *attr : 0;
  if (axis < 0) axis += rank;
  int64_t start = 0;
  for (graph::ValueId o : node.outputs) {
    if (o == out) break;
    start += g.type(o).dims[axis];
  }
  return {axis, start};
}

}  // namespace

FusionDecision ResolveReadView(const graph::Graph& g, std::span<const char> in_group,
                               graph::ValueId value, StridedView* view, bool allow_slices) {
  std::vector<std::pair<int32_t, graph::ValueId>>
      chain;  // (view node, the value it yields), last first
  graph::ValueId v = value;
  while (true) {
    const int32_t p = g.value(v).producer;
    if (p < 0 || !in_group[p]) break;
    if (!IsViewOp(g.nodes[p]) && !(allow_slices && IsSliceLike(g.nodes[p]))) break;
    chain.push_back({p, v});
    v = g.nodes[p].inputs[0];
  }
  view->base = v;
  view->dims = g.type(v).dims;
  view->strides = graph::RowMajorStrides(view->dims);
  view->offset = 0;
  for (size_t i = chain.size(); i-- > 0;) {
    const auto [index, out] = chain[i];
    const graph::Node& node = g.nodes[index];
    const graph::Dims& out_dims = g.type(out).dims;
    if (node.op_type == "Transpose") {
      const std::vector<int64_t> p = Perm(g, node);
      std::vector<int64_t> strides(p.size());
      for (size_t k = 0; k < p.size(); ++k) strides[k] = view->strides[p[k]];
      view->strides = std::move(strides);
    } else if (node.op_type == "Split") {
      const auto [axis, start] = SplitAxisAndStart(g, node, out);
      view->offset += start * view->strides[axis];
    } else if (node.op_type == "Slice") {
      auto window = graph::ResolveSliceNode(g, node);
      if (!window.ok())
        return FusionDecision::Forbid(
            fmt::format("node {} (Slice): {}", index, window.error().message()));
      for (size_t k = 0; k < view->strides.size(); ++k) {
        view->offset += window->start[k] * view->strides[k];
        view->strides[k] *= window->step[k];
      }
    } else {
      auto strides = ReshapeStrides(view->dims, view->strides, out_dims);
      if (!strides)
        return FusionDecision::Forbid(fmt::format(
            "node {} (Reshape) of a transposed or sliced view would need a copy", index));
      view->strides = std::move(*strides);
    }
    view->dims = out_dims;
  }
  return FusionDecision::Allow();
}

FusionDecision ResolveWriteView(const graph::Graph& g, std::span<const char> in_group,
                                const graph::ValueUses& uses, graph::ValueId value,
                                StridedView* view) {
  std::vector<int32_t> chain;  // view nodes from `value` forward
  graph::ValueId v = value;
  while (uses[v].size() == 1 && in_group[uses[v][0].first] && IsViewOp(g.nodes[uses[v][0].first])) {
    chain.push_back(uses[v][0].first);
    v = g.nodes[chain.back()].outputs[0];
  }
  view->base = v;
  view->dims = g.type(v).dims;
  view->strides = graph::RowMajorStrides(view->dims);
  for (size_t i = chain.size(); i-- > 0;) {
    const graph::Node& node = g.nodes[chain[i]];
    const graph::Dims& in_dims = g.type(node.inputs[0]).dims;
    if (node.op_type == "Transpose") {
      const std::vector<int64_t> p = Perm(g, node);
      std::vector<int64_t> strides(p.size());
      for (size_t k = 0; k < p.size(); ++k) strides[p[k]] = view->strides[k];
      view->strides = std::move(strides);
    } else {
      auto strides = ReshapeStrides(view->dims, view->strides, in_dims);
      if (!strides)
        return FusionDecision::Forbid(fmt::format(
            "node {} (Reshape) after a transpose cannot be written in place", chain[i]));
      view->strides = std::move(*strides);
    }
    view->dims = in_dims;
  }
  return FusionDecision::Allow();
}

}  // namespace fusetune::fusion_space
