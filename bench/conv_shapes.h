// The square layer shapes the convolution benchmarks time (batch 1, "same"
// padding k / 2): shared by bench_conv_direct and bench_conv_chain.
#pragma once

#include <cstdint>

#include "kernels/conv.h"

namespace fusetune::bench {

inline kernels::ConvShape SquareConvShape(int64_t channels, int64_t size, int64_t out_channels,
                                          int64_t k, int64_t stride, int64_t groups) {
  kernels::ConvShape s;
  s.in_channels = channels;
  s.in_h = s.in_w = size;
  s.out_channels = out_channels;
  s.kernel_h = s.kernel_w = k;
  s.stride_h = s.stride_w = stride;
  s.pad_top = s.pad_left = k / 2;
  s.groups = groups;
  s.out_h = s.out_w = (size + 2 * (k / 2) - k) / stride + 1;
  return s;
}

}  // namespace fusetune::bench
