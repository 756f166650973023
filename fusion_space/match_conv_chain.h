// Matching node groups to the conv-chain template of kernels/ (conv_chain.h):
// convolutions fused with each other on tiles.
//
//   Conv 1x1 (expand) -> [activations] -> Conv depthwise -> [activations]
//     -> Conv 1x1 (project) -> [epilogue chain: residual Add, activations]
//
// (MobileNetV2's inverted residual), or the same without the expand: a
// depthwise conv and the pointwise conv after it. The 1x1 convs have stride
// 1, no padding and one group; the depthwise conv any window, stride, padding
// and dilation. Between two convs only pointwise activations that read no
// operand (ReLU, Clip, SiLU, HardSwish, ...); a BatchNormalization there is
// folded into the conv before it by graph/'s FoldBatchNorm. The
// intermediates must not be read outside the group: one value leaves it, the
// end of the project's epilogue chain, of the project's shape. Whether a
// legal group also fits the local buffer is the tiling space's question.
#pragma once

#include <span>

#include "fusion_space/dataflow.h"
#include "fusion_space/kernel_instance.h"

namespace fusetune::fusion_space {

FusionDecision MatchConvChainInstance(const graph::Graph& graph, const Dataflow& flow,
                                      std::span<const int32_t> group, KernelInstance* instance);

}  // namespace fusetune::fusion_space
