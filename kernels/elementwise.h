// Elementwise fusion: a tile program without reductions over one iteration
// space, every operand read through strides (NumPy broadcasting is a stride
// of 0; a transpose or slice of a tensor is a view with other strides). The
// space is cut into tiles of `tile` consecutive elements; per tile a thread
// gathers each operand's elements into the local buffer, evaluates the
// program there and copies the results out, contiguously or through the
// output's strides.
//
// A descriptor may carry further `pieces`: boxes of the same output computed
// by programs of their own (a Concat's inputs, each written into its part of
// the result). All pieces' tiles are spread over the threads of one launch.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/tile_program.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

struct StridedOperand {
  const float* data = nullptr;
  std::vector<int64_t> strides;  // per dimension of the iteration space; 0 broadcasts
};

struct ElementwiseDesc {
  std::vector<int64_t> dims;  // the iteration space (the output shape)
  std::vector<StridedOperand> inputs;
  std::vector<float*> outputs;  // one per program output
  // Per output, its element strides over `dims`; empty: every output is
  // contiguous over `dims`.
  std::vector<std::vector<int64_t>> output_strides;
  TileProgram program;
  // Further pieces of the same launch, each a descriptor without pieces.
  std::vector<ElementwiseDesc> pieces;
};

struct ElementwiseTiling {
  int64_t tile = 4096;  // output elements per tile
  std::string ToString() const;
  bool operator==(const ElementwiseTiling&) const = default;
};

// The descriptor itself, then its pieces.
std::vector<const ElementwiseDesc*> ElementwisePieces(const ElementwiseDesc& desc);

int64_t ElementwiseLocalBytes(const ElementwiseDesc& desc, const ElementwiseTiling& tiling);
Status ValidateElementwise(const ElementwiseDesc& desc, const ElementwiseTiling& tiling,
                           const KernelConfig& config);
Result<KernelStats> RunElementwise(const ElementwiseDesc& desc, const ElementwiseTiling& tiling,
                                   const KernelConfig& config, RunMode mode = RunMode::kFull);

}  // namespace fusetune::kernels
