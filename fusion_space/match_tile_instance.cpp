// Kernel instances of the tile templates: a TileGroupMatch with its
// iteration space, operand strides and offsets fixed. Operands follow NumPy
// broadcasting against the group's space; with a Concat, each piece is the
// box of that space along the Concat's axis that its input fills.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "fusion_space/match_tile.h"

namespace fusetune::fusion_space {

namespace {

void BroadcastInto(graph::Dims* space, const graph::Dims& d) {
  if (d.size() > space->size()) space->insert(space->begin(), d.size() - space->size(), 1);
  for (size_t i = 0; i < d.size(); ++i) {
    int64_t& s = (*space)[space->size() - d.size() + i];
    s = std::max(s, d[i]);
  }
}

// Strides through which a view is read when broadcast to `space`
// (right-aligned; broadcast dimensions get stride 0), or nullopt.
std::optional<std::vector<int64_t>> ViewStrides(const StridedView& v, const graph::Dims& space) {
  if (v.dims.size() > space.size()) return std::nullopt;
  std::vector<int64_t> strides(space.size(), 0);
  const size_t lead = space.size() - v.dims.size();
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (v.dims[i] == space[lead + i])
      strides[lead + i] = v.dims[i] == 1 ? 0 : v.strides[i];
    else if (v.dims[i] != 1)
      return std::nullopt;
  }
  return strides;
}

FusionDecision NotBroadcast(const graph::Graph& g, const StridedView& v, const graph::Dims& space) {
  return FusionDecision::Forbid(fmt::format("input {} {} does not broadcast to the group's {}",
                                            g.value(v.base).name, graph::DimsToString(v.dims),
                                            graph::DimsToString(space)));
}

// The group's iteration space: every output and every operand read in the
// group's coordinates broadcast together.
graph::Dims IterationSpace(const graph::Graph& g, const TileGroupMatch& m) {
  graph::Dims space;
  for (const TilePiece& piece : m.pieces)
    for (const TileOperand& op : piece.operands)
      if (!op.piece_local) BroadcastInto(&space, op.view.dims);
  for (graph::ValueId v : m.outputs) BroadcastInto(&space, g.type(v).dims);
  if (space.empty()) space = {1};
  return space;
}

// One descriptor per piece; `axis` of the space is the Concat's (-1: none),
// along which piece p spans sizes[p].
FusionDecision BuildElementwise(const graph::Graph& g, const TileGroupMatch& m,
                                const graph::Dims& space, int64_t axis,
                                const std::vector<int64_t>& sizes, KernelInstance* k) {
  const std::vector<int64_t> out_strides = graph::RowMajorStrides(space);
  std::vector<kernels::ElementwiseDesc> descs;
  int64_t start = 0;
  for (size_t p = 0; p < m.pieces.size(); ++p) {
    const TilePiece& piece = m.pieces[p];
    graph::Dims dims = space;
    if (axis >= 0) dims[axis] = sizes[p];
    const int64_t shift = start;
    if (axis >= 0) start += dims[axis];
    if (graph::NumElements(dims) == 0) continue;  // an empty input of the Concat
    kernels::ElementwiseDesc d;
    d.dims = dims;
    for (const TileOperand& op : piece.operands) {
      auto strides = ViewStrides(op.view, op.piece_local ? dims : space);
      if (!strides) return NotBroadcast(g, op.view, op.piece_local ? dims : space);
      const bool shifted = axis >= 0 && !op.piece_local;
      const int64_t offset = op.view.offset + (shifted ? shift * (*strides)[axis] : 0);
      d.inputs.push_back({k->AddSlot(op.view.base, offset), *strides});
    }
    for (graph::ValueId v : m.outputs) {
      d.outputs.push_back(k->AddSlot(v, axis < 0 ? 0 : shift * out_strides[axis]));
      if (axis >= 0) d.output_strides.push_back(out_strides);
    }
    d.program = piece.program;
    descs.push_back(std::move(d));
  }
  if (descs.empty()) return FusionDecision::Forbid("the group's output is empty");
  k->elementwise = std::move(descs[0]);
  k->elementwise.pieces.assign(std::make_move_iterator(descs.begin() + 1),
                               std::make_move_iterator(descs.end()));
  return FusionDecision::Allow();
}

// The Concat's axis in the space and the extent of each piece along it.
FusionDecision ConcatPieces(const graph::Graph& g, const TileGroupMatch& m,
                            const graph::Dims& space, int64_t* axis, std::vector<int64_t>* sizes) {
  const graph::Node& c = g.nodes[m.concat];
  const graph::Dims& out = g.type(c.outputs[0]).dims;
  auto attr = c.attrs.GetInt("axis", 0);
  const int64_t rank = static_cast<int64_t>(out.size());
  int64_t a = attr.ok() ? *attr : 0;
  if (a < 0) a += rank;
  const int64_t lead = static_cast<int64_t>(space.size()) - rank;
  if (a < 0 || a >= rank || lead < 0 || out[a] != space[lead + a])
    return FusionDecision::Forbid(fmt::format(
        "node {} (Concat): its output {} is broadcast along the Concat's axis in the group's {}",
        m.concat, graph::DimsToString(out), graph::DimsToString(space)));
  *axis = lead + a;
  for (graph::ValueId in : c.inputs) sizes->push_back(g.type(in).dims[a]);
  return FusionDecision::Allow();
}

FusionDecision BuildRowwise(const graph::Graph& g, const TileGroupMatch& m,
                            const graph::Dims& space, KernelInstance* k) {
  auto& d = k->rowwise;
  d.cols = space.back();
  if (d.cols != m.row_length)
    return FusionDecision::Forbid(fmt::format(
        "reduction axis differs from the group's: rows of {} reduced, the group spans {}",
        m.row_length, d.cols));
  d.row_dims.assign(space.begin(), space.end() - 1);
  if (d.row_dims.empty()) d.row_dims = {1};
  graph::Dims narrow = space;
  narrow.back() = 1;
  for (const TileOperand& op : m.pieces[0].operands) {
    auto strides = ViewStrides(op.view, space);
    if (!strides) return NotBroadcast(g, op.view, space);
    std::vector<int64_t> s = *strides;
    const int64_t col = s.back();
    s.pop_back();
    if (s.empty()) s = {0};
    d.inputs.push_back({k->AddSlot(op.view.base, op.view.offset), s,
                        op.view.dims.empty() || op.view.dims.back() == 1 ? 0 : col});
  }
  for (graph::ValueId v : m.outputs) {
    const graph::Dims& od = g.type(v).dims;
    const bool wide = od.size() == space.size() && od == space;
    const bool per_row = od.size() == space.size() && od == narrow;
    if (!wide && !per_row)
      return FusionDecision::Forbid(
          fmt::format("output {} {} is neither the group's rows {} nor one value per row",
                      g.value(v).name, graph::DimsToString(od), graph::DimsToString(space)));
    std::vector<int64_t> s = graph::RowMajorStrides(od);
    s.pop_back();
    if (s.empty()) s = {0};
    d.outputs.push_back({k->AddSlot(v), s, wide ? 1 : 0});
  }
  d.program = m.pieces[0].program;
  // Programs whose outputs do not vary by row, or whose per-row outputs
  // would land in a wide tensor, are rejected by the template itself.
  kernels::KernelConfig unlimited;
  unlimited.local_buffer_bytes = size_t{1} << 40;
  Status st = kernels::ValidateRowwise(d, kernels::RowwiseTiling{1, 1, 0}, unlimited);
  if (!st.ok()) return FusionDecision::Forbid(st.error().message());
  k->summary = fmt::format("rowwise {} rows of {}", graph::NumElements(d.row_dims), d.cols);
  return FusionDecision::Allow();
}

}  // namespace

