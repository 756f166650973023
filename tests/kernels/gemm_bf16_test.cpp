// The bf16 GEMM (kernels/precision.h): conversions against their definition,
// results within the stated bound of the exact product, pre-packed bf16 B
// identical to packing at run time with half the bytes streamed, and the
// portable and vector micro-kernels agreeing.
#include <gtest/gtest.h>

#include <iterator>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <numbers>

#include "common/rng.h"
#include "kernels/bf16.h"
#include "kernels/gelu_piecewise.h"
#include "kernels/gemm.h"
#include "kernels/microkernel_bf16.h"

namespace fusetune::kernels {
namespace {

float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

TEST(Bf16, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(FloatToBf16(FromBits(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(FloatToBf16(INFINITY), 0x7f80);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
  EXPECT_EQ(FloatToBf16(FromBits(0x00400000)), 0x0000);  // a denormal flushes, as vcvtneps2bf16
  EXPECT_EQ(FloatToBf16(FromBits(0x80400000)), 0x8000);
  EXPECT_EQ(Bf16ToFloat(0x4049), 3.140625f);
}

TEST(Bf16, VectorConversionsMatchTheScalarOne) {
  Rng rng(7);
  std::vector<float> x(1000), y(1000);
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng.Next());
    x[i] = i % 3 == 0 ? FromBits((bits & 0xffff0000u) | 0x8000u) : FromBits(bits);  // ties too
    y[i] = static_cast<float>(rng.Normal());
  }
  for (int64_t n : {0, 1, 15, 16, 17, 999}) {
    std::vector<Bf16> got(n + 1, 0xabcd), pairs(2 * n + 2, 0xabcd);
    ConvertToBf16(x.data(), n, got.data());
    InterleaveToBf16Pairs(x.data(), y.data(), n, pairs.data());
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(x[i])) continue;
      ASSERT_EQ(got[i], FloatToBf16(x[i])) << n << " @" << i;
      ASSERT_EQ(pairs[2 * i], FloatToBf16(x[i])) << n << " @" << i;
      ASSERT_EQ(pairs[2 * i + 1], FloatToBf16(y[i])) << n << " @" << i;
    }
    EXPECT_EQ(got[n], 0xabcd) << "wrote past the end";
    EXPECT_EQ(pairs[2 * n], 0xabcd) << "wrote past the end";
  }
}

struct Bf16GemmCase {
  int64_t batch, m, n, k;
  bool trans_b;
  std::vector<float> a, b, bias, c;
  GemmDesc desc;
};

Bf16GemmCase MakeCase(Rng& rng, int64_t batch, int64_t m, int64_t n, int64_t k, bool trans_b) {
  Bf16GemmCase cs{batch, m, n, k, trans_b, {}, {}, {}, {}, {}};
  auto fill = [&](std::vector<float>& v, int64_t size) {
    v.resize(size);
    for (float& x : v) x = static_cast<float>(rng.Normal());
  };
  fill(cs.a, batch * m * k);
  fill(cs.b, k * n);
  fill(cs.bias, n);
  cs.c.assign(batch * m * n, NAN);
  GemmDesc& d = cs.desc;
  d.batch = batch;
  d.m = m;
  d.k = k;
  d.a = cs.a.data();
  d.a_row_stride = k;
  d.a_batch_stride = m * k;
  GemmOutput& out = d.outputs.emplace_back();
  out.n = n;
  out.b = cs.b.data();
  out.b_row_stride = trans_b ? 1 : n;
  out.b_col_stride = trans_b ? k : 1;
  out.c = cs.c.data();
  out.c_row_stride = n;
  out.c_batch_stride = m * n;
  out.epilogue = {EpilogueOp::Bias(cs.bias.data()), EpilogueOp::Act(EpilogueKind::kRelu)};
  return cs;
}

GemmTiling RandomBf16Tiling(Rng& rng, int64_t k) {
  const auto shapes = Bf16MicroTileShapes();
  GemmTiling t;
  std::tie(t.mr, t.nr) = shapes[rng.Below(shapes.size())];
  t.mc = t.mr * rng.Between(1, 6);
  t.nc = t.nr * rng.Between(1, 4);
  t.kc = rng.Between(1, k + 3);
  t.order = rng.Below(2) ? LoopOrder::kMN : LoopOrder::kNM;
  t.split = static_cast<ParallelSplit>(rng.Below(3));
  t.double_buffer = rng.Below(2) == 1;
  t.refill = !t.double_buffer && rng.Below(2) == 1;
  t.precision = Precision::kBf16;
  return t;
}

// The activation after the bias, with what it adds to an error: a factor
// (its largest slope) and an absolute error of its own.
struct Bf16Activation {
  double (*f)(double);
  double slope, abs_error;
};
const Bf16Activation kBf16Relu = {[](double x) { return std::max(x, 0.0); }, 1.0, 0.0};
// A bf16 kernel's GELU is the piecewise one (kernels/gelu_piecewise.h);
// GELU's slope peaks at 1.1289 near x = 1.41.
const Bf16Activation kBf16Gelu = {
    [](double x) { return 0.5 * x * std::erfc(-x / std::numbers::sqrt2); }, 1.129,
    kGeluPiecewiseAbsError};

// The bound a bf16 GEMM keeps, per element: each operand rounded to bf16
// (relative error u = 2^-8), so each product is off by at most (2u + u^2)
// of |a||b|, and the float sums add at most one float rounding (2^-24) per
// term; the activation multiplies that by its slope at most and adds its own
// error. The same product of the operands rounded to bf16 is what the kernel
// computes up to the float sums: within K 2^-23 of sum |a||b| of it, which
// an f32 GEMM of the unrounded operands is not (so a bf16 tiling that ran
// in f32 would fail here).
void ExpectWithinBf16Bound(const Bf16GemmCase& cs, const std::string& what,
                           const Bf16Activation& act = kBf16Relu) {
  const double u = std::ldexp(1.0, -8), sums = cs.k * std::ldexp(1.0, -23);
  auto rounded = [](float x) { return static_cast<double>(Bf16ToFloat(FloatToBf16(x))); };
  for (int64_t bt = 0; bt < cs.batch; ++bt)
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t j = 0; j < cs.n; ++j) {
        double exact = cs.bias[j], of_rounded = cs.bias[j], abs = 0;
        for (int64_t p = 0; p < cs.k; ++p) {
          const float a = cs.a[(bt * cs.m + i) * cs.k + p];
          const float b = cs.trans_b ? cs.b[j * cs.k + p] : cs.b[p * cs.n + j];
          exact += static_cast<double>(a) * b;
          of_rounded += rounded(a) * rounded(b);
          abs += std::abs(static_cast<double>(a) * b);
        }
        const double got = cs.c[(bt * cs.m + i) * cs.n + j], slack = act.abs_error + 1e-6;
        ASSERT_LE(std::abs(got - act.f(exact)), act.slope * (2 * u + u * u + sums) * abs + slack)
            << what << " @(" << bt << "," << i << "," << j << ")";
        ASSERT_LE(std::abs(got - act.f(of_rounded)), act.slope * sums * abs + slack)
            << what << " @(" << bt << "," << i << "," << j
            << ") is not the rounded operands' product";
      }
}

