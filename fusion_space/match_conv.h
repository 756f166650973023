// Matching node groups to the convolution template of kernels/ (conv.h):
// one Conv (1-D or 2-D, any groups, strides, pads, dilations) and the chain
// of epilogue nodes after it (match_epilogue.h): a per-channel bias add, a
// residual Add of the output's shape (ResNet's shortcut), ReLU, Clip
// (ReLU6), SiLU, HardSwish, HardSigmoid, scales. The Conv's own bias, or an
// Add of a per-channel constant right after a Conv without one, becomes the
// template's bias. A BatchNormalization after a Conv is folded into its
// weights by graph/'s FoldBatchNorm before matching, so exports with and
// without BN nodes give the same groups. A GlobalAveragePool or
// GlobalMaxPool reading the chain's end (and nothing else reading it) may
// end the group: the kernel then writes only the pooled [N, C, 1, 1]
// (ConvDesc::global_pool) for output planes of up to 1024 positions. A
// MaxPool there (no Indices output, no dilations: ResNet's stem pool) is
// computed on the conv's tiles the same way, writing only the pooled
// planes (ConvDesc::max_pool).
#pragma once

#include <span>

#include "fusion_space/dataflow.h"
#include "fusion_space/kernel_instance.h"
#include "graph/conv_geometry.h"

namespace fusetune::fusion_space {

// A node's resolved geometry as the kernels' shape (shared with the conv-chain matcher).
kernels::ConvShape ConvShapeOf(const graph::ConvGeometry& geometry);
// Conv node `n` as the kernels see it: f32, a geometry shape inference
// accepts; the refusal names the node.
FusionDecision ResolveConvNode(const graph::Graph& graph, int32_t n, kernels::ConvShape* shape);

FusionDecision MatchConvInstance(const graph::Graph& graph, const Dataflow& flow,
                                 std::span<const int32_t> group, KernelInstance* instance);

}  // namespace fusetune::fusion_space
