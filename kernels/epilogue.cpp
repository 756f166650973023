#include "kernels/epilogue.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/activation_simd.h"
#include "kernels/fast_math.h"
#include "kernels/gelu_piecewise.h"

namespace fusetune::kernels {

const char* EpilogueKindName(EpilogueKind kind) {
  switch (kind) {
    case EpilogueKind::kBiasAdd:
      return "bias_add";
    case EpilogueKind::kResidualAdd:
      return "residual_add";
    case EpilogueKind::kMultiply:
      return "multiply";
    case EpilogueKind::kScale:
      return "scale";
    case EpilogueKind::kRelu:
      return "relu";
    case EpilogueKind::kGeluErf:
      return "gelu_erf";
    case EpilogueKind::kGeluTanh:
      return "gelu_tanh";
    case EpilogueKind::kSilu:
      return "silu";
    case EpilogueKind::kSigmoid:
      return "sigmoid";
    case EpilogueKind::kClip:
      return "clip";
    case EpilogueKind::kHardSigmoid:
      return "hard_sigmoid";
    case EpilogueKind::kHardSwish:
      return "hard_swish";
    case EpilogueKind::kLayerNorm:
      return "layer_norm";
  }
  return "?";
}

bool IsRowNorm(EpilogueKind kind) { return kind == EpilogueKind::kLayerNorm; }

bool HasRowNorm(const std::vector<EpilogueOp>& ops) {
  return std::any_of(ops.begin(), ops.end(),
                     [](const EpilogueOp& op) { return IsRowNorm(op.kind); });
}

namespace {

template <typename F>
void ForTile(float* tile, int64_t ldc, int64_t rows, int64_t cols, F f) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = tile + r * ldc;
    for (int64_t c = 0; c < cols; ++c) row[c] = f(row[c]);
  }
}

// A tile whose rows are unpadded (cols == ldc, as for nc a multiple of the
// micro-tile's width) is one run: one call instead of one per row, whose
// setup (the polynomials' constants, the dispatch) cost as much as the
// arithmetic on a 32-column row.
void ActivateTile(Activation f, float* tile, int64_t ldc, int64_t rows, int64_t cols) {
  if (cols == ldc) return Activate(f, tile, tile, rows * cols);
  for (int64_t r = 0; r < rows; ++r) Activate(f, tile + r * ldc, tile + r * ldc, cols);
}

// Sum of x[0..n) in 16 partial sums, a form the compiler keeps in one vector
// register (a single running float sum stays scalar without -ffast-math).
template <typename F>
float LaneSum(const float* x, int64_t n, F f) {
  constexpr int kLanes = 16;
  float part[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int j = 0; j < kLanes; ++j) part[j] += f(x[c + j]);
  for (; c < n; ++c) part[0] += f(x[c]);
  float sum = 0;
  for (float p : part) sum += p;
  return sum;
}

// Two passes (mean, then the squared deviations): no cancellation when the
// mean is large against the spread, as a residual stream's rows can be.
void LayerNormTile(const EpilogueOp& op, float* tile, int64_t ldc, int64_t rows, int64_t cols,
                   int64_t col0) {
  const float* gamma = op.data + col0 * op.col_stride;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = tile + r * ldc;
    const float mean = LaneSum(row, cols, [](float v) { return v; }) / static_cast<float>(cols);
    const float var = LaneSum(row, cols, [mean](float v) { return (v - mean) * (v - mean); }) /
                      static_cast<float>(cols);
    const float rstd = 1.0f / std::sqrt(var + op.scalar);
    if (op.col_stride == 1)
      for (int64_t c = 0; c < cols; ++c) row[c] = (row[c] - mean) * rstd * gamma[c];
    else
      for (int64_t c = 0; c < cols; ++c) row[c] = (row[c] - mean) * rstd * gamma[c * op.col_stride];
  }
}

bool IsRowBias(const EpilogueOp& op) {
  return op.kind == EpilogueKind::kBiasAdd && op.row_stride == 0 && op.col_stride == 1;
}

// Whether an epilogue op is an activation_simd function, and which.
bool ActivationOf(EpilogueKind kind, Activation* f) {
  switch (kind) {
    case EpilogueKind::kGeluErf:
      return *f = Activation::kGeluErf, true;
    case EpilogueKind::kGeluTanh:
      return *f = Activation::kGeluTanh, true;
    case EpilogueKind::kSilu:
      return *f = Activation::kSilu, true;
    case EpilogueKind::kSigmoid:
      return *f = Activation::kSigmoid, true;
    default:
      return false;
  }
}

