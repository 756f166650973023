#include "fusion_space/layout_choice.h"

#include <algorithm>
#include <map>
#include <set>

namespace fusetune::fusion_space {

namespace {

using kernels::ActivationLayout;

// The values a conv group reads in its tiling's layouts: X (in_layout) and
// the operands of Y's shape (out_layout, runtime/layout_plan.cpp); Y.
struct ConvValues {
  graph::ValueId x = graph::kNoValue, y = graph::kNoValue;
  std::vector<graph::ValueId> residuals;
};

graph::ValueId SlotValue(const KernelInstance& k, const float* p) {
  const int slot = SlotIndex(p);
  return slot < 0 ? graph::kNoValue : k.slots[static_cast<size_t>(slot)].value;
}

ConvValues ValuesOf(const KernelInstance& k) {
  ConvValues v;
  v.x = SlotValue(k, k.conv.x);
  v.y = SlotValue(k, k.conv.y);
  for (const kernels::EpilogueOp& op : k.conv.epilogue)
    if (op.reads_memory() && op.row_stride == k.conv.shape.pixels() && op.col_stride == 1)
      v.residuals.push_back(SlotValue(k, op.data));
  return v;
}

bool IsConv(const KernelInstance& k) { return k.kind == KernelTemplate::kConv; }

// Values some reader needs in NCHW: graph outputs, and whatever a group
// reads other than a conv's X and residuals.
std::set<graph::ValueId> NeededInNchw(const graph::Graph& g,
                                      const std::vector<KernelInstance>& groups) {
  std::set<graph::ValueId> nchw(g.outputs.begin(), g.outputs.end());
  for (const KernelInstance& k : groups) {
    std::set<graph::ValueId> laid_out;
    if (IsConv(k)) {
      const ConvValues v = ValuesOf(k);
      laid_out.insert(v.x);
      laid_out.insert(v.residuals.begin(), v.residuals.end());
    }
    for (graph::ValueId v : k.inputs)
      if (!laid_out.count(v)) nchw.insert(v);
  }
  return nchw;
}

// The values each conv group reads (X and residuals), without kNoValue.
std::set<graph::ValueId> ReadValues(const ConvValues& v) {
  std::set<graph::ValueId> read(v.residuals.begin(), v.residuals.end());
  read.insert(v.x);
  read.erase(graph::kNoValue);
  return read;
}

// The conv groups that read each value, as X or a residual.
std::map<graph::ValueId, std::set<size_t>> ConvReaders(const std::vector<KernelInstance>& groups,
                                                       const std::vector<ConvValues>& values) {
  std::map<graph::ValueId, std::set<size_t>> readers;
  for (size_t j = 0; j < groups.size(); ++j)
    if (IsConv(groups[j]))
      for (graph::ValueId v : ReadValues(values[j])) readers[v].insert(j);
  return readers;
}

// The copies of value `value` that a conv group's tiling `t` causes when the
// value lies in `lies_in`: one per layout it reads the value in (X in
// in_layout, residuals in out_layout) other than that one, since the
// program copies a value once per layout whoever reads it
// (runtime/layout_plan.cpp); `has_nchw_copy`: another reader needs the
// value in NCHW, so an NCHW copy is there anyway.
int CopiesOf(graph::ValueId value, const ConvValues& reads, const kernels::ConvTiling& t,
             ActivationLayout lies_in, bool has_nchw_copy) {
  std::set<ActivationLayout> wanted;
  if (reads.x == value) wanted.insert(t.in_layout);
  for (graph::ValueId r : reads.residuals)
    if (r == value) wanted.insert(t.out_layout);
  int copies = 0;
  for (ActivationLayout layout : wanted)
    if (layout != lies_in && !(layout == ActivationLayout::kNCHW && has_nchw_copy)) ++copies;
  return copies;
}

// A reader's least time over its measured tilings with `value` lying in
// `lies_in`, the copies of it each tiling causes at `copy` seconds each.
// 0 when nothing of the reader was measured.
double ReaderSeconds(const std::vector<std::pair<Tiling, double>>& options, const ConvValues& reads,
                     graph::ValueId value, ActivationLayout lies_in, bool has_nchw_copy,
                     double copy) {
  double best = 0;
  bool found = false;
  for (const auto& [tiling, seconds] : options) {
    const auto* t = std::get_if<kernels::ConvTiling>(&tiling);
    if (t == nullptr) continue;
    const double total = seconds + copy * CopiesOf(value, reads, *t, lies_in, has_nchw_copy);
    if (!found || total < best) best = total;
    found = true;
  }
  return best;
}

}  // namespace

Plan HarmonizeLayouts(FusionSpace& space, Plan plan, const MeasuredTilings& measured,
                      const TransformCost& cost) {
  const graph::Graph& g = space.graph();
  std::vector<KernelInstance> instances;
  for (const PlanGroup& group : plan.groups) instances.push_back(space.Match(group.nodes).instance);
  const std::set<graph::ValueId> nchw = NeededInNchw(g, instances);
  // Each conv group's values and measured tilings, once: the readers' are
  // looked at again for every tiling of their producers.
  std::vector<ConvValues> values(plan.groups.size());
  std::vector<std::vector<std::pair<Tiling, double>>> options(plan.groups.size());
  for (size_t i = 0; i < plan.groups.size(); ++i)
    if (IsConv(instances[i])) {
      values[i] = ValuesOf(instances[i]);
      options[i] = measured(plan.groups[i]);
    }
  const std::map<graph::ValueId, std::set<size_t>> readers = ConvReaders(instances, values);
  std::map<graph::ValueId, ActivationLayout> held;  // values written in another layout
  auto held_in = [&](graph::ValueId v) {
    auto it = held.find(v);
    return it == held.end() ? ActivationLayout::kNCHW : it->second;
  };
  auto bytes = [&](graph::ValueId v) { return static_cast<double>(g.type(v).nbytes()); };
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    if (!IsConv(instances[i])) continue;
    const ConvValues& v = values[i];
    const std::set<graph::ValueId> read = ReadValues(v);
    double best = 0;
    bool found = false;
    const auto read_by = readers.find(v.y);
    for (const auto& [tiling, seconds] : options[i]) {
      const auto* t = std::get_if<kernels::ConvTiling>(&tiling);
      if (t == nullptr) continue;
      double total = seconds;
      for (graph::ValueId value : read)
        total += cost.Of(bytes(value)) *
                 CopiesOf(value, v, *t, held_in(value),
                          held_in(value) != ActivationLayout::kNCHW && nchw.count(value));
      const bool y_copied_to_nchw =
          v.y != graph::kNoValue && t->out_layout != ActivationLayout::kNCHW && nchw.count(v.y);
      if (y_copied_to_nchw) total += cost.Of(bytes(v.y));
      // One step ahead: what each conv group reading Y will take with Y in
      // this layout (a depthwise conv after a 1x1 runs about twice as fast
      // on NCHW16c in MobileNetV2, so the 1x1 writes it when that pays).
      if (read_by != readers.end())
        for (size_t j : read_by->second)
          if (j > i)
            total += ReaderSeconds(options[j], values[j], v.y, t->out_layout, y_copied_to_nchw,
                                   cost.Of(bytes(v.y)));
      if (!found || total < best) {
        best = total;
        found = true;
        plan.groups[i].tiling = tiling;
      }
    }
    if (const auto* t = std::get_if<kernels::ConvTiling>(&plan.groups[i].tiling);
        t != nullptr && v.y != graph::kNoValue && t->out_layout != ActivationLayout::kNCHW)
      held[v.y] = t->out_layout;
  }
  return plan;
}

}  // namespace fusetune::fusion_space
