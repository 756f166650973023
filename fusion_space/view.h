// Strided views: how a value produced by a chain of Reshape and Transpose
// nodes inside a group reads its base tensor, as dims and element strides,
// so that a kernel can read (or write) through the chain without copies.
// Attention groups use this for PyTorch's head split and merge
// (view + transpose), which would otherwise be two copies each.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fusion_space/decision.h"
#include "graph/graph.h"

namespace fusetune::fusion_space {

struct StridedView {
  graph::ValueId base = graph::kNoValue;  // the tensor in memory (contiguous, row-major)
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;  // elements
  int64_t offset = 0;            // elements from the base's start (slices)
};

// Strides for `new_dims` over the same elements as (dims, strides), without
// moving data, or nullopt when the reshape would need a copy (NumPy's rule).
std::optional<std::vector<int64_t>> ReshapeStrides(std::span<const int64_t> dims,
                                                   std::span<const int64_t> strides,
                                                   std::span<const int64_t> new_dims);

// The view through which `value` reads memory: walks back through producers
// that are Reshape/Transpose nodes in `in_group` to a base value outside it
// (or a graph input/constant). With `allow_slices`, Slice nodes with
// constant bounds and Split nodes in the group are views too (an offset
// and strides).
// Forbids when a reshape of a transposed or sliced view would need a copy.
FusionDecision ResolveReadView(const graph::Graph& graph, std::span<const char> in_group,
                               graph::ValueId value, StridedView* view, bool allow_slices = false);

// The other direction, for outputs: `value` is written and only read by a
// chain of Reshape/Transpose nodes in the group ending at a value that leaves
// the group. Returns, in *view, where the elements of `value` land in the
// final value's contiguous buffer (view->base is the final value).
FusionDecision ResolveWriteView(const graph::Graph& graph, std::span<const char> in_group,
                                const graph::ValueUses& uses, graph::ValueId value,
                                StridedView* view);

bool IsViewOp(const graph::Node& node);  // Reshape or Transpose

// Strides through which a contiguous tensor of `dims` is read when
// broadcast (NumPy rules, right-aligned) to `space`; nullopt when it does not
// broadcast. Broadcast dimensions get stride 0.
std::optional<std::vector<int64_t>> BroadcastStrides(const graph::Dims& dims,
                                                     const graph::Dims& space);

}  // namespace fusetune::fusion_space
