// Convolution with fusion: Y = epilogue(conv(X, W) + bias), NCHW in and out
// unless the tiling says otherwise (ConvTiling::in_layout, out_layout: NHWC
// or NCHW16c), 1-D convolutions as 2-D ones of height 1, grouped and
// depthwise included.
// One template, several algorithms (the tiling chooses, the tuner searches):
//
//   kIm2colGemm  implicit GEMM: per group, Y[oc, pixel] = W[oc, (ic,kh,kw)] x
//                im2col(X)[(ic,kh,kw), pixel]. A block of the im2col matrix
//                is gathered straight from X into the GEMM micro-kernels' B
//                panel layout in the local buffer (never materialised in
//                global memory); W's panels can be pre-packed. A 1x1 stride-1
//                convolution is a plain GEMM on X. Any shape.
//   kDirect      direct convolution on a channel-blocked tile: the input tile
//                is copied into the local buffer as [ic][ih][iw] and the
//                output tile is computed 16 output channels (one vector) by a
//                register block of output columns at a time; weights are
//                pre-packed [oc/16][ic][kh][kw][16]. groups == 1. In bf16
//                the tile is rounded to pairs of input channels and the
//                weights packed [oc/16][ic/2][kh][kw][16][2].
//   kWinograd2   Winograd F(2x2,3x3) and
//   kWinograd4   F(4x4,3x3): 3x3, stride 1, dilation 1, groups == 1. Input
//                tiles are transformed in the local buffer, multiplied by
//                the pre-transformed weights (packed at compile time) as
//                (alpha x alpha) batched GEMMs (tiles x input channels times
//                input channels x output channels), and transformed back. Less
//                exact than the direct forms: tolerances in conv_winograd.h.
//                In bf16 (F(2x2) only) the batched GEMMs take V and U
//                rounded to bf16 k-pairs (transforms and sums in f32).
//                (im2col, direct and Winograd F(2x2) compute in bf16 too:
//                ConvTiling::precision.)
//   kDepthwise   groups == in_channels == out_channels: each channel with its
//                own kh x kw filter, vectorised over output columns; on
//                NCHW16c input (out NCHW16c or NCHW), over 16 channels
//                instead, which fills every lane whatever the map's width
//                (7x7 maps: 16 of 16 lanes rather than 7).
//
// Every algorithm computes one output tile at a time: oc_block output
// channels by pixel_block output positions (flattened oh * out_w + ow of one
// image), kept in the local buffer as rows = channels, columns = positions,
// where the bias, the epilogue ops (activations, a residual added) run before
// the tile is copied out. The epilogue sees the tile as the GEMM's: row =
// output channel, column = output position, batch = image; a residual of
// Y's shape is EpilogueOp::Residual(r, out_h * out_w, out_channels * out_h *
// out_w). Output tiles are dealt to threads round-robin in (image, channel
// block, position block) order, so runs are deterministic.
//
// A global pool after the epilogue (ConvDesc::global_pool: a CNN's
// Conv -> ... -> GlobalAveragePool or GlobalMaxPool) makes Y the pooled
// [batch, out_channels] (an ONNX [N, C, 1, 1]): each tile's rows are reduced
// over their positions in the local buffer and only the pooled values are
// written, so the conv's full output never reaches global memory. A pooled
// conv's tiling must hold all positions of an image in one tile (one
// position block; ValidateConv says so otherwise): each pooled value is
// then one row's reduction, written once by the thread that owns the tile,
// with no partial sums to combine across threads (no scratch array, no
// second pass, no order of additions that depends on the thread split), so
// runs stay deterministic. The pools that end CNNs follow small maps (7x7
// in ResNet and MobileNet), where a tile holds whole images anyway and the
// channel blocks give the threads their work.
//
// A windowed max pool after the epilogue (ConvDesc::max_pool: ResNet's stem,
// Conv -> ReLU -> MaxPool 3x3/2) makes Y the pooled [batch, out_channels,
// pool.out_h, pool.out_w]. A tile is then the conv rows one band of pooled
// rows reads: the tiling's pixel_block still sizes a tile in conv positions
// (whole conv rows, every algorithm), and each tile computes the pooled rows
// whose windows fit in it. Neighbouring bands share their halo rows
// (kernel_h - stride_h of them), which both compute: the conv's output
// never reaches global memory, at the price of that recomputation. A band
// must hold at least kernel_h conv rows (ValidateConv says so otherwise).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/epilogue.h"
#include "kernels/layout.h"
#include "kernels/precision.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

