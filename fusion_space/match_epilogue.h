// Internal to fusion_space/: the epilogue chain after a kernel's main
// result (a GEMM's C, a convolution's Y), built by walking back from the
// value that leaves the group to the result: bias and residual adds and
// multiplies by tensors that broadcast (read through strides), scales by
// constants, LayerNorm, Clip/HardSigmoid/HardSwish, and activations
// recognised by what they compute (FitActivation), not by how the exporter
// spelled them. Shared by the GEMM and convolution matchers.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fusion_space/decision.h"
#include "fusion_space/kernel_instance.h"

namespace fusetune::fusion_space {

// How an epilogue op reads an operand of the result's shape: the result's
// first batch_axes dims are the batch, the next row_axes the rows, the rest
// the columns (a GEMM: rows = M, columns = N; a convolution NCHW: batch N,
// rows C, columns H*W).
struct EpilogueFrame {
  size_t batch_axes = 0;
  size_t row_axes = 1;
};

class EpilogueBuilder {
 public:
  EpilogueBuilder(const graph::Graph& g, const std::vector<char>& inside, graph::ValueId result,
                  EpilogueFrame frame, KernelInstance* k);
  ~EpilogueBuilder();
  // Appends the ops from the result to `end` (a value of the group) to *ops.
  FusionDecision Build(graph::ValueId end, std::vector<kernels::EpilogueOp>* ops);
  // The group's nodes the chains built so far cover.
  const std::set<int32_t>& visited() const;

 private:
  class Walker;
  std::unique_ptr<Walker> walker_;
};

// A per-channel add first in a conv's chain, when the conv has no bias
// (PyTorch exports of a folded BN, some converters), becomes *bias: taken
// out of `ops`. Nothing changes when *bias is set or the first op is another.
void AdoptChannelBias(std::vector<kernels::EpilogueOp>* ops, const float** bias);

// " +bias_add +relu": an epilogue for one-line summaries.
std::string EpilogueSummary(const std::vector<kernels::EpilogueOp>& ops);

}  // namespace fusetune::fusion_space