TEST(GemmBf16, WithinTheStatedBoundOnRandomShapesAndTilings) {
  Rng rng(20261127);
  const int64_t sizes[] = {1, 2, 7, 16, 33, 64, 97};
  for (int trial = 0; trial < 40; ++trial) {
    Bf16GemmCase cs = MakeCase(rng, rng.Between(1, 2), sizes[rng.Below(7)], sizes[rng.Below(7)],
                               sizes[rng.Below(7)], rng.Below(2) == 1);
    const GemmTiling t = RandomBf16Tiling(rng, cs.k);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    auto stats = RunGemm(cs.desc, t, config);
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    ExpectWithinBf16Bound(cs, fmt::format("trial {}: {}x{}x{}x{} tb={} {}", trial, cs.batch, cs.m,
                                          cs.n, cs.k, cs.trans_b, t.ToString()));
  }
}

// Bias and GELU after the bf16 products: the piecewise GELU in one pass
// with the bias (kernels/epilogue.h), within the same bound through GELU.
TEST(GemmBf16, BiasAndGeluWithinTheBoundThroughGelu) {
  Rng rng(20261204);
  const int64_t sizes[] = {1, 7, 16, 33, 97};
  for (int trial = 0; trial < 20; ++trial) {
    Bf16GemmCase cs = MakeCase(rng, rng.Between(1, 2), sizes[rng.Below(5)], sizes[rng.Below(5)],
                               sizes[rng.Below(5)], rng.Below(2) == 1);
    cs.desc.outputs[0].epilogue = {EpilogueOp::Bias(cs.bias.data()),
                                   EpilogueOp::Act(EpilogueKind::kGeluErf)};
    const GemmTiling t = RandomBf16Tiling(rng, cs.k);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    auto stats = RunGemm(cs.desc, t, config);
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    ExpectWithinBf16Bound(cs, fmt::format("trial {}: {}", trial, t.ToString()), kBf16Gelu);
  }
}

