// Epilogues: a chain of elementwise ops applied to an output tile while it is
// still in the local buffer, before it is copied out. Operands that come from
// global memory (bias, residual, a tensor to multiply by) are read through
// strides and counted as traffic. One op is not elementwise: kLayerNorm
// normalises each row of the tile, so a kernel may use it only on tiles that
// hold whole rows (post-LN transformers: LayerNorm(x + A x B + bias) with no
// pass of its own).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/fast_math.h"
#include "kernels/precision.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

enum class EpilogueKind {
  kBiasAdd,      // c += bias[col]
  kResidualAdd,  // c += r[row, col]
  kMultiply,     // c *= t[row, col]
  kScale,        // c *= scalar
  kRelu,
  kGeluErf,
  kGeluTanh,
  kSilu,  // c * sigmoid(c)
  kSigmoid,
  kClip,         // min(max(c, scalar), scalar2): ReLU6 is Clip(0, 6)
  kHardSigmoid,  // max(0, min(1, scalar * c + scalar2))
  kHardSwish,    // c * max(0, min(1, c / 6 + 1 / 2))
  // c = (c - mean) / sqrt(var + scalar) * gamma[col], mean and variance over
  // the row's columns (the tile's, which must be the whole row); beta, when
  // there is one, follows as a kBiasAdd.
  kLayerNorm,
};

// True for ops whose result depends on the whole row, not one element.
bool IsRowNorm(EpilogueKind kind);

const char* EpilogueKindName(EpilogueKind kind);

struct EpilogueOp {
  EpilogueKind kind;
  const float* data = nullptr;  // bias, residual or multiplier
  int64_t row_stride = 0;       // elements between rows of `data` (0 broadcasts)
  int64_t col_stride = 1;       // elements between columns of `data`
  int64_t batch_stride = 0;     // elements between batches of `data`
  float scalar = 1.0f;
  float scalar2 = 0.0f;  // Clip's upper bound, HardSigmoid's beta

  static EpilogueOp Bias(const float* bias) { return {EpilogueKind::kBiasAdd, bias, 0, 1, 0, 1}; }
  static EpilogueOp Residual(const float* r, int64_t ld, int64_t batch_stride = 0) {
    return {EpilogueKind::kResidualAdd, r, ld, 1, batch_stride, 1};
  }
  static EpilogueOp Multiply(const float* t, int64_t ld, int64_t batch_stride = 0) {
    return {EpilogueKind::kMultiply, t, ld, 1, batch_stride, 1};
  }
  static EpilogueOp Scale(float s) { return {EpilogueKind::kScale, nullptr, 0, 0, 0, s}; }
  static EpilogueOp Act(EpilogueKind kind) { return {kind, nullptr, 0, 0, 0, 1}; }
  static EpilogueOp Clip(float lo, float hi) {
    return {EpilogueKind::kClip, nullptr, 0, 0, 0, lo, hi};
  }
  static EpilogueOp HardSigmoid(float alpha, float beta) {
    return {EpilogueKind::kHardSigmoid, nullptr, 0, 0, 0, alpha, beta};
  }
  static EpilogueOp LayerNorm(const float* gamma, float epsilon) {
    return {EpilogueKind::kLayerNorm, gamma, 0, 1, 0, epsilon};
  }
  bool reads_memory() const { return data != nullptr; }
};

bool HasRowNorm(const std::vector<EpilogueOp>& ops);

// Applies `ops` to a rows x cols tile (leading dimension ldc) whose top-left
// element is output (batch, row0, col0). Returns the bytes read from global.
// `mode` kCopyOnly performs only the ops that read memory; kComputeOnly only
// those that do not (a LayerNorm reads gamma and computes: its reads count in
// kCopyOnly, its arithmetic runs in kComputeOnly).
// A broadcast bias followed by an activation is one pass over the tile.
// `precision` is the kernel's: a bf16 kernel's GELU takes the piecewise form
// (gelu_piecewise.h: absolute error 1e-6, a third of the time).
int64_t ApplyEpilogue(const std::vector<EpilogueOp>& ops, float* tile, int64_t ldc, int64_t rows,
                      int64_t cols, int64_t batch, int64_t row0, int64_t col0,
                      RunMode mode = RunMode::kFull, Precision precision = Precision::kF32);

}  // namespace fusetune::kernels