// The optional reduction of each (image, channel) plane after the epilogue.
enum class ConvGlobalPool { kNone, kAverage, kMax };
const char* ConvGlobalPoolName(ConvGlobalPool pool);  // "none", "global_average", "global_max"

enum class ConvAlgorithm { kIm2colGemm, kDirect, kWinograd2, kWinograd4, kDepthwise };
inline constexpr int kNumConvAlgorithms = 5;
const char* ConvAlgorithmName(ConvAlgorithm algorithm);  // "im2col_gemm", "direct", ...
std::optional<ConvAlgorithm> ConvAlgorithmFromName(const std::string& name);

struct ConvShape {
  int64_t batch = 1;
  int64_t in_channels = 0, in_h = 1, in_w = 0;
  int64_t out_channels = 0, out_h = 1, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0;  // bottom and right padding follow from out_h, out_w
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;

  int64_t in_per_group() const { return in_channels / groups; }
  int64_t out_per_group() const { return out_channels / groups; }
  int64_t pixels() const { return out_h * out_w; }  // output positions per image
  // Multiply-adds of the direct definition (what "effective rate" divides).
  double Macs() const;
  std::string ToString() const;  // "1x64x56x56 -> 64 k3x3 s1 p1 d1 g1"
  bool operator==(const ConvShape&) const = default;
};

// The window of a max pool computed on a conv's tiles (dilation 1; ONNX's
// ceil_mode and auto_pad already resolved into out_h, out_w and the pads, as
// graph/conv_geometry.h does). kernel_h == 0: no pool.
struct ConvMaxPool {
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t out_h = 0, out_w = 0;
  bool active() const { return kernel_h > 0; }
  std::string ToString() const;  // "max_pool k3x3 s2 p1 -> 56x56"
  bool operator==(const ConvMaxPool&) const = default;
};

struct ConvDesc {
  ConvShape shape;
  const float* x = nullptr;     // [batch, in_channels, in_h, in_w], contiguous
  const float* w = nullptr;     // [out_channels, in_channels / groups, kernel_h, kernel_w]
  const float* bias = nullptr;  // [out_channels], optional
  // Optional: W pre-packed by PrePackConvWeights for the tiling being run
  // (constant weights, packed once when a program is prepared; Winograd's
  // transformed weights). `w` stays the source of truth.
  const float* w_packed = nullptr;
  // [batch, out_channels, out_h, out_w], contiguous; [batch, out_channels]
  // with a global pool, [batch, out_channels, pool.out_h, pool.out_w] with a
  // max pool.
  float* y = nullptr;
  // Epilogue operands (residuals) have the unpooled output's shape.
  std::vector<EpilogueOp> epilogue;
  ConvGlobalPool global_pool = ConvGlobalPool::kNone;
  ConvMaxPool max_pool;  // at most one of global_pool and max_pool
};