// Weights pre-packed in bf16 give the same results as packing them at run
// time, and stream half the bytes of B.
TEST(GemmBf16, PrePackedBIsTheSameBAtHalfTheBytes) {
  Rng rng(11);
  const int64_t sizes[] = {1, 7, 33, 97};
  for (int trial = 0; trial < 20; ++trial) {
    Bf16GemmCase cs = MakeCase(rng, 1, sizes[rng.Below(4)], sizes[rng.Below(4)],
                               sizes[rng.Below(4)], rng.Below(2) == 1);
    const GemmTiling t = RandomBf16Tiling(rng, cs.k);
    KernelConfig config;
    auto plain = RunGemm(cs.desc, t, config);
    ASSERT_TRUE(plain.ok()) << plain.error().ToString();
    const std::vector<float> want = cs.c;
    std::vector<float> packed(PrePackedBFloats(cs.desc, 0, t), NAN);
    PrePackB(cs.desc, 0, t, packed.data());
    cs.desc.outputs[0].b_packed = packed.data();
    std::fill(cs.c.begin(), cs.c.end(), NAN);
    auto got = RunGemm(cs.desc, t, config);
    ASSERT_TRUE(got.ok()) << got.error().ToString();
    const std::string what = fmt::format("trial {}: {}x{}x{} tb={} {}", trial, cs.m, cs.n, cs.k,
                                         cs.trans_b, t.ToString());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(want[i], cs.c[i]) << what << " @" << i;
    // B's bytes: 4 per element from the f32 tensor, 2 from the bf16 panels.
    const int64_t b_reads_plain = plain->bytes_global_to_local - got->bytes_global_to_local;
    EXPECT_GT(b_reads_plain, 0) << what;
    EXPECT_EQ(got->bytes_local_to_global, plain->bytes_local_to_global) << what;
  }
}

TEST(GemmBf16, NamesAMicroTileWithoutABf16Kernel) {
  Rng rng(1);
  Bf16GemmCase cs = MakeCase(rng, 1, 8, 24, 16, false);
  GemmTiling t;
  t.mr = 4;
  t.nr = 24;
  t.precision = Precision::kBf16;
  auto r = RunGemm(cs.desc, t, KernelConfig{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("4x24 has no bf16 micro-kernel"), std::string::npos)
      << r.error().message();
}

TEST(GemmBf16, PortableAndVectorKernelsAgree) {
  Rng rng(5);
  for (auto [mr, nr] : Bf16MicroTileShapes()) {
    if (std::string(FindBf16MicroKernel(mr, nr)->isa) == "portable")
      GTEST_SKIP() << "no avx512_bf16 here: the portable kernel would be compared with itself";
    const int64_t kpairs = 19, lda = 2 * kpairs;
    std::vector<Bf16> a(mr * lda);
    alignas(64) static Bf16 bp[2 * 19 * 128];  // k-pairs x the widest nr
    ASSERT_LE(2 * kpairs * nr, static_cast<int64_t>(std::size(bp))) << mr << "x" << nr;
    for (Bf16& x : a) x = FloatToBf16(static_cast<float>(rng.Normal()));
    for (int64_t i = 0; i < 2 * kpairs * nr; ++i)
      bp[i] = FloatToBf16(static_cast<float>(rng.Normal()));
    for (bool accumulate : {true, false}) {
      std::vector<float> c1(mr * nr, 1.0f), c2(mr * nr, 1.0f);
      FindBf16MicroKernel(mr, nr)->fn(kpairs, a.data(), lda, bp, c1.data(), nr, accumulate);
      FindPortableBf16MicroKernel(mr, nr)->fn(kpairs, a.data(), lda, bp, c2.data(), nr, accumulate);
      for (int i = 0; i < mr * nr; ++i)
        ASSERT_NEAR(c1[i], c2[i], 1e-4) << mr << "x" << nr << " acc=" << accumulate << " @" << i;
    }
  }
}

}  // namespace
}  // namespace fusetune::kernels

