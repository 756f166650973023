// Convolutions fused with each other on tiles: MobileNetV2's inverted
// residual
//
//   Y = epilogue(project(dw_act(depthwise(expand_act(expand(X))))))
//
// (a 1x1 expand from C to E channels, a kh x kw depthwise convolution of the
// E channels with its stride and padding, a 1x1 project from E to C'
// channels, each with its bias; the activations are ReLU6 in MobileNetV2,
// the epilogue its residual Add), and the same without the expand: a
// depthwise convolution fused with the pointwise one after it. NCHW in and
// out, f32; the expand and project products in f32 or bf16
// (ConvChainTiling::precision, conv_chain_products.h).
//
// A tile is a band of `rows` output rows of one image, all C' output
// channels. For each block of e_block expanded channels the tile:
//   1. expands its input band (the input rows the band's depthwise windows
//      read, halo included) with the GEMM micro-kernels: X's band is packed
//      once per tile as their B panels, laid out as the depthwise band
//      (conv_rows.h: zero padding materialised, stride phases), so that
//      each expanded channel comes out as its depthwise band; the
//      pre-packed expand weights are their A rows. The bias and expand_act
//      follow (one pass when the activation is a clamp: ReLU, ReLU6), the
//      padding zeroed again;
//   2. runs the depthwise algorithm's channel computation (conv_depthwise.h)
//      on each expanded channel from its bias, then dw_act (a clamp: as its
//      rows are packed for step 3);
//   3. multiplies the block into the tile's C' x pixels accumulator with the
//      project weights' slice (micro-kernels again, k = the block).
// The accumulator then gets the project's bias and the epilogue and is
// copied out. The expanded intermediate (E channels of the whole image,
// 4.8 MB in MobileNetV2's second block) never leaves the local buffer: a
// tile reads X's band and the weights and writes its output. The price is
// recomputation: a band of R output rows expands (R - 1) * stride +
// (kh - 1) * dilation + 1 input rows, so neighbouring bands expand their
// shared halo rows twice (ConvChainWorkRatio); `rows` trades that against
// the local buffer and the threads' balance, which is why it is searched.
// Whether the whole chain fits the local buffer at all (ConvChainTilingFits)
// is what decides where this fusion is legal.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/conv.h"
#include "kernels/epilogue.h"
#include "kernels/precision.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

struct ConvChainDesc {
  // The depthwise stage: in_channels == out_channels == groups == E, X's
  // height and width, the output's height and width.
  ConvShape depthwise;
  int64_t in_channels = 0;              // C: X's channels (E without an expand)
  int64_t out_channels = 0;             // C': Y's channels
  bool expand = true;                   // false: X is the depthwise stage's input
  const float* x = nullptr;             // [batch, C, in_h, in_w]
  const float* expand_w = nullptr;      // [E, C] (a 1x1 conv's [E, C, 1, 1])
  const float* expand_bias = nullptr;   // [E], optional
  const float* dw_w = nullptr;          // [E, 1, kernel_h, kernel_w]
  const float* dw_bias = nullptr;       // [E], optional
  const float* project_w = nullptr;     // [C', E]
  const float* project_bias = nullptr;  // [C'], optional
  // Pointwise activations after the expand and after the depthwise stage:
  // ops that read no operand (ReLU, Clip, SiLU, HardSwish, scales).
  std::vector<EpilogueOp> expand_act, dw_act;
  // After the project's bias, as a conv epilogue (conv.h): row = output
  // channel, column = output position, batch = image.
  std::vector<EpilogueOp> epilogue;
  // Optional: the weights pre-packed by PrePackConvChainWeights for the
  // tiling being run; without them the kernel packs them on every run.
  const float* w_packed = nullptr;
  float* y = nullptr;  // [batch, C', out_h, out_w]
};

struct ConvChainTiling {
  int64_t rows = 4;      // output rows per tile
  int64_t e_block = 32;  // expanded channels per step (a multiple of mr)
  int mr = 8, nr = 32;   // the micro-tile of the expand and project GEMMs
  // false: the threads share the bands. true: every thread runs every band
  // over its share of the e_block blocks and writes its partial project
  // sums to memory; a second pass adds them in thread order (runs stay
  // deterministic), then the bias and epilogue, and copies out. For small
  // images, whose few bands would leave a thread idle or recompute most of
  // the expand; the partial sums are traffic the estimate counts.
  bool split_expanded = false;
  // bf16: the expand and project weights pre-packed in bf16, X's band and
  // the depthwise outputs rounded to the bf16 micro-kernels' k-pairs as
  // they are packed in the local buffer, products on vdpbf16ps with f32
  // sums; the depthwise stage, biases, activations and epilogue in f32.
  // Needs an even e_block (blocks start on k-pairs) and a micro-tile with a
  // bf16 micro-kernel. Within the bf16 GEMM's bound for each product
  // (docs/PRECISION.md).
  Precision precision = Precision::kF32;
  // "rows=4 e=32 micro=8x32", + " split=e" when split, + " bf16"
  std::string ToString() const;
  bool operator==(const ConvChainTiling&) const = default;
};

// Ok when the descriptor is consistent (shapes, pointers, activations that
// read nothing); errors name the field.
Status ValidateConvChainDesc(const ConvChainDesc& desc);
int64_t ConvChainLocalBytes(const ConvChainDesc& desc, const ConvChainTiling& tiling);
Status ValidateConvChain(const ConvChainDesc& desc, const ConvChainTiling& tiling,
                         const KernelConfig& config);
bool ConvChainTilingFits(const ConvChainDesc& desc, const ConvChainTiling& tiling,
                         const KernelConfig& config);

// Multiply-adds the tiling computes per multiply-add of the chain's
// definition: above 1 by the expand's recomputed halo rows.
double ConvChainWorkRatio(const ConvChainDesc& desc, const ConvChainTiling& tiling);
// Multiply-adds of the chain's definition (expand, depthwise, project).
double ConvChainMacs(const ConvChainDesc& desc);

int64_t PrePackedConvChainWeightFloats(const ConvChainDesc& desc, const ConvChainTiling& tiling);
void PrePackConvChainWeights(const ConvChainDesc& desc, const ConvChainTiling& tiling, float* dst);

Result<KernelStats> RunConvChain(const ConvChainDesc& desc, const ConvChainTiling& tiling,
                                 const KernelConfig& config, RunMode mode = RunMode::kFull);

}  // namespace fusetune::kernels
