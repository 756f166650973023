// The geometry of a Conv or pool node as kernels see it: every 1-D or 2-D
// window held as 2-D (height 1 for 1-D), with auto_pad resolved into explicit
// pads and ceil_mode into the output size. The same resolution shape
// inference uses (ops_conv.cpp), so a matcher and the reference executor
// agree on every window.
#pragma once

#include "common/status.h"
#include "graph/graph.h"

namespace fusetune::graph {

struct ConvGeometry {
  int64_t spatial_rank = 2;  // 1 or 2
  int64_t batch = 1, in_channels = 0, out_channels = 0, groups = 1;
  int64_t in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};

// The geometry of `node` (a Conv) with input dims `x` and weight dims `w`;
// errors as shape inference reports them.
Result<ConvGeometry> ResolveConvGeometry(const Node& node, const Dims& x, const Dims& w);

struct PoolGeometry {
  bool global = false;       // GlobalMaxPool, GlobalAveragePool: one value per plane
  int64_t spatial_rank = 2;  // windowed pools: 1 or 2
  int64_t batch = 1, channels = 0;
  // Global pools: the plane as in_h x in_w (every spatial dim but the last
  // multiplied into in_h), out 1 x 1.
  int64_t in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool count_include_pad = false;  // AveragePool's attribute
};

// The geometry of `node` (MaxPool, AveragePool, GlobalMaxPool or
// GlobalAveragePool) over input dims `x`; errors as shape inference reports them.
Result<PoolGeometry> ResolvePoolGeometry(const Node& node, const Dims& x);

}  // namespace fusetune::graph
