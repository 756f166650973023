#include "runtime/layout_plan.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace fusetune::runtime {

using kernels::ActivationLayout;

std::vector<std::pair<int, ActivationLayout>> SlotLayouts(const fusion_space::KernelInstance& k,
                                                          const fusion_space::Tiling& tiling) {
  std::vector<std::pair<int, ActivationLayout>> out;
  const auto* t = std::get_if<kernels::ConvTiling>(&tiling);
  if (k.kind != fusion_space::KernelTemplate::kConv || t == nullptr) return out;
  auto add = [&](const float* p, ActivationLayout layout) {
    const int slot = fusion_space::SlotIndex(p);
    if (slot >= 0 && layout != ActivationLayout::kNCHW) out.emplace_back(slot, layout);
  };
  add(k.conv.x, t->in_layout);
  add(k.conv.y, t->out_layout);
  // Operands of Y's shape (residuals) are read in Y's layout (kernels/conv.h).
  for (const kernels::EpilogueOp& op : k.conv.epilogue)
    if (op.reads_memory() && op.row_stride == k.conv.shape.pixels() && op.col_stride == 1)
      add(op.data, t->out_layout);
  return out;
}

namespace {

class Placer {
 public:
  explicit Placer(const graph::Graph& g) : g_(g) {}

  Result<PlacedLayouts> Place(std::vector<LayoutStep> steps) {
    for (LayoutStep& step : steps) {
      FT_RETURN_IF_ERROR(PlaceReads(step));
      out_.steps.push_back(step);
      FT_RETURN_IF_ERROR(PlaceWrites(out_.steps.back()));
    }
    return std::move(out_);
  }

 private:
  ActivationLayout HeldIn(graph::ValueId v) const {
    auto it = held_.find(v);
    return it == held_.end() ? ActivationLayout::kNCHW : it->second;
  }

  int64_t Bytes(graph::ValueId v) const {
    const size_t n = g_.values.size();
    return v < static_cast<graph::ValueId>(n) ? static_cast<int64_t>(g_.type(v).nbytes())
                                              : out_.copy_bytes[static_cast<size_t>(v) - n];
  }

  // [N, C, spatial...] as N, C, H (all but the last spatial extent), W.
  Result<kernels::ActivationDims> DimsOf(graph::ValueId v) const {
    const graph::ValueId original = Original(v);
    const graph::TensorType& type = g_.type(original);
    if (type.dims.size() < 3 || type.dtype != graph::DataType::kFloat32)
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("invalid plan: '{}' {} is not an f32 activation [N, C, ...] that a "
                               "layout applies to",
                               g_.value(original).name, graph::DimsToString(type.dims)));
    kernels::ActivationDims d{type.dims[0], type.dims[1], 1, type.dims.back()};
    for (size_t i = 2; i + 1 < type.dims.size(); ++i) d.height *= type.dims[i];
    return d;
  }

  graph::ValueId Original(graph::ValueId v) const {
    auto it = original_.find(v);
    return it == original_.end() ? v : it->second;
  }

  graph::ValueId NewCopy(graph::ValueId of) {
    const auto id = static_cast<graph::ValueId>(g_.values.size() + out_.copy_bytes.size());
    out_.copy_bytes.push_back(Bytes(of));
    original_[id] = Original(of);
    return id;
  }

  Result<LayoutTransformStep> Transform(graph::ValueId from, graph::ValueId to,
                                        ActivationLayout from_layout, ActivationLayout to_layout) {
    FT_ASSIGN_OR_RETURN(kernels::ActivationDims dims, DimsOf(from));
    FT_RETURN_IF_ERROR(kernels::LayoutApplies(from_layout, dims.channels));
    FT_RETURN_IF_ERROR(kernels::LayoutApplies(to_layout, dims.channels));
    ++out_.transforms;
    return LayoutTransformStep{from, to, Original(from), dims, from_layout, to_layout};
  }

  // The value holding `v` in `layout`: v itself, or a copy made now.
  Result<graph::ValueId> In(graph::ValueId v, ActivationLayout layout) {
    if (HeldIn(v) == layout) return v;
    if (auto it = copies_.find({v, layout}); it != copies_.end()) return it->second;
    const graph::ValueId copy = NewCopy(v);
    FT_ASSIGN_OR_RETURN(LayoutTransformStep t, Transform(v, copy, HeldIn(v), layout));
    out_.steps.push_back({{}, {}, t, {}});
    copies_[{v, layout}] = copy;
    held_[copy] = layout;
    return copy;
  }

