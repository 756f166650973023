// Evaluation of a scheduled tile program: one vectorised loop per instruction.
#include <algorithm>
#include <cmath>

#include "kernels/activation_simd.h"
#include "kernels/fast_math.h"
#include "kernels/tile_program.h"

namespace fusetune::kernels {

namespace {

int64_t RoundUp16(int64_t n) { return (n + 15) / 16 * 16; }

int64_t ShapeFloats(ValueShape shape, int64_t rows, int64_t width) {
  switch (shape) {
    case ValueShape::kWide:
      return RoundUp16(rows * width);
    case ValueShape::kVector:
      return RoundUp16(width);
    case ValueShape::kNarrow:
      return RoundUp16(rows);
  }
  return 0;
}

template <typename F>
void Map1(F f, const float* a, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i]);
}

// One row of a binary op whose operands are arrays or per-row scalars.
template <typename F>
void Map2Row(F f, const float* a, bool a_scalar, const float* b, bool b_scalar, float* out,
             int64_t n) {
  if (!a_scalar && !b_scalar) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  } else if (a_scalar && !b_scalar) {
    const float av = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = f(av, b[i]);
  } else if (!a_scalar) {
    const float bv = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], bv);
  } else {
    const float v = f(*a, *b);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  }
}

template <typename F>
void Map2(F f, const float* a, ValueShape as, const float* b, ValueShape bs, float* out,
          ValueShape os, int64_t rows, int64_t width) {
  if (as == bs) {  // then os == as: one flat loop
    const int64_t n = os == ValueShape::kWide     ? rows * width
                      : os == ValueShape::kVector ? width
                                                  : rows;
    Map2Row(f, a, false, b, false, out, n);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {  // os is wide
    const float* ar = as == ValueShape::kWide     ? a + r * width
                      : as == ValueShape::kVector ? a
                                                  : a + r;
    const float* br = bs == ValueShape::kWide     ? b + r * width
                      : bs == ValueShape::kVector ? b
                                                  : b + r;
    Map2Row(f, ar, as == ValueShape::kNarrow, br, bs == ValueShape::kNarrow, out + r * width,
            width);
  }
}

template <int U, typename F>
float ReduceRow(const float* x, int64_t n, float init, F f) {
  float acc[U * 16];
  for (float& a : acc) a = init;
  int64_t i = 0;
  for (; i + U * 16 <= n; i += U * 16)
    for (int k = 0; k < U * 16; ++k) acc[k] = f(acc[k], x[i + k]);
  for (; i < n; ++i) acc[0] = f(acc[0], x[i]);
  float r = init;
  for (float a : acc) r = f(r, a);
  return r;
}

template <typename F>
void ReduceRows(F f, float init, const float* a, float* out, int64_t rows, int64_t width,
                int unroll, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = a + r * width;
    const float v = unroll >= 4   ? ReduceRow<4>(x, width, init, f)
                    : unroll == 2 ? ReduceRow<2>(x, width, init, f)
                                  : ReduceRow<1>(x, width, init, f);
    out[r] = v * scale;
  }
}

void RunUnary(TileOp op, const float* a, float* o, int64_t n) {
  switch (op) {
    case TileOp::kNeg:
      return Map1([](float x) { return -x; }, a, o, n);
    case TileOp::kAbs:
      return Map1([](float x) { return std::fabs(x); }, a, o, n);
    case TileOp::kExp:
      return Activate(Activation::kExp, a, o, n);
    case TileOp::kLog:
      return Map1([](float x) { return std::log(x); }, a, o, n);
    case TileOp::kSqrt:
      return Map1([](float x) { return std::sqrt(x); }, a, o, n);
    case TileOp::kRsqrt:
      return Map1([](float x) { return 1.0f / std::sqrt(x); }, a, o, n);
    case TileOp::kReciprocal:
      return Map1([](float x) { return 1.0f / x; }, a, o, n);
    case TileOp::kSquare:
      return Map1([](float x) { return x * x; }, a, o, n);
    case TileOp::kTanh:
      return Activate(Activation::kTanh, a, o, n);
    case TileOp::kErf:
      return Activate(Activation::kErf, a, o, n);
    case TileOp::kSigmoid:
      return Activate(Activation::kSigmoid, a, o, n);
    case TileOp::kRelu:
      return Map1([](float x) { return x > 0 ? x : 0.0f; }, a, o, n);
    case TileOp::kGeluErf:
      return Activate(Activation::kGeluErf, a, o, n);
    case TileOp::kGeluTanh:
      return Activate(Activation::kGeluTanh, a, o, n);
    case TileOp::kSilu:
      return Activate(Activation::kSilu, a, o, n);
    default:
      return;
  }
}

