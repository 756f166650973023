// Internal to the convolution template: the input band of a tile (the input
// rows a band of output rows reads, halo included) copied from X into the
// local buffer with its zero padding materialised, in phase layout: each
// padded row is stored as stride_w phases, phase p holding padded columns
// p, p + stride_w, p + 2 stride_w, ... Output column ow at tap kw then reads
// phase (kw * dilation_w) % stride_w at index ow + (kw * dilation_w) /
// stride_w, so consecutive output columns read consecutive floats at every
// stride (vector loads for depthwise, broadcasts at unit offsets for direct).
// Used by conv_depthwise.cpp, conv_direct.cpp, conv_chain.cpp and pool.cpp.
#pragma once

#include <cstdint>

#include "kernels/conv.h"

namespace fusetune::kernels::conv_detail {

struct BandGeometry {
  int64_t rows = 0;  // input rows held: (out_rows - 1) * stride_h + (kernel_h - 1) * dilation_h + 1
  int64_t width = 0;       // padded columns spanned by a whole output row
  int64_t phase = 0;       // floats per phase: ceil(width / stride_w)
  int64_t row_floats = 0;  // stride_w * phase
  int64_t floats() const { return rows * row_floats; }
};

BandGeometry BandOf(const ConvShape& s, int64_t out_rows);

// Offset in a band of tap (kh, kw) for output (row 0, column 0).
inline int64_t TapOffset(const ConvShape& s, const BandGeometry& g, int64_t kh, int64_t kw) {
  const int64_t col = kw * s.dilation_w;
  return kh * s.dilation_h * g.row_floats + (col % s.stride_w) * g.phase + col / s.stride_w;
}

// Copies the band of one channel plane (in_h x in_w floats) whose first row
// is input row ih0 (negative in the top padding) into dst, `pad_value`
// wherever the band lies outside X (0 for convolutions; max pooling pads with
// -inf). Returns the floats read from X (those inside the input), what
// KernelStats counts.
int64_t CopyBand(const ConvShape& s, const float* plane, int64_t ih0, const BandGeometry& g,
                 float* dst, float pad_value = 0.0f);
// CopyBand from channel plane `view` of X in any layout (kernels/layout.h):
// rows whose positions lie apart are gathered first.
int64_t CopyBand(const ConvShape& s, const float* x, const PlaneView& view, int64_t ih0,
                 const BandGeometry& g, float* dst, float pad_value = 0.0f);
// The band of a plane of ones: 1 where the band lies inside X, 0 in the
// padding (the conv chain zeroes its expanded band's padding with it).
void InsideBand(const ConvShape& s, int64_t ih0, const BandGeometry& g, float* dst);
// CopyBand for `count` consecutive channels from c0 of image `image`, X in
// `layout`, channel i's band at dst + i * dst_stride. Whole NCHW16c blocks
// are read a row of 16 channels at a time (one transpose), not a channel
// at a time. Returns the floats read from X.
int64_t CopyBands(const ConvShape& s, const float* x, ActivationLayout layout, int64_t image,
                  int64_t c0, int64_t count, int64_t ih0, const BandGeometry& g, float* dst,
                  int64_t dst_stride, float pad_value = 0.0f);
// Input row ih of channel plane `view` as contiguous floats: in X itself
// when the layout is NCHW, else gathered into `scratch` (in_w floats).
const float* PlaneRow(const ConvShape& s, const float* x, const PlaneView& view, int64_t ih,
                      float* scratch);
// Channel c of image `image` of X, in the tiling's input layout.
inline PlaneView InputPlane(const ConvDesc& d, const ConvTiling& t, int64_t image, int64_t c) {
  const ConvShape& s = d.shape;
  return ChannelPlane(t.in_layout, {s.batch, s.in_channels, s.in_h, s.in_w}, image, c);
}

// What CopyBand returns, without copying (the estimates).
int64_t BandReadFloats(const ConvShape& s, int64_t ih0, const BandGeometry& g);

// The input row of the first output row of a band starting at output row oh0.
inline int64_t BandFirstRow(const ConvShape& s, int64_t oh0) {
  return oh0 * s.stride_h - s.pad_top;
}

}  // namespace fusetune::kernels::conv_detail
