// Where a program's activations change layout. A conv step's tiling names
// the layout it reads X in and writes Y in (kernels/layout.h); every other
// step, the graph's outputs and a conv's other operands are NCHW. Walking
// the steps in order, each value is held in the layout its writer wrote;
// a reader that wants another gets a transformed copy, made by a transform
// step placed before it (once per value and layout: later readers share
// the copy), and a graph output written in another layout is transformed
// into NCHW after its writer. Between steps that agree no transform is
// placed, so a chain of NCHW16c convs pays for the layout once at each end.
//
// Copies are values of their own, numbered after the graph's, so that the
// buffer planner places them in the arena like any other.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "fusion_space/space.h"
#include "kernels/layout.h"

namespace fusetune::runtime {

struct LayoutTransformStep {
  graph::ValueId from_value = graph::kNoValue, to_value = graph::kNoValue;
  graph::ValueId value = graph::kNoValue;  // the graph's value both hold
  kernels::ActivationDims dims;
  kernels::ActivationLayout from = kernels::ActivationLayout::kNCHW;
  kernels::ActivationLayout to = kernels::ActivationLayout::kNCHW;
};

struct LayoutStep {
  fusion_space::KernelInstance instance;  // its slots rebound to the copies it reads
  fusion_space::Tiling tiling;
  std::optional<LayoutTransformStep> transform;  // set: a transform step
  // Reads of a reference step (which names graph values, not slots) moved
  // to copies: (graph value, copy).
  std::vector<std::pair<graph::ValueId, graph::ValueId>> renamed;
};

struct PlacedLayouts {
  std::vector<LayoutStep> steps;
  // Bytes of copy i, whose value id is graph.values.size() + i.
  std::vector<int64_t> copy_bytes;
  int64_t transforms = 0;
};

// "3 transforms: 'x' nchw -> nchw16c, ..." or "no transforms", for explanations.
std::string DescribeTransforms(const graph::Graph& graph, const PlacedLayouts& placed);

// Errors (an invalid plan): a layout for a value that is not an activation
// [N, C, ...] or not of the conv's input or output shape, a view into a value
// read in another layout.
Result<PlacedLayouts> PlaceLayouts(const graph::Graph& graph, std::vector<LayoutStep> steps);

// The layouts a template step reads and writes its slots in: (slot, layout)
// for every slot not in NCHW.
std::vector<std::pair<int, kernels::ActivationLayout>> SlotLayouts(
    const fusion_space::KernelInstance& instance, const fusion_space::Tiling& tiling);

}  // namespace fusetune::runtime
