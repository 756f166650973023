#include "runtime/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

namespace fusetune::runtime {

namespace {

bool Contains(const std::vector<graph::ValueId>& values, graph::ValueId v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

int64_t Product(const graph::Dims& dims, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= dims[i];
  return p;
}

// The link's Concat when node n is one: a graph input (read by nothing else,
// not an output) and new rows joined into a graph output of the same rank.
std::optional<KvCacheLink> CacheLinkOf(const graph::Graph& g, int32_t n) {
  const graph::Node& node = g.nodes[n];
  if (node.op_type != "Concat" || !node.domain.empty() || node.inputs.size() != 2 ||
      node.outputs.size() != 1)
    return std::nullopt;
  const graph::ValueId past = node.inputs[0], present = node.outputs[0];
  if (past == graph::kNoValue || !g.value(past).is_input || Contains(g.outputs, past) ||
      !Contains(g.outputs, present) || g.type(present).dtype != graph::DataType::kFloat32 ||
      g.type(past).rank() != g.type(present).rank())
    return std::nullopt;
  for (int32_t other = 0; other < static_cast<int32_t>(g.nodes.size()); ++other)
    if (other != n && Contains(g.nodes[other].inputs, past)) return std::nullopt;
  auto axis = node.attrs.GetInt("axis", 0);
  if (!axis.ok()) return std::nullopt;
  const int64_t rank = g.type(present).rank();
  const int64_t a = *axis < 0 ? *axis + rank : *axis;
  if (a < 0 || a >= rank) return std::nullopt;
  return KvCacheLink{past, present, a, n};
}

graph::ValueId SlotValue(const fusion_space::KernelInstance& k, const float* pointer) {
  const int slot = fusion_space::SlotIndex(pointer);
  return slot < 0 ? graph::kNoValue : k.slots[slot].value;
}

std::string Where(const fusion_space::KernelInstance& k) { return "kernel '" + k.summary + "'"; }

int64_t SlotOffset(const fusion_space::KernelInstance& k, const float* pointer) {
  const int slot = fusion_space::SlotIndex(pointer);
  return slot < 0 ? -1 : k.slots[slot].offset;
}

// The piece that copies `past` as it lies into the first rows of `present`.
bool CopiesPastAsItLies(const graph::Graph& g, const fusion_space::KernelInstance& k,
                        const kernels::ElementwiseDesc& piece, graph::ValueId past) {
  const auto& instrs = piece.program.instrs();
  if (piece.inputs.size() != 1 || piece.outputs.size() != 1 ||
      piece.program.outputs().size() != 1 ||
      instrs[piece.program.outputs()[0]].op != kernels::TileOp::kInput ||
      piece.dims != g.type(past).dims || SlotOffset(k, piece.inputs[0].data) != 0 ||
      SlotOffset(k, piece.outputs[0]) != 0)
    return false;
  const std::vector<int64_t> dense = graph::RowMajorStrides(piece.dims);
  for (size_t i = 0; i < dense.size(); ++i)
    if (piece.dims[i] != 1 && piece.inputs[0].strides[i] != dense[i]) return false;
  return true;
}

// A piece writing new rows must write them right after the compiled past
// (where a run moves them to its length) and read only what does not move
// with the past's length. An operand that varies along the axis is read
// from the piece's start, unless it spans the whole Concat (its offset
// then includes the past's rows, and a run at another length would read
// other rows of it): refused when its offset could be that.
Status WritesOnlyNewRows(const graph::Graph& g, const fusion_space::KernelInstance& k,
                         const kernels::ElementwiseDesc& piece, const KvCacheLink& link,
                         int64_t compiled_past, int64_t row_elements) {
  const std::string present = g.value(link.present).name;
  const int64_t lead = static_cast<int64_t>(piece.dims.size()) - g.type(link.present).rank();
  const size_t axis = static_cast<size_t>(lead + link.axis);
  for (float* out : piece.outputs)
    if (SlotOffset(k, out) != compiled_past * row_elements)
      return Error(
          ErrorCode::kUnsupported,
          fmt::format("{} writes rows of '{}' elsewhere than after the past", Where(k), present));
  for (const kernels::StridedOperand& op : piece.inputs) {
    const int64_t stride = axis < op.strides.size() ? op.strides[axis] : 0;
    if (stride == 0) continue;
    const int64_t offset = SlotOffset(k, op.data);
    if (stride < 0 || offset < 0 || offset >= compiled_past * stride)
      return Error(ErrorCode::kUnsupported,
                   fmt::format("{} reads the new rows of '{}' from an operand along the whole "
                               "cache's length",
                               Where(k), present));
  }
  return Status::Ok();
}

Result<KvCacheStep> PlanAppend(const graph::Graph& g, const fusion_space::KernelInstance& k,
                               const KvCacheLink& link, int64_t compiled_past,
                               int64_t row_elements) {
  const std::string present = g.value(link.present).name;
  if (k.kind != fusion_space::KernelTemplate::kElementwise)
    return Error(ErrorCode::kUnsupported,
                 fmt::format("the Concat writing '{}' runs in {}, not an elementwise kernel",
                             present, Where(k)));
  if (k.outputs != std::vector<graph::ValueId>{link.present})
    return Error(ErrorCode::kUnsupported,
                 fmt::format("{} writes more than the cache '{}'", Where(k), present));
  KvCacheStep step{KvCacheStep::Role::kAppend, 0, row_elements};
  int past_pieces = 0;
  const auto pieces = kernels::ElementwisePieces(k.elementwise);
  for (size_t p = 0; p < pieces.size(); ++p) {
    bool reads_past = false;
    for (const kernels::StridedOperand& op : pieces[p]->inputs)
      reads_past |= SlotValue(k, op.data) == link.past;
    if (!reads_past) {
      FT_RETURN_IF_ERROR(WritesOnlyNewRows(g, k, *pieces[p], link, compiled_past, row_elements));
      continue;
    }
    if (!CopiesPastAsItLies(g, k, *pieces[p], link.past))
      return Error(ErrorCode::kUnsupported,
                   fmt::format("{} computes on '{}' rather than copying it into '{}'", Where(k),
                               g.value(link.past).name, present));
    step.past_piece = p;
    ++past_pieces;
  }
  if (past_pieces != 1 || pieces.size() < 2)
    return Error(ErrorCode::kUnsupported,
                 fmt::format("{}: exactly one piece must copy '{}' and another write the new rows",
                             Where(k), g.value(link.past).name));
  return step;
}

// An attention kernel reading the cache as K or V along its rows, over all
// of them, with no mask over the cache's columns.
Status CheckAttend(const graph::Graph& g, const fusion_space::KernelInstance& k,
                   const KvCacheLink& link, int64_t row_elements) {
  const std::string present = g.value(link.present).name;
  if (k.kind != fusion_space::KernelTemplate::kAttention)
    return Error(ErrorCode::kUnsupported,
                 fmt::format("the cache '{}' is read by {}, not by attention", present, Where(k)));
  const kernels::AttentionDesc& d = k.attention;
  if (d.mask == kernels::MaskKind::kAdditive)
    return Error(
        ErrorCode::kUnsupported,
        fmt::format("{} adds a mask over the columns of the cache '{}'", Where(k), present));
  const bool as_k = SlotValue(k, d.k.data) == link.present;
  const bool as_v = SlotValue(k, d.v.data) == link.present;
  if ((!as_k && !as_v) || (as_k && d.k.row != row_elements) || (as_v && d.v.row != row_elements) ||
      d.seq_kv != g.type(link.present).dims[link.axis])
    return Error(ErrorCode::kUnsupported,
                 fmt::format("{} reads the cache '{}' other than as its keys or values, row by row",
                             Where(k), present));
  return Status::Ok();
}

}  // namespace

std::vector<KvCacheLink> FindKvCacheLinks(const graph::Graph& graph) {
  std::vector<KvCacheLink> links;
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n)
    if (auto link = CacheLinkOf(graph, n)) links.push_back(*link);
  return links;
}

Result<KvCachePlan> PlanKvCacheInPlace(
    const graph::Graph& g, const std::vector<const fusion_space::KernelInstance*>& steps) {
  KvCachePlan plan;
  plan.links = FindKvCacheLinks(g);
  if (plan.links.empty())
    return Error(ErrorCode::kUnsupported,
                 "the model has no KV cache: no Concat joins a graph input and new rows into a "
                 "graph output");
  const KvCacheLink& first = plan.links[0];
  plan.compiled_past = g.type(first.past).dims[first.axis];
  plan.capacity = g.type(first.present).dims[first.axis];
  plan.new_rows = plan.capacity - plan.compiled_past;
  if (plan.compiled_past < 1 || plan.new_rows < 1)
    return Error(ErrorCode::kUnsupported,
                 fmt::format("the cache '{}' is compiled with {} past and {} new rows: serving it "
                             "in place needs at least one of each",
                             g.value(first.past).name, plan.compiled_past, plan.new_rows));
  for (const KvCacheLink& link : plan.links)
    if (g.type(link.past).dims[link.axis] != plan.compiled_past ||
        g.type(link.present).dims[link.axis] != plan.capacity)
      return Error(ErrorCode::kUnsupported,
                   fmt::format("the caches differ in length: '{}' holds {} rows, '{}' {}",
                               g.value(first.past).name, plan.compiled_past,
                               g.value(link.past).name, g.type(link.past).dims[link.axis]));
  plan.steps.resize(steps.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    if (!steps[s]) continue;  // a layout transform: activations of convolutions only
    const fusion_space::KernelInstance& k = *steps[s];
    for (const KvCacheLink& link : plan.links) {
      const graph::Dims& dims = g.type(link.present).dims;
      const int64_t row_elements = Product(dims, static_cast<size_t>(link.axis) + 1, dims.size());
      if (std::find(k.nodes.begin(), k.nodes.end(), link.concat_node) != k.nodes.end()) {
        FT_ASSIGN_OR_RETURN(plan.steps[s],
                            PlanAppend(g, k, link, plan.compiled_past, row_elements));
      } else if (Contains(k.inputs, link.present)) {
        FT_RETURN_IF_ERROR(CheckAttend(g, k, link, row_elements));
        plan.steps[s].role = KvCacheStep::Role::kAttend;
      }
    }
  }
  return plan;
}

Status CheckLengthFree(const graph::Graph& graph, const graph::Graph& longer) {
  const auto differs = [](const std::string& what) {
    return Error(ErrorCode::kUnsupported,
                 fmt::format("{} depends on the cache's length, which a program served in place "
                             "computes for its capacity at every step: export positions and "
                             "masks as inputs, not from the past's shape",
                             what));
  };
  if (graph.nodes.size() != longer.nodes.size()) return differs("the graph's structure");
  for (size_t n = 0; n < graph.nodes.size(); ++n)
    if (graph.nodes[n].op_type != longer.nodes[n].op_type)
      return differs(graph.Describe(static_cast<int32_t>(n)));
  for (const graph::Value& v : graph.values) {
    if (!v.is_constant()) continue;
    const auto other = longer.FindValue(v.name);
    const graph::Value* w = other ? &longer.value(*other) : nullptr;
    if (!w || !w->is_constant() || !v.constant->BitwiseEquals(*w->constant))
      return differs(fmt::format("constant '{}'", v.name));
  }
  return Status::Ok();
}

Result<std::string> CacheLengthSymbol(const graph::Graph& graph, const KvCachePlan& plan) {
  const KvCacheLink& link = plan.links.at(0);
  const graph::TensorType& t = graph.type(link.past);
  const size_t axis = static_cast<size_t>(link.axis);
  if (axis >= t.symbols.size() || t.symbols[axis].empty())
    return Error(ErrorCode::kUnsupported,
                 fmt::format("the cache '{}' has a fixed length: a model exported for one length "
                             "cannot serve others (export it with the past's length as a dynamic "
                             "axis)",
                             graph.value(link.past).name));
  return t.symbols[axis];
}

void AppendAtLength(const KvCachePlan& plan, const KvCacheStep& step, int64_t length,
                    kernels::ElementwiseDesc* desc) {
  std::vector<kernels::ElementwiseDesc> pieces;
  std::vector<kernels::ElementwiseDesc> rest = std::move(desc->pieces);
  desc->pieces.clear();
  pieces.push_back(std::move(*desc));
  for (kernels::ElementwiseDesc& p : rest) pieces.push_back(std::move(p));
  pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(step.past_piece));
  const int64_t shift = (length - plan.compiled_past) * step.row_elements;
  for (kernels::ElementwiseDesc& p : pieces)
    for (float*& out : p.outputs) out += shift;
  *desc = std::move(pieces[0]);
  desc->pieces.assign(std::make_move_iterator(pieces.begin() + 1),
                      std::make_move_iterator(pieces.end()));
}

