#include "kernels/epilogue.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/activation_simd.h"
#include "kernels/fast_math.h"

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

namespace {

template <typename F>
void ForTile(float* tile, int64_t ldc, int64_t rows, int64_t cols, F f) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = tile + r * ldc;
    for (int64_t c = 0; c < cols; ++c) row[c] = f(row[c]);
  }
}

void ActivateTile(Activation f, float* tile, int64_t ldc, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) Activate(f, tile + r * ldc, tile + r * ldc, cols);
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
        ActivateTile(Activation::kGeluErf, tile, ldc, rows, cols);
        break;
      case EpilogueKind::kGeluTanh:
        ActivateTile(Activation::kGeluTanh, tile, ldc, rows, cols);
        break;
      case EpilogueKind::kSilu:
        ActivateTile(Activation::kSilu, tile, ldc, rows, cols);
        break;
      case EpilogueKind::kSigmoid:
        ActivateTile(Activation::kSigmoid, tile, ldc, rows, cols);
        break;
    }
  }
  return bytes;
}

}  // namespace fusetune::kernels
