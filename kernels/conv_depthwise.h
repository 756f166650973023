// Internal to the convolution templates: the depthwise algorithm's
// per-channel computation, shared by kDepthwise (conv_depthwise.cpp) and the
// fused conv chains (conv_chain.cpp), whose depthwise stage reads a band
// laid out in the local buffer from the expanded channels instead of X.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/conv.h"
#include "kernels/conv_rows.h"

namespace fusetune::kernels::conv_detail {

// The band offsets of every tap (kh-major) for output row 0, column 0.
std::vector<int64_t> DepthwiseTapOffsets(const ConvShape& s, const BandGeometry& g);

// One channel: `rows` output rows of s.out_w columns written to `out`
// (consecutive rows, leading dimension s.out_w), each output the bias plus
// the kernel_h x kernel_w taps of `w` over `band` (BandOf(s, rows) layout).
void DepthwiseChannel(const ConvShape& s, const BandGeometry& g, const float* band,
                      const int64_t* offsets, const float* w, float bias, int64_t rows, float* out);

// kDepthwise on NCHW16c input (conv_depthwise_blocked.cpp): 16 channels a
// vector, whatever the map's width; NCHW16c out, or NCHW out where the
// blocks can be finished into it (FinishableInBlocks) and oc_block is whole
// blocks (else the NCHW form runs, its band copies transposing X's blocks).
bool DepthwiseBlocked(const ConvDesc& d, const ConvTiling& t);
Status BlockedDepthwiseCheck(const ConvDesc& d, const ConvTiling& t);
int64_t BlockedDepthwiseLocalBytes(const ConvDesc& d, const ConvTiling& t);
KernelStats BlockedDepthwiseRunShare(const ConvDesc& d, const ConvTiling& t,
                                     const KernelConfig& config, RunMode mode, int thread);

}  // namespace fusetune::kernels::conv_detail