namespace fusetune::kernels {
namespace {

// A packed in k-pairs (fn_packed_a, Winograd's V) gives the bits the
// row-major A gives, on every shape and both ISAs, with and without a
// carried copy.
TEST(GemmBf16, PackedAKernelsEqualTheRowMajorOnes) {
  Rng rng(8);
  for (auto [mr, nr] : Bf16MicroTileShapes())
    for (const Bf16MicroKernel* k :
         {FindBf16MicroKernel(mr, nr), FindPortableBf16MicroKernel(mr, nr)}) {
      const int64_t kpairs = 7, lda = 2 * kpairs;
      std::vector<Bf16> a(mr * lda), packed(mr * lda);
      alignas(64) static Bf16 bp[2 * 7 * 128];
      for (Bf16& x : a) x = FloatToBf16(static_cast<float>(rng.Normal()));
      for (int64_t i = 0; i < 2 * kpairs * nr; ++i)
        bp[i] = FloatToBf16(static_cast<float>(rng.Normal()));
      for (int i = 0; i < mr; ++i)
        for (int64_t p = 0; p < lda; ++p) packed[(p / 2 * mr + i) * 2 + p % 2] = a[i * lda + p];
      std::vector<float> src(40, 3.0f), dst(40, 0.0f);
      for (bool accumulate : {true, false}) {
        std::vector<float> c1(mr * nr, 1.0f), c2(mr * nr, 1.0f), c3(mr * nr, 1.0f);
        k->fn(kpairs, a.data(), lda, bp, c1.data(), nr, accumulate);
        k->fn_packed_a(kpairs, packed.data(), 0, bp, c2.data(), nr, accumulate);
        k->fn_packed_a_copy(kpairs, packed.data(), 0, bp, c3.data(), nr, accumulate, src.data(),
                            dst.data(), 40);
        ASSERT_EQ(c1, c2) << mr << "x" << nr << " " << k->isa;
        ASSERT_EQ(c1, c3) << mr << "x" << nr << " " << k->isa;
        ASSERT_EQ(dst, src) << "the carried copy";
      }
    }
}

// In place (Winograd rounds its f32 slivers so): pairs written at or below
// the first row give what a separate destination gets.
TEST(Bf16, InterleavesInPlace) {
  Rng rng(9);
  for (int64_t n : {1, 7, 14, 16, 17, 40}) {
    std::vector<float> rows(2 * n);
    for (float& f : rows) f = static_cast<float>(rng.Normal());
    std::vector<Bf16> want(2 * n);
    InterleaveToBf16Pairs(rows.data(), rows.data() + n, n, want.data());
    InterleaveToBf16Pairs(rows.data(), rows.data() + n, n, reinterpret_cast<Bf16*>(rows.data()));
    const Bf16* got = reinterpret_cast<const Bf16*>(rows.data());
    ASSERT_EQ(std::vector<Bf16>(got, got + 2 * n), want) << n;
  }
}

// Consecutive rows paired as InterleaveToBf16Pairs pairs two, odd counts
// ending in zeros, in place and below the rows (Winograd's V slivers).
TEST(Bf16, PairsConsecutiveRowsInPlace) {
  Rng rng(10);
  for (int64_t n : {1, 6, 7, 8, 14, 16, 20})
    for (int64_t rows : {1, 2, 5, 8}) {
      std::vector<float> src(rows * n + 8);
      for (float& f : src) f = static_cast<float>(rng.Normal());
      const int64_t pairs = (rows + 1) / 2;
      std::vector<Bf16> want(2 * pairs * n);
      for (int64_t q = 0; q < pairs; ++q)
        InterleaveToBf16Pairs(src.data() + 2 * q * n,
                              2 * q + 1 < rows ? src.data() + (2 * q + 1) * n : nullptr, n,
                              want.data() + 2 * q * n);
      std::vector<Bf16> apart(2 * pairs * n);
      PairConsecutiveRows(src.data(), rows, n, apart.data());
      ASSERT_EQ(apart, want) << n << " x " << rows;
      for (int64_t below : {0, 3}) {  // floats the words start below the rows
        std::vector<float> moved(below + src.size());
        std::copy(src.begin(), src.end(), moved.begin() + below);
        auto* dst = reinterpret_cast<Bf16*>(moved.data());
        PairConsecutiveRows(moved.data() + below, rows, n, dst);
        ASSERT_EQ(std::vector<Bf16>(dst, dst + 2 * pairs * n), want) << n << " x " << rows;
      }
    }
}

// The operands really are rounded: 1 + 2^-10 is 1 in bf16.
TEST(GemmBf16, RoundsTheOperands) {
  Rng rng(2);
  Bf16GemmCase cs = MakeCase(rng, 1, 1, 16, 1, false);
  cs.a[0] = 1.0f + std::ldexp(1.0f, -10);
  std::fill(cs.b.begin(), cs.b.end(), 1.0f);
  std::fill(cs.bias.begin(), cs.bias.end(), 0.0f);
  GemmTiling t;
  t.mr = 8;
  t.nr = 32;
  for (Precision p : {Precision::kF32, Precision::kBf16}) {
    t.precision = p;
    ASSERT_TRUE(RunGemm(cs.desc, t, KernelConfig{}).ok());
    EXPECT_EQ(cs.c[0], p == Precision::kBf16 ? 1.0f : cs.a[0]) << PrecisionName(p);
  }
}

}  // namespace
}  // namespace fusetune::kernels
