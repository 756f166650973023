// Analytical figures of a tiling, computed from the schedule the kernel runs
// (the same blocks, slices and tiles per thread) without touching data: the
// global traffic the kernel would count, the work per thread and how much of
// each vector lane and micro-tile is padding. cost_model/ builds its features
// from these; tests/kernels/estimate_test.cpp checks the traffic against what
// the kernels count.
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/conv_chain.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/pool.h"
#include "kernels/rowwise.h"

namespace fusetune::kernels {

struct TilingEstimate {
  double bytes_in = 0, bytes_out = 0;  // copies global -> local and back, as KernelStats counts
  int64_t tiles = 0;                   // output tiles (GEMM: output blocks)
  int64_t max_thread_tiles = 0;        // the busiest thread's tiles
  double max_thread_work = 0;          // the busiest thread's share of the work, in [0, 1]
  int64_t local_bytes = 0;             // local buffer per thread
  // Useful lanes / lanes computed: micro-tile and vector padding, and for the
  // GEMM the fixed cost of each micro-kernel call, counted as extra k-steps.
  double lane_utilisation = 1;
  int64_t steps = 0;  // inner steps per thread, max (GEMM kc slices, attention key blocks)
};

// Fills tiles per thread, balance and steps for `tiles` contiguous tiles split
// evenly over `threads`, as the rowwise and elementwise kernels split them.
void SetEvenSplit(TilingEstimate* e, int64_t tiles, int threads);

TilingEstimate EstimateGemm(const GemmDesc& desc, const GemmTiling& tiling, int threads);
TilingEstimate EstimateRowwise(const RowwiseDesc& desc, const RowwiseTiling& tiling, int threads);
TilingEstimate EstimateElementwise(const ElementwiseDesc& desc, const ElementwiseTiling& tiling,
                                   int threads);
TilingEstimate EstimateConv(const ConvDesc& desc, const ConvTiling& tiling, int threads);
TilingEstimate EstimatePool(const PoolDesc& desc, const PoolTiling& tiling, int threads);
TilingEstimate EstimateConvChain(const ConvChainDesc& desc, const ConvChainTiling& tiling,
                                 int threads);
TilingEstimate EstimateAttention(const AttentionDesc& desc, const AttentionTiling& tiling,
                                 int threads);

}  // namespace fusetune::kernels
