// Elementwise fusion: a tile program without reductions over one iteration
// space, every operand read through broadcast strides (NumPy broadcasting is a
// stride of 0). The space is cut into tiles of `tile` consecutive output
// elements; per tile a thread gathers each operand's elements into the local
// buffer, evaluates the program there and copies the results out.
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
  std::vector<float*> outputs;  // contiguous, one per program output
  TileProgram program;
};

struct ElementwiseTiling {
  int64_t tile = 4096;  // output elements per tile
  std::string ToString() const;
  bool operator==(const ElementwiseTiling&) const = default;
};

int64_t ElementwiseLocalBytes(const ElementwiseDesc& desc, const ElementwiseTiling& tiling);
Status ValidateElementwise(const ElementwiseDesc& desc, const ElementwiseTiling& tiling,
                           const KernelConfig& config);
Result<KernelStats> RunElementwise(const ElementwiseDesc& desc, const ElementwiseTiling& tiling,
                                   const KernelConfig& config, RunMode mode = RunMode::kFull);

}  // namespace fusetune::kernels
