// Back-to-back GEMM (the transformer FFN): O = epilogue2(H x W2) with
// H = act(prologue(X) x W1 + b1), or in the SwiGLU form
// H = silu(prologue(X) x W1) * (prologue(X) x W3).
//
// Tiled over row blocks (mb) and hidden-dimension chunks (hb): per row block a
// thread copies X's rows into the local buffer once (applying the prologue),
// keeps an mb x N output tile there, and for each hidden chunk copies W1's
// (and W3's) columns and W2's rows, computes the mb x hb hidden slice with the
// GEMM micro-kernel, applies bias and activation, and accumulates its product
// with W2's rows into the output tile. The hidden activation never leaves the
// local buffer; the weights are read once per row block.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/gemm.h"

namespace fusetune::kernels {

struct FfnDesc {
  int64_t m = 0, k = 0, hidden = 0, n = 0;  // X is m x k, W1 k x hidden, W2 hidden x n
  const float* x = nullptr;
  int64_t x_row_stride = 0, x_col_stride = 1;
  GemmPrologue prologue;      // on X's rows, as in the GEMM template
  const float* w1 = nullptr;  // row-major k x hidden, row stride w1_row_stride
  int64_t w1_row_stride = 0;
  const float* b1 = nullptr;  // [hidden], optional
  EpilogueKind act = EpilogueKind::kGeluErf;
  bool swiglu = false;        // H = silu(X W1) * (X W3); b1 and act unused
  const float* w3 = nullptr;  // SwiGLU's up projection, like w1
  const float* w2 = nullptr;  // row-major hidden x n
  int64_t w2_row_stride = 0;
  std::vector<EpilogueOp> epilogue;  // on O: bias2, residual, ...
  float* o = nullptr;
  int64_t o_row_stride = 0;
};

struct FfnTiling {
  int64_t mb = 192, hb = 32;
  int mr = 8, nr = 32;
  std::string ToString() const;
};

int64_t FfnLocalBytes(const FfnDesc& desc, const FfnTiling& tiling);
Status ValidateFfn(const FfnDesc& desc, const FfnTiling& tiling, const KernelConfig& config);
Result<KernelStats> RunFfn(const FfnDesc& desc, const FfnTiling& tiling, const KernelConfig& config,
                           RunMode mode = RunMode::kFull);

}  // namespace fusetune::kernels
