// GEMM with fused epilogues against the reference executor, on random shapes
// (edge sizes, primes, non-multiples of the micro-tile) and sampled tilings.
#include <gtest/gtest.h>

#include <iterator>

#include <fmt/format.h>

#include <cmath>

#include "common/rng.h"
#include "graph/reference_executor.h"
#include "graph/text_format.h"
#include "kernels/gemm.h"
#include "kernels/microkernel.h"

namespace fusetune::kernels {
namespace {

struct Problem {
  int64_t batch, m, n, k;
  bool trans_a, trans_b;
};

std::vector<float> RandomVector(int64_t n, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.Normal());
  return v;
}

// Reference: the same computation as an ONNX-style graph run by the oracle.
graph::Tensor Reference(const Problem& p, const std::vector<float>& a, const std::vector<float>& b,
                        const std::vector<float>& bias, const std::vector<float>& residual,
                        const std::string& act) {
  const std::string perm_a = p.trans_a ? "at = Transpose(a) {perm=[0, 2, 1]}" : "at = Identity(a)";
  const std::string perm_b = p.trans_b ? "bt = Transpose(b) {perm=[0, 2, 1]}" : "bt = Identity(b)";
  const std::string text = fmt::format(
      "graph g opset 20 {{ input a: f32[{}, {}, {}]  input b: f32[{}, {}, {}]  input bias: f32[{}] "
      " input r: f32[{}, {}, {}]\n"
      "{}  {}  mm = MatMul(at, bt)  s = Add(mm, bias)  y0 = Add(s, r)  y = {}\n output y }}",
      p.batch, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.batch, p.trans_b ? p.n : p.k,
      p.trans_b ? p.k : p.n, p.n, p.batch, p.m, p.n, perm_a, perm_b, act);
  auto g = graph::ParseGraphText(text);
  EXPECT_TRUE(g.ok()) << g.error().ToString();
  auto t = [](graph::Dims dims, const std::vector<float>& v) {
    return graph::Tensor::FromVector<float>(graph::DataType::kFloat32, dims, v);
  };
  graph::TensorMap feeds{{"a", t({p.batch, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k}, a)},
                         {"b", t({p.batch, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n}, b)},
                         {"bias", t({p.n}, bias)},
                         {"r", t({p.batch, p.m, p.n}, residual)}};
  auto r = graph::RunReference(*g, feeds);
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  return r->outputs.at("y");
}

GemmDesc Describe(const Problem& p, const std::vector<float>& a, const std::vector<float>& b,
                  std::vector<float>& c) {
  GemmDesc d;
  d.batch = p.batch;
  d.m = p.m;
  d.k = p.k;
  d.a = a.data();
  d.a_batch_stride = p.m * p.k;
  d.a_row_stride = p.trans_a ? 1 : p.k;
  d.a_col_stride = p.trans_a ? p.m : 1;
  GemmOutput& out = d.outputs.emplace_back();
  out.n = p.n;
  out.b = b.data();
  out.b_batch_stride = p.k * p.n;
  out.b_row_stride = p.trans_b ? 1 : p.n;
  out.b_col_stride = p.trans_b ? p.k : 1;
  out.c = c.data();
  out.c_row_stride = p.n;
  out.c_batch_stride = p.m * p.n;
  return d;
}

GemmTiling RandomTiling(Rng& rng, const Problem& p) {
  const auto shapes = MicroTileShapes();
  GemmTiling t;
  const auto [mr, nr] = shapes[rng.Below(shapes.size())];
  t.mr = mr;
  t.nr = nr;
  t.mc = mr * rng.Between(1, 8);
  t.nc = nr * rng.Between(1, 6);
  t.kc = rng.Between(1, std::max<int64_t>(1, p.k + 3));
  t.order = rng.Below(2) ? LoopOrder::kMN : LoopOrder::kNM;
  t.split = static_cast<ParallelSplit>(rng.Below(3));
  t.double_buffer = rng.Below(2) == 1;
  t.refill = !t.double_buffer && rng.Below(2) == 1;
  return t;
}

TEST(Gemm, MatchesReferenceOnRandomShapesAndTilings) {
  Rng rng(20261121);
  const int64_t sizes[] = {1, 2, 7, 13, 16, 31, 33, 64, 97};
  const char* acts[] = {"Relu(y0)", "Gelu(y0)", "Gelu(y0) {approximate=\"tanh\"}", "Sigmoid(y0)",
                        "Identity(y0)"};
  const EpilogueKind kinds[] = {EpilogueKind::kRelu, EpilogueKind::kGeluErf,
                                EpilogueKind::kGeluTanh, EpilogueKind::kSigmoid,
                                EpilogueKind::kScale};
  for (int trial = 0; trial < 40; ++trial) {
    Problem p{rng.Between(1, 2),   sizes[rng.Below(9)], sizes[rng.Below(9)],
              sizes[rng.Below(9)], rng.Below(2) == 1,   rng.Below(2) == 1};
    const int act = static_cast<int>(rng.Below(5));
    auto a = RandomVector(p.batch * p.m * p.k, rng), b = RandomVector(p.batch * p.k * p.n, rng);
    auto bias = RandomVector(p.n, rng), residual = RandomVector(p.batch * p.m * p.n, rng);
    std::vector<float> c(p.batch * p.m * p.n, NAN);
    GemmDesc d = Describe(p, a, b, c);
    d.outputs[0].epilogue = {EpilogueOp::Bias(bias.data()),
                             EpilogueOp::Residual(residual.data(), p.n, p.m * p.n),
                             EpilogueOp::Act(kinds[act])};
    const GemmTiling tiling = RandomTiling(rng, p);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    auto stats = RunGemm(d, tiling, config);
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    const graph::Tensor want = Reference(p, a, b, bias, residual, acts[act]);
    double err = 0, scale = 1e-6;
    for (int64_t i = 0; i < want.numel(); ++i) {
      err = std::max(err, std::abs(double(c[i]) - want.data<float>()[i]));
      scale = std::max(scale, std::abs(double(want.data<float>()[i])));
    }
    EXPECT_LE(err / scale, 2e-5) << "trial " << trial << " " << p.batch << "x" << p.m << "x" << p.n
                                 << "x" << p.k << " ta=" << p.trans_a << " tb=" << p.trans_b << " "
                                 << tiling.ToString();
    EXPECT_EQ(stats->bytes_local_to_global, 4 * p.batch * p.m * p.n);
  }
}

// A B pre-packed for the tiling is the same B: bit-identical results and the
// same counted traffic, on edge shapes (partial slivers, kc and nc not
// dividing K and N), transposed B, and batches sharing one B.
TEST(Gemm, PrePackedBGivesIdenticalResultsAndTraffic) {
  Rng rng(20261123);
  const int64_t sizes[] = {1, 7, 16, 33, 97};
  for (int trial = 0; trial < 30; ++trial) {
    Problem p{rng.Between(1, 2),   sizes[rng.Below(5)], sizes[rng.Below(5)],
              sizes[rng.Below(5)], rng.Below(2) == 1,   rng.Below(2) == 1};
    auto a = RandomVector(p.batch * p.m * p.k, rng), b = RandomVector(p.k * p.n, rng);
    auto bias = RandomVector(p.n, rng);
    std::vector<float> plain(p.batch * p.m * p.n, NAN), packed_c(plain);
    GemmDesc d = Describe(p, a, b, plain);
    d.outputs[0].b_batch_stride = 0;  // one B for every batch, as weights are
    d.outputs[0].epilogue = {EpilogueOp::Bias(bias.data()), EpilogueOp::Act(EpilogueKind::kRelu)};
    const GemmTiling tiling = RandomTiling(rng, p);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    auto want = RunGemm(d, tiling, config);
    ASSERT_TRUE(want.ok()) << want.error().ToString();

    std::vector<float> packed(PrePackedBFloats(d, 0, tiling), NAN);
    PrePackB(d, 0, tiling, packed.data());
    d.outputs[0].b_packed = packed.data();
    d.outputs[0].c = packed_c.data();
    auto got = RunGemm(d, tiling, config);
    ASSERT_TRUE(got.ok()) << got.error().ToString();
    const std::string what = fmt::format("trial {}: {}x{}x{}x{} tb={} {}", trial, p.batch, p.m, p.n,
                                         p.k, p.trans_b, tiling.ToString());
    for (size_t i = 0; i < plain.size(); ++i) ASSERT_EQ(plain[i], packed_c[i]) << what << " @" << i;
    EXPECT_EQ(got->bytes_global_to_local, want->bytes_global_to_local) << what;
    EXPECT_EQ(got->bytes_local_to_global, want->bytes_local_to_global) << what;
  }
}

// Refilling B in place (GemmTiling::refill) copies the same panels at other
// times: bit-identical results and the same counted traffic as copying each
// step's B before it, f32 and bf16, over steps of unequal depth (kc not
// dividing K: a deeper step after a shallower one is not refilled), edge
// columns, 1-3 threads and both loop orders; and it excludes double buffering.
TEST(Gemm, RefillingBInPlaceIsCopyingIt) {
  Rng rng(20261204);
  for (int trial = 0; trial < 24; ++trial) {
    const Problem p{1,     rng.Between(1, 70), rng.Between(33, 300), rng.Between(1, 90),
                    false, rng.Below(2) == 1};
    auto a = RandomVector(p.m * p.k, rng), b = RandomVector(p.k * p.n, rng);
    auto bias = RandomVector(p.n, rng);
    std::vector<float> copied(p.m * p.n, NAN), refilled(copied);
    GemmDesc d = Describe(p, a, b, copied);
    d.outputs[0].epilogue = {EpilogueOp::Bias(bias.data()),
                             EpilogueOp::Act(EpilogueKind::kGeluErf)};
    GemmTiling t;
    t.mr = 8;
    t.nr = 32;
    t.mc = 8 * rng.Between(1, 4);
    t.nc = 32 * rng.Between(2, 4);
    t.kc = rng.Between(1, p.k + 3);
    t.order = rng.Below(2) ? LoopOrder::kMN : LoopOrder::kNM;
    t.split = static_cast<ParallelSplit>(rng.Below(3));
    t.precision = rng.Below(2) ? Precision::kBf16 : Precision::kF32;
    std::vector<float> packed(PrePackedBFloats(d, 0, t), NAN);
    PrePackB(d, 0, t, packed.data());
    d.outputs[0].b_packed = packed.data();
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    auto want = RunGemm(d, t, config);
    t.refill = true;
    d.outputs[0].c = refilled.data();
    auto got = RunGemm(d, t, config);
    ASSERT_TRUE(want.ok() && got.ok());
    const std::string what = fmt::format("trial {}: {}x{}x{} tb={} {} threads={}", trial, p.m, p.n,
                                         p.k, p.trans_b, t.ToString(), config.threads);
    for (size_t i = 0; i < copied.size(); ++i)
      ASSERT_EQ(copied[i], refilled[i]) << what << " @" << i;
    EXPECT_EQ(got->bytes_global_to_local, want->bytes_global_to_local) << what;
    EXPECT_EQ(got->bytes_local_to_global, want->bytes_local_to_global) << what;
  }
  const Problem p{1, 8, 64, 8, false, false};
  std::vector<float> a(64, 1.0f), b(512, 1.0f), c(512);
  GemmTiling t;
  t.refill = t.double_buffer = true;
  auto r = RunGemm(Describe(p, a, b, c), t, KernelConfig{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("tiling.refill"), std::string::npos) << r.error().message();
}

TEST(Gemm, PrePackedBNeedsAnUnbatchedB) {
  const Problem p{2, 8, 32, 8, false, false};
  std::vector<float> a(2 * 8 * 8, 1.0f), b(2 * 8 * 32, 1.0f), c(2 * 8 * 32), packed(4096);
  GemmDesc d = Describe(p, a, b, c);
  d.outputs[0].b_packed = packed.data();  // b_batch_stride is k * n
  auto r = RunGemm(d, GemmTiling{}, KernelConfig{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().ToString().find("b_packed"), std::string::npos) << r.error().ToString();
}

TEST(Gemm, PortableAndVectorKernelsAgree) {
  Rng rng(3);
  for (auto [mr, nr] : MicroTileShapes()) {
    const int64_t kc = 37;
    auto ap = RandomVector(kc * mr, rng), bp = RandomVector(kc * nr, rng);
    std::vector<float> c1(mr * nr), c2(mr * nr);
    alignas(64) static float bp_aligned[37 * 128];  // kc x the widest nr
    ASSERT_LE(bp.size(), std::size(bp_aligned)) << mr << "x" << nr;
    std::copy(bp.begin(), bp.end(), bp_aligned);
    FindMicroKernel(mr, nr)->fn(kc, ap.data(), bp_aligned, c1.data(), nr, false);
    FindPortableMicroKernel(mr, nr)->fn(kc, ap.data(), bp_aligned, c2.data(), nr, false);
    for (int i = 0; i < mr * nr; ++i) EXPECT_NEAR(c1[i], c2[i], 1e-4) << mr << "x" << nr;
  }
}

// The copy-carrying entry computes what fn_rows computes and copies exactly
// the floats asked for: none, a partial vector, fewer vectors than k
// iterations, and more (the rest after the loop).
TEST(Gemm, CopyCarryingMicroKernelsComputeAndCopyExactly) {
  Rng rng(11);
  for (auto [mr, nr] : MicroTileShapes())
    for (const MicroKernel* mk : {FindMicroKernel(mr, nr), FindPortableMicroKernel(mr, nr)}) {
      const int64_t kc = 37, lda = kc + 3;
      auto a = RandomVector(mr * lda, rng);
      alignas(64) static float bp[37 * 128];  // kc x the widest nr
      ASSERT_LE(kc * nr, static_cast<int64_t>(std::size(bp))) << mr << "x" << nr;
      for (int64_t i = 0; i < kc * nr; ++i) bp[i] = static_cast<float>(rng.Normal());
      for (int64_t floats : {0, 5, 16, 100, 37 * 16 + 9, 3000}) {
        auto src = RandomVector(floats + 1, rng);
        std::vector<float> dst(floats + 1, -7.0f), want(mr * nr, 1.0f), got(want);
        mk->fn_rows(kc, a.data(), lda, bp, want.data(), nr, true);
        mk->fn_rows_copy(kc, a.data(), lda, bp, got.data(), nr, true, src.data() + 1, dst.data(),
                         floats);
        EXPECT_EQ(got, want) << mk->isa << " " << mr << "x" << nr << " copying " << floats;
        for (int64_t i = 0; i < floats; ++i) ASSERT_EQ(dst[i], src[i + 1]) << i << " of " << floats;
        EXPECT_EQ(dst[floats], -7.0f) << "wrote past the copy";
        // The packed-A entry (Winograd's weight panels): A as kc x mr slivers.
        std::vector<float> ap(kc * mr);
        for (int64_t p = 0; p < kc; ++p)
          for (int i = 0; i < mr; ++i) ap[p * mr + i] = a[i * lda + p];
        std::vector<float> packed_want(mr * nr, 1.0f), packed_got(packed_want);
        std::vector<float> packed_dst(floats + 1, -7.0f);
        mk->fn(kc, ap.data(), bp, packed_want.data(), nr, true);
        mk->fn_copy(kc, ap.data(), bp, packed_got.data(), nr, true, src.data() + 1,
                    packed_dst.data(), floats);
        EXPECT_EQ(packed_got, packed_want) << mk->isa << " packed " << mr << "x" << nr;
        for (int64_t i = 0; i < floats; ++i) ASSERT_EQ(packed_dst[i], src[i + 1]) << i;
        EXPECT_EQ(packed_dst[floats], -7.0f) << "packed: wrote past the copy";
      }
    }
}

TEST(Gemm, TrafficIsCountedExactlyAndDependsOnLoopOrder) {
  const Problem p{1, 64, 96, 32, false, false};
  Rng rng(5);
  auto a = RandomVector(p.m * p.k, rng), b = RandomVector(p.k * p.n, rng);
  std::vector<float> c(p.m * p.n);
  GemmDesc d = Describe(p, a, b, c);
  GemmTiling t;
  t.mr = 8;
  t.nr = 32;
  t.mc = 16;
  t.nc = 32;
  t.kc = 32;  // = K: each block is packed at most once in a row
  KernelConfig one;
  one.threads = 1;
  t.order = LoopOrder::kMN;  // A once (64x32), B once per A block (4 blocks x 32x96)
  auto mn = RunGemm(d, t, one);
  ASSERT_TRUE(mn.ok());
  EXPECT_EQ(mn->bytes_global_to_local, 4 * (64 * 32 + 4 * 32 * 96));
  t.order = LoopOrder::kNM;  // B once, A once per B block (3 blocks)
  auto nm = RunGemm(d, t, one);
  ASSERT_TRUE(nm.ok());
  EXPECT_EQ(nm->bytes_global_to_local, 4 * (32 * 96 + 3 * 64 * 32));
  EXPECT_EQ(nm->bytes_local_to_global, 4 * 64 * 96);
  // Copy-only moves the same bytes; compute-only moves none.
  auto copy = RunGemm(d, t, one, RunMode::kCopyOnly);
  auto compute = RunGemm(d, t, one, RunMode::kComputeOnly);
  ASSERT_TRUE(copy.ok() && compute.ok());
  EXPECT_EQ(copy->bytes_global_to_local, nm->bytes_global_to_local);
  EXPECT_EQ(compute->bytes_global_to_local + compute->bytes_local_to_global, 0);
}

TEST(Gemm, InvalidTilingsNameTheField) {
  std::vector<float> a(16), b(16), c(16);
  GemmDesc d = Describe({1, 4, 4, 4, false, false}, a, b, c);
  KernelConfig config;
  GemmTiling t;
  t.nr = 20;
  auto r = RunGemm(d, t, config);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("tiling.mr x tiling.nr: 8x20"), std::string::npos)
      << r.error().message();
  t = GemmTiling();
  t.kc = 0;
  EXPECT_NE(RunGemm(d, t, config).error().message().find("tiling.kc"), std::string::npos);
  t = GemmTiling();
  t.mc = 4096;
  t.nc = 4096;
  config.local_buffer_bytes = 1 << 20;
  auto big = RunGemm(d, t, config);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message().find("local buffer"), std::string::npos) << big.error().message();
  d.outputs[0].epilogue = {EpilogueOp::Bias(nullptr)};
  EXPECT_NE(RunGemm(d, GemmTiling(), KernelConfig())
                .error()
                .message()
                .find("outputs[0].epilogue[0] (bias_add)"),
            std::string::npos);
}

TEST(Epilogue, FastErfIsAccurate) {
  for (float x = -6; x <= 6; x += 0.001f) EXPECT_NEAR(FastErf(x), std::erf(x), 5e-7) << x;
}

TEST(Epilogue, FastExpIsAccurate) {
  for (float x = -80; x <= 80; x += 0.0137f) EXPECT_NEAR(FastExp(x) / std::exp(x), 1.0f, 4e-7) << x;
  EXPECT_EQ(FastExp(-1000.0f) >= 0.0f, true);
  EXPECT_TRUE(std::isfinite(FastExp(1000.0f)));
}

}  // namespace
}  // namespace fusetune::kernels
