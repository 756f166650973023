#include "kernels/epilogue.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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
  }
  return "?";
}

float FastExp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // x = n ln2 + r with |r| <= ln2/2; exp(r) by a degree-6 polynomial; 2^n via the exponent bits.
  const float n = std::nearbyint(x * 1.44269504f);
  const float r = x - n * 0.693145752f - n * 1.42860677e-6f;
  const float p =
      1.0f +
      r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666493f + r * (0.00833336077f +
                                                                            r * 0.00138925994f)))));
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

float FastErf(float x) {
  // erf(x) = 1 - t * exp(-x^2 + P(t)), t = 1 / (1 + 0.5 |x|): Numerical Recipes' erfc
  // Chebyshev form, relative error below 1.2e-7 everywhere.
  const float z = std::min(std::fabs(x), 4.0f);  // erf(4) = 1 in f32
  const float t = 1.0f / (1.0f + 0.5f * z);
  const float p =
      -z * z - 1.26551223f +
      t * (1.00002368f +
           t * (0.37409196f +
                t * (0.09678418f +
                     t * (-0.18628806f +
                          t * (0.27886807f +
                               t * (-1.13520398f +
                                    t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  const float r = 1.0f - t * FastExp(p);
  return x >= 0 ? r : -r;
}

namespace {

template <typename F>
void ForTile(float* tile, int64_t ldc, int64_t rows, int64_t cols, F f) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = tile + r * ldc;
    for (int64_t c = 0; c < cols; ++c) row[c] = f(row[c]);
  }
}

}  // namespace

int64_t ApplyEpilogue(const std::vector<EpilogueOp>& ops, float* tile, int64_t ldc, int64_t rows,
                      int64_t cols, int64_t batch, int64_t row0, int64_t col0, RunMode mode) {
  int64_t bytes = 0;
  for (const EpilogueOp& op : ops) {
    if (op.reads_memory() ? mode == RunMode::kComputeOnly : mode == RunMode::kCopyOnly) continue;
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
      case EpilogueKind::kGeluErf:
        ForTile(tile, ldc, rows, cols,
                [](float v) { return 0.5f * v * (1.0f + FastErf(v * 0.70710678f)); });
        break;
      case EpilogueKind::kGeluTanh:
        ForTile(tile, ldc, rows, cols, [](float v) {
          const float u = 0.7978845608f * (v + 0.044715f * v * v * v);
          return 0.5f * v * (2.0f - 2.0f / (FastExp(2.0f * u) + 1.0f));  // 1 + tanh(u)
        });
        break;
      case EpilogueKind::kSilu:
        ForTile(tile, ldc, rows, cols, [](float v) { return v / (1.0f + FastExp(-v)); });
        break;
      case EpilogueKind::kSigmoid:
        ForTile(tile, ldc, rows, cols, [](float v) { return 1.0f / (1.0f + FastExp(-v)); });
        break;
    }
  }
  return bytes;
}

}  // namespace fusetune::kernels