namespace {

// `outer` blocks of `run` bytes, `src_stride` and `dst_stride` bytes apart.
void CopyBlocks(std::byte* dst, size_t dst_stride, const std::byte* src, size_t src_stride,
                int64_t outer, size_t run) {
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + static_cast<size_t>(o) * dst_stride,
                src + static_cast<size_t>(o) * src_stride, run);
}

// Bytes from one index of `axis` to the next index of the axis before it.
size_t BlockBytes(const graph::Tensor& t, int64_t axis) {
  return static_cast<size_t>(Product(t.dims(), static_cast<size_t>(axis), t.dims().size())) *
         graph::DataTypeSize(t.dtype());
}

}  // namespace

void CopyRowsIntoCache(const graph::Tensor& rows, int64_t axis, graph::Tensor* cache) {
  const size_t run = BlockBytes(rows, axis);
  CopyBlocks(cache->raw(), BlockBytes(*cache, axis), rows.raw(), run,
             Product(rows.dims(), 0, static_cast<size_t>(axis)), run);
}

graph::Tensor CacheRows(const graph::Tensor& cache, int64_t axis, int64_t length) {
  graph::Dims dims = cache.dims();
  dims[static_cast<size_t>(axis)] = length;
  graph::Tensor rows = graph::Tensor::Uninitialized(cache.dtype(), dims);
  const size_t run = BlockBytes(rows, axis);
  CopyBlocks(rows.raw(), run, cache.raw(), BlockBytes(cache, axis),
             Product(dims, 0, static_cast<size_t>(axis)), run);
  return rows;
}

}  // namespace fusetune::runtime