  Status PlaceReads(LayoutStep& step) {
    fusion_space::KernelInstance& k = step.instance;
    const auto wanted = SlotLayouts(k, step.tiling);
    auto want = [&](int slot) {
      for (auto [s, layout] : wanted)
        if (s == slot) return layout;
      return ActivationLayout::kNCHW;
    };
    for (size_t slot = 0; slot < k.slots.size(); ++slot) {
      fusion_space::OperandSlot& s = k.slots[slot];
      if (s.value == graph::kNoValue || Writes(k, s.value)) continue;
      const ActivationLayout layout = want(static_cast<int>(slot));
      if (layout != ActivationLayout::kNCHW) FT_RETURN_IF_ERROR(CheckLaidOut(k, s.value));
      if (HeldIn(s.value) == layout) continue;
      if (layout != ActivationLayout::kNCHW && s.offset != 0)
        return Error(
            ErrorCode::kInvalidArgument,
            fmt::format("invalid plan: {} reads a view of '{}' in {}", k.summary,
                        g_.value(Original(s.value)).name, kernels::ActivationLayoutName(layout)));
      FT_ASSIGN_OR_RETURN(const graph::ValueId copy, In(s.value, layout));
      if (std::find(k.inputs.begin(), k.inputs.end(), copy) == k.inputs.end())
        k.inputs.push_back(copy);
      s.value = copy;
    }
    if (k.kind == fusion_space::KernelTemplate::kReference)
      for (graph::ValueId v : k.inputs) {
        if (v == graph::kNoValue || HeldIn(v) == ActivationLayout::kNCHW) continue;
        FT_ASSIGN_OR_RETURN(const graph::ValueId copy, In(v, ActivationLayout::kNCHW));
        step.renamed.emplace_back(v, copy);
      }
    return Status::Ok();
  }

  // A conv operand read in another layout is its X or an operand of Y's
  // whole shape [N, C, ...]: a broadcast one ([C, H, W]) has no such layout.
  Status CheckLaidOut(const fusion_space::KernelInstance& k, graph::ValueId v) const {
    const kernels::ConvShape& s = k.conv.shape;
    const graph::TensorType& type = g_.type(Original(v));
    const int64_t numel = type.numel();
    const bool x = numel == s.batch * s.in_channels * s.in_h * s.in_w;
    const bool y = numel == s.batch * s.out_channels * s.out_h * s.out_w;
    if (type.dims.size() >= 3 && type.dims[0] == s.batch && (x || y) &&
        (type.dims[1] == s.in_channels || type.dims[1] == s.out_channels))
      return Status::Ok();
    return Error(
        ErrorCode::kInvalidArgument,
        fmt::format("invalid plan: {} reads '{}' {} in a layout, which only an "
                    "activation of its input's or output's shape has",
                    k.summary, g_.value(Original(v)).name, graph::DimsToString(type.dims)));
  }

  static bool Writes(const fusion_space::KernelInstance& k, graph::ValueId v) {
    return std::find(k.outputs.begin(), k.outputs.end(), v) != k.outputs.end();
  }

  bool IsGraphOutput(graph::ValueId v) const {
    return std::find(g_.outputs.begin(), g_.outputs.end(), v) != g_.outputs.end();
  }

  // The index of out_.steps.back() is the writer: a graph output written in
  // another layout goes to a copy, transformed into the output after it.
  Status PlaceWrites(LayoutStep& step) {
    fusion_space::KernelInstance& k = step.instance;
    std::vector<LayoutStep> after;
    for (auto [slot, layout] : SlotLayouts(k, step.tiling)) {
      fusion_space::OperandSlot& s = k.slots[static_cast<size_t>(slot)];
      if (!Writes(k, s.value)) continue;
      if (auto dims = DimsOf(s.value); !dims.ok()) return dims.error();
      if (!IsGraphOutput(s.value)) {
        held_[s.value] = layout;
        continue;
      }
      const graph::ValueId output = s.value, copy = NewCopy(output);
      std::replace(k.outputs.begin(), k.outputs.end(), output, copy);
      s.value = copy;
      held_[copy] = layout;
      copies_[{output, layout}] = copy;
      FT_ASSIGN_OR_RETURN(LayoutTransformStep t,
                          Transform(copy, output, layout, ActivationLayout::kNCHW));
      after.push_back({{}, {}, t, {}});
    }
    for (LayoutStep& a : after) out_.steps.push_back(std::move(a));
    return Status::Ok();
  }

  const graph::Graph& g_;
  PlacedLayouts out_;
  std::map<graph::ValueId, ActivationLayout> held_;  // values not in NCHW
  std::map<std::pair<graph::ValueId, ActivationLayout>, graph::ValueId> copies_;
  std::map<graph::ValueId, graph::ValueId> original_;  // copy -> graph value
};

}  // namespace

std::string DescribeTransforms(const graph::Graph& graph, const PlacedLayouts& placed) {
  if (placed.transforms == 0) return "no transforms";
  std::string list;
  for (const LayoutStep& s : placed.steps)
    if (s.transform)
      list += fmt::format("{}'{}' {} -> {}", list.empty() ? "" : ", ",
                          graph.value(s.transform->value).name,
                          kernels::ActivationLayoutName(s.transform->from),
                          kernels::ActivationLayoutName(s.transform->to));
  return fmt::format("{} transform{}: {}", placed.transforms, placed.transforms == 1 ? "" : "s",
                     list);
}

Result<PlacedLayouts> PlaceLayouts(const graph::Graph& graph, std::vector<LayoutStep> steps) {
  return Placer(graph).Place(std::move(steps));
}

}  // namespace fusetune::runtime