void RunBinary(TileOp op, const float* a, ValueShape as, const float* b, ValueShape bs, float* o,
               ValueShape os, int64_t rows, int64_t width) {
  switch (op) {
    case TileOp::kAdd:
      return Map2([](float x, float y) { return x + y; }, a, as, b, bs, o, os, rows, width);
    case TileOp::kSub:
      return Map2([](float x, float y) { return x - y; }, a, as, b, bs, o, os, rows, width);
    case TileOp::kMul:
      return Map2([](float x, float y) { return x * y; }, a, as, b, bs, o, os, rows, width);
    case TileOp::kDiv:
      return Map2([](float x, float y) { return x / y; }, a, as, b, bs, o, os, rows, width);
    case TileOp::kMax:
      return Map2([](float x, float y) { return x > y ? x : y; }, a, as, b, bs, o, os, rows, width);
    case TileOp::kMin:
      return Map2([](float x, float y) { return x < y ? x : y; }, a, as, b, bs, o, os, rows, width);
    case TileOp::kPow:
      return Map2([](float x, float y) { return std::pow(x, y); }, a, as, b, bs, o, os, rows,
                  width);
    default:
      return;
  }
}

}  // namespace

int64_t TileSchedule::FrameFloats(int64_t rows, int64_t width) const {
  int64_t n = 0;
  for (ValueShape shape : slot_shape_) n += ShapeFloats(shape, rows, width);
  return n;
}

TileSchedule::Frame TileSchedule::Bind(float* frame, int64_t rows, int64_t width) const {
  std::vector<float*> slot(slot_shape_.size());
  for (size_t i = 0; i < slot_shape_.size(); ++i) {
    slot[i] = frame;
    frame += ShapeFloats(slot_shape_[i], rows, width);
  }
  Frame f;
  for (int s : slot_of_) f.value.push_back(slot[s]);
  return f;
}

void TileSchedule::Compute(const Frame& frame, int64_t rows, int64_t width, int unroll) const {
  const auto& instrs = program_.instrs();
  for (size_t v = 0; v < instrs.size(); ++v) {
    const TileInstr& i = instrs[v];
    float* out = frame.value[v];
    const ValueShape os = shapes_[v];
    if (i.op == TileOp::kInput) continue;
    if (i.op == TileOp::kConst) {
      std::fill(out, out + rows, i.value);
    } else if (IsUnary(i.op)) {
      RunUnary(i.op, frame.value[i.a], out, ShapeFloats(os, rows, width));
    } else if (IsBinary(i.op)) {
      RunBinary(i.op, frame.value[i.a], shapes_[i.a], frame.value[i.b], shapes_[i.b], out, os, rows,
                width);
    } else {
      const float* a = frame.value[i.a];
      const float inf = INFINITY;
      switch (i.op) {
        case TileOp::kReduceSum:
        case TileOp::kReduceMean:
          ReduceRows([](float x, float y) { return x + y; }, 0.0f, a, out, rows, width, unroll,
                     i.op == TileOp::kReduceMean ? 1.0f / static_cast<float>(width) : 1.0f);
          break;
        case TileOp::kReduceMax:
          ReduceRows([](float x, float y) { return x > y ? x : y; }, -inf, a, out, rows, width,
                     unroll, 1.0f);
          break;
        default:
          ReduceRows([](float x, float y) { return x < y ? x : y; }, inf, a, out, rows, width,
                     unroll, 1.0f);
          break;
      }
    }
  }
}

}  // namespace fusetune::kernels
