// Pooling: max and average pools over a sliding window, and global max and
// average pools over each whole plane, NCHW f32 in and out; 1-D pools as 2-D
// ones of height 1. ONNX's MaxPool, AveragePool, GlobalMaxPool and
// GlobalAveragePool with the window already resolved (auto_pad into pads,
// ceil_mode into out_h and out_w: graph/conv_geometry.h).
//
// A tile is `channel_block` channels of one image by a band of `row_block`
// whole output rows. Windowed pools copy the band's input rows (halo
// included) into the local buffer with the padding materialised, -inf for
// max and 0 for average, in the convolution's phase layout (conv_rows.h), so
// that each tap reads consecutive output columns with one vector load at
// any stride; the pooled rows are written to the local tile and copied out.
// Global pools copy whole planes and reduce each (a plane larger than the
// local buffer has no tiling). Tiles are dealt to threads
// in contiguous, even shares of the (image, channel block, row block) order,
// so runs are deterministic.
//
// Max pooling does not propagate NaN inputs (the reference does): vector max
// instructions return one operand when either is NaN.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

enum class PoolKind { kMax, kAverage, kGlobalMax, kGlobalAverage };
const char* PoolKindName(PoolKind kind);  // "max", "average", "global_max", "global_average"
inline bool IsGlobalPool(PoolKind kind) {
  return kind == PoolKind::kGlobalMax || kind == PoolKind::kGlobalAverage;
}

struct PoolDesc {
  PoolKind kind = PoolKind::kMax;
  int64_t batch = 1, channels = 0, in_h = 1, in_w = 0;
  // Windowed pools only; global pools read batch, channels, in_h and in_w
  // and write one value per plane (out_h = out_w = 1).
  int64_t out_h = 1, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  // The explicit end pads: windows read only the input (and -inf or 0 around
  // it), but count_include_pad counts taps up to in + pad_bottom (pad_right),
  // not the ones ceil_mode adds past them.
  int64_t pad_bottom = 0, pad_right = 0;
  bool count_include_pad =
      false;                     // average: divide by the padded window, else by the taps inside X
  const float* x = nullptr;      // [batch, channels, in_h, in_w], contiguous
  float* y = nullptr;            // [batch, channels, out_h, out_w], contiguous
  std::string ToString() const;  // "max 1x64x112x112 -> 56x56 k3x3 s2 p1 d1"
};

struct PoolTiling {
  int64_t channel_block = 16;  // channels per tile
  int64_t row_block = 8;       // output rows per tile (global pools: unused)
  std::string ToString() const;
  bool operator==(const PoolTiling&) const = default;
};

// Ok when the geometry is consistent (positive sizes, the last window starting
// before the end of the padded input); errors name the field.
Status ValidatePoolShape(const PoolDesc& desc);
// Bytes of local buffer one thread needs for `tiling` on `desc`.
int64_t PoolLocalBytes(const PoolDesc& desc, const PoolTiling& tiling);
// Errors name the offending field ("tiling.channel_block: ...").
Status ValidatePool(const PoolDesc& desc, const PoolTiling& tiling, const KernelConfig& config);
bool PoolTilingFits(const PoolDesc& desc, const PoolTiling& tiling, const KernelConfig& config);

Result<KernelStats> RunPool(const PoolDesc& desc, const PoolTiling& tiling,
                            const KernelConfig& config, RunMode mode = RunMode::kFull);

}  // namespace fusetune::kernels
