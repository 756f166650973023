// Matching a node group to the tile-program templates of kernels/: the
// row-reduction template (elementwise ops and last-axis reductions: softmax,
// LayerNorm, RMSNorm and their decomposed exports) and the elementwise
// template (no reductions). The result is the program, which graph values
// feed its inputs and which carry its outputs, or the reason it does not match.
//
// Elementwise groups may also hold data movement: Reshape, Transpose and
// Slice nodes are read as strided views of their input (no copy), and one
// Concat splits the group into pieces, one program per Concat input, each
// writing its part of the outputs (RoPE's rotate-half: two slices, a Neg and
// a Concat around the multiply-adds).
#pragma once

#include <span>
#include <vector>

#include "fusion_space/dataflow.h"
#include "fusion_space/kernel_instance.h"
#include "fusion_space/view.h"
#include "graph/graph.h"
#include "kernels/tile_program.h"

namespace fusetune::fusion_space {

enum class TileTemplate { kElementwise, kRowwise };
const char* TileTemplateName(TileTemplate t);

// What one program input reads: a value outside the group through a strided
// view (a plain value is a view of itself). Operands read upstream of the
// Concat are indexed in their piece's coordinates, all others in the group's.
struct TileOperand {
  StridedView view;
  bool piece_local = false;
};

// One program: the whole group, or, with a Concat, what computes the
// Concat's input `index` plus everything downstream of the Concat.
struct TilePiece {
  kernels::TileProgram program;
  std::vector<TileOperand> operands;  // program input i reads operands[i]
};

struct TileGroupMatch {
  FusionDecision decision = FusionDecision::Forbid("not matched");
  TileTemplate kind = TileTemplate::kElementwise;
  std::vector<TilePiece> pieces;        // one, or one per input of the Concat
  std::vector<graph::ValueId> inputs;   // the distinct values the operands read
  std::vector<graph::ValueId> outputs;  // program output o of every piece is graph value outputs[o]
  int64_t row_length = 0;               // kRowwise: the reduced (last) dimension
  int32_t concat = -1;                  // the Concat node, or -1
};

// `group`: node indices of a topologically sorted graph with inferred shapes.
TileGroupMatch MatchTileGroup(const graph::Graph& graph, const Dataflow& flow,
                              std::span<const int32_t> group);

// The same match as a kernel instance: operand strides follow NumPy
// broadcasting of each input against the group's iteration space; outputs
// must span that space (or, for the row template, one value per row).
FusionDecision MatchTileInstance(const graph::Graph& graph, const Dataflow& flow,
                                 std::span<const int32_t> group, KernelInstance* instance);

}  // namespace fusetune::fusion_space
