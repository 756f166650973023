// Matching a node group to the tile-program templates of kernels/: the
// row-reduction template (elementwise ops and last-axis reductions: softmax,
// LayerNorm, RMSNorm and their decomposed exports) and the elementwise
// template (no reductions). The result is the program, which graph values
// feed its inputs and which carry its outputs, or the reason it does not match.
#pragma once

#include <span>
#include <vector>

#include "fusion_space/dataflow.h"
#include "fusion_space/kernel_instance.h"
#include "graph/graph.h"
#include "kernels/tile_program.h"

namespace fusetune {

enum class TileTemplate { kElementwise, kRowwise };
const char* TileTemplateName(TileTemplate t);

struct TileGroupMatch {
  FusionDecision decision = FusionDecision::Forbid("not matched");
  TileTemplate kind = TileTemplate::kElementwise;
  kernels::TileProgram program;
  std::vector<ValueId> inputs;   // program input i reads graph value inputs[i]
  std::vector<ValueId> outputs;  // program output o is graph value outputs[o]
  int64_t row_length = 0;        // kRowwise: the reduced (last) dimension
};

// `group`: node indices of a topologically sorted graph with inferred shapes.
TileGroupMatch MatchTileGroup(const Graph& graph, const Dataflow& flow,
                              std::span<const int32_t> group);

// The same match as a kernel instance: operand strides follow NumPy
// broadcasting of each input against the group's iteration space; outputs
// must span that space (or, for the row template, one value per row).
FusionDecision MatchTileInstance(const Graph& graph, const Dataflow& flow,
                                 std::span<const int32_t> group, KernelInstance* instance);

}  // namespace fusetune
