// Activation layouts: how a 4-D activation [N, C, H, W] lies in memory, and
// the kernel that converts between them.
//
//   kNCHW   ONNX's order: each channel a plane of rows.
//   kNHWC   channels innermost: a position's channels are contiguous.
//   kNCHWc  channel-blocked, [N][C / c][H][W][c] with c = kLayoutChannelBlock
//           (16 floats: one AVX-512 vector), so that a block of channels of
//           one position is one vector load. C must be a multiple of c: a
//           layout never pads a tensor, so every layout of a value has the
//           same bytes and the same buffer serves all of them.
//
// Every layout keeps a channel plane's positions evenly spaced: position
// p = h * W + w of channel c lies at ChannelPlane(c).offset + p * pixel
// stride, which is all a kernel needs to read or write a plane in any of
// them. A graph's values are NCHW (ONNX's contract); a plan may keep the
// activations between two conv groups in another layout, and the program
// places a transform (RunLayoutTransform) wherever a value's reader wants
// a layout its writer did not write.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

enum class ActivationLayout { kNCHW, kNHWC, kNCHWc };
inline constexpr int kNumActivationLayouts = 3;
inline constexpr int64_t kLayoutChannelBlock = 16;

const char* ActivationLayoutName(ActivationLayout layout);  // "nchw", "nhwc", "nchw16c"
std::optional<ActivationLayout> ActivationLayoutFromName(const std::string& name);
// Ok when a tensor of `channels` channels can be held in `layout`.
Status LayoutApplies(ActivationLayout layout, int64_t channels);

struct ActivationDims {
  int64_t batch = 1, channels = 0, height = 1, width = 0;
  int64_t plane() const { return height * width; }
  int64_t elements() const { return batch * channels * plane(); }
};

// Channel c of image n: position p at offset + p * pixel_stride.
struct PlaneView {
  int64_t offset = 0;
  int64_t pixel_stride = 1;
};
PlaneView ChannelPlane(ActivationLayout layout, const ActivationDims& dims, int64_t n, int64_t c);
// Index of element (n, c, h, w).
inline int64_t ElementIndex(ActivationLayout layout, const ActivationDims& dims, int64_t n,
                            int64_t c, int64_t h, int64_t w) {
  const PlaneView v = ChannelPlane(layout, dims, n, c);
  return v.offset + (h * dims.width + w) * v.pixel_stride;
}

// 16 channel rows of n positions (row i at rows + i * ld) to the NCHW16c
// order [n][16] (dst + p * 16 + i), and back (the first `lanes` rows only:
// a conv's last block of fewer than 16 channels): the 16x16 transposes (in
// registers with AVX-512) every copy into or out of NCHW16c is made of.
void RowsToBlocked(const float* rows, int64_t ld, int64_t n, float* dst);
void BlockedToRows(const float* src, int64_t n, float* rows, int64_t ld,
                   int64_t lanes = kLayoutChannelBlock);

// Y = X rearranged from `from` to `to`. Tiles of one image, 16 channels by
// up to 1024 positions, are copied into the local buffer as [channel]
// [position] and copied out in the new order; both copies are counted.
struct LayoutTransformDesc {
  ActivationDims dims;
  ActivationLayout from = ActivationLayout::kNCHW, to = ActivationLayout::kNCHW;
  const float* x = nullptr;
  float* y = nullptr;
  std::string ToString() const;  // "layout nchw -> nchw16c 1x64x56x56"
};
Status ValidateLayoutTransform(const LayoutTransformDesc& desc, const KernelConfig& config);
Result<KernelStats> RunLayoutTransform(const LayoutTransformDesc& desc, const KernelConfig& config,
                                       RunMode mode = RunMode::kFull);

}  // namespace fusetune::kernels
