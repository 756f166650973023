// Matching a single pool node to the pooling template of kernels/ (pool.h):
// MaxPool (without its Indices output), AveragePool, GlobalMaxPool and
// GlobalAveragePool on f32, 1-D or 2-D windows (global pools: any rank, the
// plane flattened). Pools are not fused with other nodes here: a group of
// more than one node never reaches this matcher (IsFusibleOp leaves pools
// out); a global pool or a MaxPool after a Conv's chain joins the conv
// kernel instead (match_conv.h).
#pragma once

#include <span>

#include "fusion_space/dataflow.h"
#include "fusion_space/kernel_instance.h"

namespace fusetune::fusion_space {

bool IsPoolOp(const graph::Node& node);
// GlobalAveragePool or GlobalMaxPool.
bool IsGlobalPoolOp(const graph::Node& node);
// The pools a conv kernel can end with (match_conv.h): the global pools and
// MaxPool (its window computed on the conv's tiles).
bool IsConvEndPoolOp(const graph::Node& node);
FusionDecision MatchPoolInstance(const graph::Graph& graph, const Dataflow& flow,
                                 std::span<const int32_t> group, KernelInstance* instance);

}  // namespace fusetune::fusion_space