// f over the tile, after `bias` (a row, or null) in the same pass; a bf16
// kernel's GELU in the piecewise form.
void ActivationPass(Activation f, bool piecewise_gelu, const float* bias, float* tile, int64_t ldc,
                    int64_t rows, int64_t cols) {
  const bool piecewise = piecewise_gelu && f == Activation::kGeluErf;
  if (!bias && cols == ldc) {  // one run
    if (piecewise) return GeluErfPiecewise(tile, nullptr, tile, rows * cols);
    return ActivateTile(f, tile, ldc, rows, cols);
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* row = tile + r * ldc;
    if (piecewise)
      GeluErfPiecewise(row, bias, row, cols);
    else if (bias)
      ActivateBiased(f, row, bias, row, cols);
    else
      Activate(f, row, row, cols);
  }
}

}  // namespace

int64_t ApplyEpilogue(const std::vector<EpilogueOp>& ops, float* tile, int64_t ldc, int64_t rows,
                      int64_t cols, int64_t batch, int64_t row0, int64_t col0, RunMode mode,
                      Precision precision) {
  const bool piecewise_gelu = precision == Precision::kBf16;
  int64_t bytes = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const EpilogueOp& op = ops[i];
    // A row bias and the activation after it: one pass over the tile.
    Activation f = Activation::kExp;
    if (mode == RunMode::kFull && IsRowBias(op) && i + 1 < ops.size() &&
        ActivationOf(ops[i + 1].kind, &f)) {
      const float* bias = op.data + batch * op.batch_stride + col0;
      ActivationPass(f, piecewise_gelu, bias, tile, ldc, rows, cols);
      bytes += static_cast<int64_t>(sizeof(float)) * cols;  // as the bias op alone counts it
      ++i;
      continue;
    }
    if (IsRowNorm(op.kind)) {
      if (mode != RunMode::kCopyOnly) LayerNormTile(op, tile, ldc, rows, cols, col0);
      if (mode != RunMode::kComputeOnly) bytes += static_cast<int64_t>(sizeof(float)) * cols;
      continue;
    }
    if (op.reads_memory() ? mode == RunMode::kComputeOnly : mode == RunMode::kCopyOnly) continue;
    if (ActivationOf(op.kind, &f)) {
      ActivationPass(f, piecewise_gelu, nullptr, tile, ldc, rows, cols);
      continue;
    }
    switch (op.kind) {
      case EpilogueKind::kBiasAdd:
      case EpilogueKind::kResidualAdd:
      case EpilogueKind::kMultiply: {
        const float* base =
            op.data + batch * op.batch_stride + row0 * op.row_stride + col0 * op.col_stride;
        const bool add = op.kind != EpilogueKind::kMultiply;
        for (int64_t r = 0; r < rows; ++r) {
          float* row = tile + r * ldc;
          const float* src = base + r * op.row_stride;
          if (op.col_stride == 1) {
            if (add)
              for (int64_t c = 0; c < cols; ++c) row[c] += src[c];
            else
              for (int64_t c = 0; c < cols; ++c) row[c] *= src[c];
          } else {
            for (int64_t c = 0; c < cols; ++c)
              row[c] = add ? row[c] + src[c * op.col_stride] : row[c] * src[c * op.col_stride];
          }
        }
        // A broadcast bias row is read once per tile; full operands once per element.
        bytes += static_cast<int64_t>(sizeof(float)) * cols * (op.row_stride == 0 ? 1 : rows);
        break;
      }
      case EpilogueKind::kScale: {
        const float s = op.scalar;
        ForTile(tile, ldc, rows, cols, [s](float v) { return v * s; });
        break;
      }
      case EpilogueKind::kRelu:
        ForTile(tile, ldc, rows, cols, [](float v) { return v > 0 ? v : 0.0f; });
        break;
      case EpilogueKind::kGeluErf:  // ActivationPass, above
      case EpilogueKind::kGeluTanh:
      case EpilogueKind::kSilu:
      case EpilogueKind::kSigmoid:
        break;
      case EpilogueKind::kClip: {
        const float lo = op.scalar, hi = op.scalar2;
        ForTile(tile, ldc, rows, cols, [lo, hi](float v) { return std::min(std::max(v, lo), hi); });
        break;
      }
      case EpilogueKind::kHardSigmoid: {
        const float a = op.scalar, b = op.scalar2;
        ForTile(tile, ldc, rows, cols,
                [a, b](float v) { return std::min(std::max(a * v + b, 0.0f), 1.0f); });
        break;
      }
      case EpilogueKind::kHardSwish:
        ForTile(tile, ldc, rows, cols, [](float v) {
          return v * std::min(std::max(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
        });
        break;
      case EpilogueKind::kLayerNorm:  // handled above
        break;
    }
  }
  return bytes;
}

}  // namespace fusetune::kernels