FusionDecision MatchTileInstance(const graph::Graph& g, const Dataflow& flow,
                                 std::span<const int32_t> group, KernelInstance* k) {
  TileGroupMatch m = MatchTileGroup(g, flow, group);
  if (!m.decision) return m.decision;
  const graph::Dims space = IterationSpace(g, m);
  k->nodes.assign(group.begin(), group.end());
  std::sort(k->nodes.begin(), k->nodes.end());
  k->inputs = m.inputs;
  k->outputs = m.outputs;
  for (graph::ValueId v : m.outputs)
    if (g.type(v).numel() != graph::NumElements(space))
      return FusionDecision::Forbid(fmt::format(
          "output {} {} is smaller than the group's iteration space {}", g.value(v).name,
          graph::DimsToString(g.type(v).dims), graph::DimsToString(space)));
  if (m.kind == TileTemplate::kRowwise) {
    k->kind = KernelTemplate::kRowwise;
    return BuildRowwise(g, m, space, k);
  }
  k->kind = KernelTemplate::kElementwise;
  int64_t axis = -1;
  std::vector<int64_t> sizes;
  if (m.concat >= 0) FT_RETURN_IF_DECISION(ConcatPieces(g, m, space, &axis, &sizes));
  FT_RETURN_IF_DECISION(BuildElementwise(g, m, space, axis, sizes, k));
  k->summary = "elementwise " + graph::DimsToString(space);
  if (!k->elementwise.pieces.empty())
    k->summary += fmt::format(" in {} pieces", k->elementwise.pieces.size() + 1);
  return FusionDecision::Allow();
}

}  // namespace fusetune::fusion_space
