// Attention in bf16 (kernels/attention.h): every output within the stated
// bound of a double-precision reference on random shapes, masks, strided
// views and tilings; the same bytes copied as in f32; the decode path in
// f32 whatever the precision (in the buffer validated for it); a
// micro-tile without a bf16 kernel refused.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "common/rng.h"
#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_bf16.h"

namespace fusetune::kernels {
namespace {

constexpr double kU = 1.0 / 256;  // bf16's relative rounding error, 2^-8

struct Bf16AttentionCase {
  int64_t b, h, sq, skv, d, dv;  // dv: the value (and output) width
  MaskKind mask;
  // Stored [B, H, D, S]: read through a column stride.
  bool q_transposed, k_transposed, v_transposed;
  std::vector<float> q, k, v, mask_values, o;
  AttentionDesc desc;
};

Bf16AttentionCase MakeCase(Rng& rng, int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d,
                           int64_t dv, MaskKind mask) {
  Bf16AttentionCase c{
      b,  h,  sq, skv, d,  dv, mask, rng.Below(2) == 1, rng.Below(2) == 1, rng.Below(2) == 1,
      {}, {}, {}, {},  {}, {}};
  auto fill = [&](std::vector<float>& x, int64_t n, double sd) {
    x.resize(n);
    for (float& e : x) e = static_cast<float>(rng.Normal() * sd);
  };
  fill(c.q, b * h * sq * d, 1);
  fill(c.k, b * h * skv * d, 1);
  fill(c.v, b * h * skv * dv, 1);
  fill(c.mask_values, sq * skv, 2);
  c.o.assign(b * h * sq * dv, NAN);
  AttentionDesc& x = c.desc;
  x.batch = b;
  x.heads = h;
  x.seq_q = sq;
  x.seq_kv = skv;
  x.head_dim = d;
  x.value_dim = dv;
  x.q = c.q_transposed ? AttentionView{c.q.data(), h * sq * d, sq * d, 1, sq}
                       : AttentionView{c.q.data(), h * sq * d, sq * d, d, 1};
  x.k = c.k_transposed ? AttentionView{c.k.data(), h * skv * d, skv * d, 1, skv}
                       : AttentionView{c.k.data(), h * skv * d, skv * d, d, 1};
  x.v = c.v_transposed ? AttentionView{c.v.data(), h * skv * dv, skv * dv, 1, skv}
                       : AttentionView{c.v.data(), h * skv * dv, skv * dv, dv, 1};
  x.o = c.o.data();
  x.o_batch = h * sq * dv;
  x.o_head = sq * dv;
  x.o_row = dv;
  x.scale = static_cast<float>(1 / std::sqrt(static_cast<double>(d)));
  x.mask = mask;
  x.mask_data = {c.mask_values.data(), 0, 0, skv, 1};  // one [sq, skv] block for every head
  return c;
}

double At(const AttentionView& v, int64_t b, int64_t h, int64_t row, int64_t col) {
  return v.data[b * v.batch + h * v.head + row * v.row + col * v.col];
}

// The bound every output of a bf16 attention keeps, for query row i
// (docs/PRECISION.md):
//   each score is off by at most D_ij = (2u + u^2 + d 2^-23) scale sum_p |q_ip| |k_jp|
//   (Q scaled, then Q and K rounded; float sums), and exp's own error shifts it
//   by at most 2^-22 |s_ij - max_j s_ij| (+ 1e-6 for the float mask add), so each
//   softmax weight w_ij moves by a factor within e^(+-2D), D the row's largest
//   shift; P and V rounded add (2u + u^2), the float sum over the keys
//   skv 2^-23:
//   |o_ic - exact| <= ((1 + 2u + u^2 + skv 2^-23) e^(2D) - 1) sum_j w_ij |v_jc|  (+ 1e-5)
void ExpectWithinBf16Bound(const Bf16AttentionCase& c, const std::string& what) {
  const AttentionDesc& x = c.desc;
  const double rel = 2 * kU + kU * kU + c.d * 0x1p-23;
  int checked = 0;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.sq; ++i) {
        const int64_t end = AttentionKeyEnd(x, i, 1);
        std::vector<double> s(end), shift(end);
        double top = -INFINITY, worst = 0;
        for (int64_t j = 0; j < end; ++j) {
          double dot = 0, abs_dot = 0;
          for (int64_t p = 0; p < c.d; ++p) {
            dot += At(x.q, b, h, i, p) * At(x.k, b, h, j, p);
            abs_dot += std::abs(At(x.q, b, h, i, p) * At(x.k, b, h, j, p));
          }
          s[j] = dot * x.scale + (c.mask == MaskKind::kAdditive ? c.mask_values[i * c.skv + j] : 0);
          shift[j] = rel * x.scale * abs_dot + 1e-6;
          top = std::max(top, s[j]);
        }
        for (int64_t j = 0; j < end; ++j)
          worst = std::max(worst, shift[j] + 0x1p-22 * std::abs(s[j] - top));
        double total = 0;
        for (int64_t j = 0; j < end; ++j) total += s[j] = std::exp(s[j] - top);
        for (int64_t col = 0; col < c.dv; ++col) {
          double exact = 0, magnitude = 0;
          for (int64_t j = 0; j < end; ++j) {
            exact += s[j] / total * At(x.v, b, h, j, col);
            magnitude += s[j] / total * std::abs(At(x.v, b, h, j, col));
          }
          const double bound =
              ((1 + 2 * kU + kU * kU + c.skv * 0x1p-23) * std::exp(2 * worst) - 1) * magnitude +
              1e-5;
          const double got = c.o[((b * c.h + h) * c.sq + i) * c.dv + col];
          ASSERT_LE(std::abs(got - exact), bound)
              << what << " at b" << b << " h" << h << " row " << i << " col " << col;
          ++checked;
        }
      }
  EXPECT_EQ(checked, c.b * c.h * c.sq * c.dv);
}

AttentionTiling RandomBf16Tiling(Rng& rng) {
  const auto shapes = Bf16MicroTileShapes();
  AttentionTiling t;
  std::tie(t.mr, t.nr) = shapes[rng.Below(shapes.size())];
  t.br = rng.Between(1, 80);
  t.bc = rng.Between(1, 80);
  t.precision = Precision::kBf16;
  return t;
}

TEST(AttentionBf16, WithinTheStatedBoundOnRandomShapesMasksAndTilings) {
  Rng rng(53);
  const int64_t queries[] = {9, 16, 31, 64, 97}, keys[] = {1, 5, 16, 31, 64, 97};
  const int64_t dims[] = {1, 13, 33, 64};
  for (int trial = 0; trial < 30; ++trial) {
    const auto mask = static_cast<MaskKind>(trial % 3);
    int64_t sq = queries[rng.Below(5)], skv = keys[rng.Below(6)];
    if (mask == MaskKind::kCausal) skv = std::max(skv, sq);  // every query sees a key
    const int64_t d = dims[rng.Below(4)], dv = trial % 4 == 3 ? dims[rng.Below(4)] : d;
    Bf16AttentionCase c = MakeCase(rng, rng.Between(1, 2), rng.Between(1, 3), sq, skv, d, dv, mask);
    const AttentionTiling t = RandomBf16Tiling(rng);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    auto run = RunAttention(c.desc, t, config);
    ASSERT_TRUE(run.ok()) << run.error().ToString();
    ExpectWithinBf16Bound(
        c, fmt::format("trial {}: {}x{}x{}x{}x{} dv {} {} q{} k{} v{} {} threads {}", trial, c.b,
                       c.h, c.sq, c.skv, c.d, c.dv, MaskKindName(mask), c.q_transposed ? "^T" : "",
                       c.k_transposed ? "^T" : "", c.v_transposed ? "^T" : "", t.ToString(),
                       config.threads));
  }
}

// The bytes a tile copies are counted as read from and written to global
// memory (floats), whatever the local buffer holds them in; the results
// are not the f32 ones (the operands really are rounded).
TEST(AttentionBf16, CopiesTheBytesItsF32FormCopies) {
  Rng rng(59);
  Bf16AttentionCase c = MakeCase(rng, 1, 2, 40, 72, 32, 32, MaskKind::kAdditive);
  AttentionTiling t;
  std::tie(t.mr, t.nr) = Bf16MicroTileShapes().front();
  t.br = 16;
  t.bc = 32;
  KernelConfig config;
  auto f32 = RunAttention(c.desc, t, config);
  ASSERT_TRUE(f32.ok()) << f32.error().ToString();
  const int64_t f32_local_bytes = AttentionLocalBytes(c.desc, t);
  const std::vector<float> f32_out = c.o;
  t.precision = Precision::kBf16;
  auto bf16 = RunAttention(c.desc, t, config);
  ASSERT_TRUE(bf16.ok()) << bf16.error().ToString();
  EXPECT_NE(c.o, f32_out) << "the operands were not rounded";
  EXPECT_EQ(bf16->bytes_global_to_local, f32->bytes_global_to_local);
  EXPECT_EQ(bf16->bytes_local_to_global, f32->bytes_local_to_global);
  EXPECT_LT(AttentionLocalBytes(c.desc, t), f32_local_bytes)
      << "the operands take half the bytes in the local buffer";
}

TEST(AttentionBf16, DecodeQueriesComputeInF32) {
  Rng rng(61);
  Bf16AttentionCase c = MakeCase(rng, 1, 2, kDecodeMaxQueries, 300, 64, 64, MaskKind::kCausal);
  AttentionTiling t;
  std::tie(t.mr, t.nr) = Bf16MicroTileShapes().front();
  t.bc = 64;
  KernelConfig config;
  ASSERT_TRUE(RunAttention(c.desc, t, config).ok());
  const std::vector<float> f32 = c.o;
  t.precision = Precision::kBf16;
  ASSERT_TRUE(RunAttention(c.desc, t, config).ok());
  EXPECT_EQ(c.o, f32);
  t.br = 16;
  t.bc = 512;  // the decode path's buffer is f32's: validated as such
  EXPECT_LE(DecodeLocalBytes(c.desc, t), AttentionLocalBytes(c.desc, t));
}

TEST(AttentionBf16, RefusesAMicroTileWithoutABf16Kernel) {
  Rng rng(67);
  Bf16AttentionCase c = MakeCase(rng, 1, 1, 32, 32, 16, 16, MaskKind::kNone);
  for (auto [mr, nr] : MicroTileShapes()) {
    if (FindBf16MicroKernel(mr, nr)) continue;
    AttentionTiling t;
    t.mr = mr;
    t.nr = nr;
    t.precision = Precision::kBf16;
    const Status s = ValidateAttention(c.desc, t, KernelConfig{});
    ASSERT_FALSE(s.ok()) << mr << "x" << nr;
    EXPECT_NE(s.error().message().find("has no bf16 micro-kernel"), std::string::npos)
        << s.error().message();
    return;
  }
  GTEST_SKIP() << "every micro-tile shape has a bf16 kernel";
}

}  // namespace
}  // namespace fusetune::kernels