struct ConvTiling {
  ConvAlgorithm algorithm = ConvAlgorithm::kIm2colGemm;
  int64_t oc_block = 64;      // output channels per tile (per group for im2col)
  int64_t pixel_block = 256;  // output positions per tile (Winograd: rounded to whole tiles)
  int64_t k_block = 256;      // reduction slice: im2col rows (ic*kh*kw), else input channels
  int mr = 8, nr = 32;        // the GEMM micro-tile (im2col and Winograd)
  // How X and Y lie in memory (kernels/layout.h), and with them the
  // residuals the epilogue reads (Y's layout). Every algorithm but im2col
  // reads any input layout (im2col: NCHW); every one writes any output
  // layout, but a global pool's [N, C] output is NCHW.
  ActivationLayout in_layout = ActivationLayout::kNCHW;
  ActivationLayout out_layout = ActivationLayout::kNCHW;
  // bf16 (kernels/precision.h): im2col, direct and Winograd F(2x2)
  // (ConvAlgorithmHasBf16). W pre-packed in bf16 (Winograd: its transform
  // U); the input rounded to bf16 pairs in the local buffer (im2col: each
  // B block, as the bf16 micro-kernels' k-pairs; direct: each band, as pairs
  // of input channels; Winograd: its transform V, as k-pairs); products on
  // vdpbf16ps with f32 sums; bias, epilogue and pools in f32. im2col and
  // direct within the bf16 GEMM's bound (docs/PRECISION.md); Winograd
  // within conv_winograd.h's bf16 tolerance (its transforms amplify the
  // rounding of V and U).
  Precision precision = Precision::kF32;
  std::string ToString() const;
  bool operator==(const ConvTiling&) const = default;
};

// Ok when `algorithm` can compute `shape` at all (Winograd: 3x3 stride 1,
// ...); the error says why not.
Status ConvAlgorithmApplies(const ConvShape& shape, ConvAlgorithm algorithm);
// Whether the algorithm has a bf16 form (ConvTiling::precision): im2col,
// direct and Winograd F(2x2,3x3). F(4x4,3x3)'s transforms amplify bf16's
// rounding of V and U to 4-7% of the output's scale (conv_winograd.h):
// past any useful error budget, so it stays f32. Depthwise's per-channel
// taps stay f32 too (it has no dot products to pair and its traffic is
// activations, not weights).
bool ConvAlgorithmHasBf16(ConvAlgorithm algorithm);
// Which tiling fields an algorithm reads: the others are ignored, and the
// tiling space keeps one value of them so that no two points are the same.
bool ConvAlgorithmUsesMicroTile(ConvAlgorithm algorithm);  // im2col, Winograd
// The extent k_block slices (im2col: in_per_group * kh * kw; direct and
// Winograd: in_per_group), 0 when the algorithm has no reduction slices.
int64_t ConvReductionExtent(const ConvShape& shape, ConvAlgorithm algorithm);

// Multiplications per multiply-add of the direct definition: 1, but for
// Winograd F(m x m, 3x3) (m + 2)^2 / (9 m^2): 16/36 for F(2x2), 36/144 for
// F(4x4); their transforms are extra work the cost model learns.
double ConvMultiplicationRatio(ConvAlgorithm algorithm);

// Ok when the shape is consistent (output size from the window arithmetic,
// channels divisible by groups, ...); errors name the field.
Status ValidateConvShape(const ConvShape& shape);

// Bytes of local buffer one thread needs for `tiling` on `desc`.
int64_t ConvLocalBytes(const ConvDesc& desc, const ConvTiling& tiling);
// Errors name the offending field ("tiling.oc_block: ...").
Status ValidateConv(const ConvDesc& desc, const ConvTiling& tiling, const KernelConfig& config);
bool ConvTilingFits(const ConvDesc& desc, const ConvTiling& tiling, const KernelConfig& config);

// Pre-packed weights (ConvDesc::w_packed) for `tiling`: 0 when the algorithm
// reads W as it is.
int64_t PrePackedConvWeightFloats(const ConvDesc& desc, const ConvTiling& tiling);
void PrePackConvWeights(const ConvDesc& desc, const ConvTiling& tiling, float* dst);

Result<KernelStats> RunConv(const ConvDesc& desc, const ConvTiling& tiling,
                            const KernelConfig& config, RunMode mode = RunMode::kFull);

}  // namespace fusetune::kernels
