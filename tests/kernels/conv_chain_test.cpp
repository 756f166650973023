// The conv-chain template (1x1 expand -> depthwise -> 1x1 project, and
// depthwise -> pointwise) against the unfused definition in double:
// MobileNetV2's block shapes scaled down, strides, padded micro-tiles,
// tilings and threads, epilogues, pre-packed and not; run modes, the
// estimate against what a run counts, the work ratio, and its errors; in
// bf16, within the bf16 GEMM's bound carried through the chain's stages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/conv_chain.h"
#include "kernels/estimate.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_bf16.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::MakeShape;
using testing::ReferenceConv;

constexpr double kChainTolerance = 1e-5;

struct Block {
  int64_t batch = 1, c = 16, h = 14, w = 14, e = 48, out = 16, k = 3, stride = 1;
  bool expand = true, residual = false;
};

// Random weights and inputs of a block and the unfused result in double.
struct Problem {
  ConvChainDesc d;
  std::vector<float> x, we, be, wd, bd, wp, bp, r, y;
  std::vector<double> want;
  // The stages' shapes and exact activated outputs (for the bf16 bound).
  ConvShape expand_shape, dw_shape, project_shape;
  std::vector<double> hidden, mid;
};

std::vector<float> Random(Rng& rng, int64_t n) {
  std::vector<float> v(n);
  for (float& f : v) f = static_cast<float>(rng.Normal());
  return v;
}

void Relu6(std::vector<double>* v) {
  for (double& x : *v) x = std::clamp(x, 0.0, 6.0);
}

std::vector<float> ToFloat(const std::vector<double>& v) { return {v.begin(), v.end()}; }

Problem MakeProblem(const Block& b, uint64_t seed = 3) {
  Rng rng(seed);
  Problem p;
  const int64_t e = b.expand ? b.e : b.c;
  const ConvShape expand = MakeShape(b.batch, b.c, b.h, b.w, e, 1);
  const ConvShape dw = MakeShape(b.batch, e, b.h, b.w, e, b.k, b.stride, b.k / 2, 1, e);
  const ConvShape project = MakeShape(b.batch, e, dw.out_h, dw.out_w, b.out, 1);
  p.x = Random(rng, b.batch * b.c * b.h * b.w);
  p.we = Random(rng, e * b.c);
  p.be = Random(rng, e);
  p.wd = Random(rng, e * b.k * b.k);
  p.bd = Random(rng, e);
  p.wp = Random(rng, b.out * e);
  p.bp = Random(rng, b.out);
  std::vector<double> hidden;
  if (b.expand) {
    hidden = ReferenceConv(expand, p.x, p.we, p.be);
    Relu6(&hidden);
  } else {
    hidden.assign(p.x.begin(), p.x.end());
  }
  std::vector<double> mid = ReferenceConv(dw, ToFloat(hidden), p.wd, p.bd);
  Relu6(&mid);
  p.want = ReferenceConv(project, ToFloat(mid), p.wp, p.bp);
  p.expand_shape = expand;
  p.dw_shape = dw;
  p.project_shape = project;
  p.hidden = hidden;
  p.mid = mid;
  p.y.assign(p.want.size(), -1.0f);
  if (b.residual) {
    p.r = Random(rng, static_cast<int64_t>(p.want.size()));
    for (size_t i = 0; i < p.want.size(); ++i) p.want[i] += p.r[i];
  }
  ConvChainDesc& d = p.d;
  d.depthwise = dw;
  d.in_channels = b.c;
  d.out_channels = b.out;
  d.expand = b.expand;
  d.x = p.x.data();
  if (b.expand) {
    d.expand_w = p.we.data();
    d.expand_bias = p.be.data();
    d.expand_act.push_back(EpilogueOp::Clip(0.0f, 6.0f));
  }
  d.dw_w = p.wd.data();
  d.dw_bias = p.bd.data();
  d.dw_act.push_back(EpilogueOp::Clip(0.0f, 6.0f));
  d.project_w = p.wp.data();
  d.project_bias = p.bp.data();
  if (b.residual)
    d.epilogue.push_back(
        EpilogueOp::Residual(p.r.data(), project.pixels(), b.out * project.pixels()));
  d.y = p.y.data();
  return p;
}

double MaxRelError(const Problem& p) {
  double err = 0, scale = 1e-6;
  for (size_t i = 0; i < p.want.size(); ++i) {
    err = std::max(err, std::abs(double(p.y[i]) - p.want[i]));
    scale = std::max(scale, std::abs(p.want[i]));
  }
  return err / scale;
}

std::vector<float> Abs(const std::vector<float>& v) {
  std::vector<float> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::abs(v[i]);
  return a;
}
std::vector<float> Abs(const std::vector<double>& v) {
  std::vector<float> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = static_cast<float>(std::abs(v[i]));
  return a;
}

// The bound a bf16 chain's output is held to: the bf16 GEMM's for each
// product, (2u + u^2 + K 2^-23) sum |w||x| with u = 2^-8 (docs/PRECISION.md),
// carried through the stages: the activations (ReLU6) do not grow an error,
// the depthwise stage (f32) multiplies it by |w_dw| and adds its own f32
// roundings, the project multiplies it by |w_p| (rounded to bf16 too).
std::vector<double> Bf16ChainBound(const Problem& p) {
  const double u = std::ldexp(1.0, -8), f32 = 4 * std::ldexp(1.0, -24);
  auto per_product = [&](int64_t k) {
    return 2 * u + u * u + static_cast<double>(k) * std::ldexp(1.0, -23);
  };
  const ConvShape& dw = p.dw_shape;
  std::vector<double> hidden_err(p.hidden.size(), 0.0);
  if (p.d.expand) {
    const std::vector<double> mag = ReferenceConv(p.expand_shape, Abs(p.x), Abs(p.we), {});
    const int64_t pixels = p.expand_shape.pixels();
    for (size_t i = 0; i < mag.size(); ++i)
      hidden_err[i] = per_product(p.d.in_channels) * mag[i] +
                      f32 * (mag[i] + std::abs(p.be[i / pixels % dw.in_channels]));
  }
  const double dw_f32 = static_cast<double>(dw.kernel_h * dw.kernel_w + 2) * std::ldexp(1.0, -24);
  std::vector<double> mid_err = ReferenceConv(dw, Abs(hidden_err), Abs(p.wd), {});
  const std::vector<double> dw_mag = ReferenceConv(dw, Abs(p.hidden), Abs(p.wd), {});
  for (size_t i = 0; i < mid_err.size(); ++i)
    mid_err[i] += dw_f32 * (dw_mag[i] + std::abs(p.bd[i / dw.pixels() % dw.out_channels]));
  const double per = per_product(dw.out_channels);
  const std::vector<double> carried = ReferenceConv(p.project_shape, Abs(mid_err), Abs(p.wp), {});
  const std::vector<double> mag = ReferenceConv(p.project_shape, Abs(p.mid), Abs(p.wp), {});
  std::vector<double> bound(mag.size());
  const int64_t pixels = p.project_shape.pixels();
  for (size_t i = 0; i < bound.size(); ++i) {
    const double added =
        std::abs(p.bp[i / pixels % p.d.out_channels]) + (p.r.empty() ? 0.0 : std::abs(p.r[i]));
    bound[i] = 1.001 * ((1 + per) * carried[i] + per * mag[i] + f32 * (mag[i] + added)) + 1e-30;
  }
  return bound;
}

ConvChainTiling ChainTiling(int64_t rows, int64_t e_block, std::pair<int, int> micro = {0, 0},
                            bool split = false) {
  ConvChainTiling t;
  t.rows = rows;
  t.e_block = e_block;
  t.split_expanded = split;
  if (micro.first > 0)
    std::tie(t.mr, t.nr) = micro;
  else
    std::tie(t.mr, t.nr) = MicroTileShapes().front();
  return t;
}

// An e_block near `wanted` that the default micro-tile's mr divides (mr is 8
// with AVX-512 and 6 with AVX2 only).
int64_t EBlockNear(int64_t wanted) {
  const int64_t mr = MicroTileShapes().front().first;
  return (wanted + mr - 1) / mr * mr;
}

// Runs `t` on `p` (its weights pre-packed into `packed` when asked); false
// (and a failed test) on a kernel error.
bool RunChain(Problem& p, const ConvChainTiling& t, int threads, bool prepack,
              std::vector<float>* packed) {
  if (prepack) {
    packed->resize(PrePackedConvChainWeightFloats(p.d, t));
    PrePackConvChainWeights(p.d, t, packed->data());
    p.d.w_packed = packed->data();
  }
  KernelConfig config;
  config.threads = threads;
  const Result<KernelStats> stats = RunConvChain(p.d, t, config);
  EXPECT_TRUE(stats.ok()) << (stats.ok() ? "" : stats.error().message()) << " " << t.ToString();
  return stats.ok();
}

// Runs and compares; a kernel error fails the test.
double RunBlock(const Block& b, const ConvChainTiling& t, int threads = 2, bool prepack = true) {
  Problem p = MakeProblem(b);
  std::vector<float> packed;
  return RunChain(p, t, threads, prepack, &packed) ? MaxRelError(p) : 1e9;
}

TEST(ConvChain, InvertedResidualsScaledDown) {
  const Block blocks[] = {
      {1, 16, 20, 20, 96, 24, 3, 2, true, false},  // block 2: expand, stride 2
      {1, 24, 14, 14, 144, 24, 3, 1, true, true},  // block 3: residual
      {1, 32, 7, 7, 192, 64, 3, 2, true, false},   {1, 96, 9, 9, 576, 96, 3, 1, true, true},
      {2, 8, 11, 13, 48, 16, 3, 1, true, true},     // batch, odd sizes
      {1, 32, 20, 20, 32, 16, 3, 1, false, false},  // block 1: depthwise -> pointwise
      {1, 12, 9, 31, 12, 20, 5, 2, false, false},   // 5x5, stride 2, no expand
  };
  const int64_t rows[] = {1, 3, 100};
  for (const Block& b : blocks)
    for (int64_t r : rows)
      for (int64_t eb : {EBlockNear(16), EBlockNear(48)})
        for (bool split : {false, true})
          EXPECT_LT(RunBlock(b, ChainTiling(r, eb, {0, 0}, split)), kChainTolerance)
              << "c=" << b.c << " e=" << b.e << " out=" << b.out << " rows=" << r
              << " e_block=" << eb << " split=" << split;
}

TEST(ConvChain, EveryMicroTileThreadsAndUnpackedWeights) {
  const Block b{1, 24, 10, 23, 72, 28, 3, 1, true, true};
  for (auto [mr, nr] : MicroTileShapes()) {
    const int64_t eb = static_cast<int64_t>(mr) * 3;  // 72 is not a multiple of every block
    for (int threads : {1, 2, 3})
      for (bool split : {false, true})
        EXPECT_LT(RunBlock(b, ChainTiling(2, eb, {mr, nr}, split), threads), kChainTolerance)
            << mr << "x" << nr << " threads " << threads << " split " << split;
    EXPECT_LT(RunBlock(b, ChainTiling(4, eb, {mr, nr}), 2, /*prepack=*/false), kChainTolerance);
  }
}

// ReLU6 written as clamps run in one pass with the bias (ReLU then Clip) and
// as ops that are not one clamp (a Clip then a scale by 1, run as passes
// over the block) gives the same output: both paths against one reference.
TEST(ConvChain, ActivationsAsOneClampOrAsPasses) {
  const Block blocks[] = {{1, 16, 20, 20, 96, 24, 3, 2, true, false},
                          {1, 24, 14, 14, 48, 24, 3, 1, true, true}};
  const std::vector<EpilogueOp> folded = {EpilogueOp::Act(EpilogueKind::kRelu),
                                          EpilogueOp::Clip(-1.0f, 6.0f)};
  const std::vector<EpilogueOp> passes = {EpilogueOp::Clip(0.0f, 6.0f), EpilogueOp::Scale(1.0f)};
  for (const Block& b : blocks)
    for (const auto& acts : {folded, passes})
      for (bool split : {false, true}) {
        Problem p = MakeProblem(b);
        p.d.expand_act = acts;
        p.d.dw_act = acts;
        std::vector<float> packed;
        ASSERT_TRUE(RunChain(p, ChainTiling(3, EBlockNear(16), {0, 0}, split), 2, true, &packed));
        EXPECT_LT(MaxRelError(p), kChainTolerance)
            << "ops " << acts.size() << " " << EpilogueKindName(acts[0].kind) << " split " << split;
      }
}

// The largest ratio of a bf16 run's error to Bf16ChainBound (<= 1 passes).
double Bf16BoundRatio(const Block& b, const ConvChainTiling& tiling, int threads = 2,
                      bool prepack = true) {
  ConvChainTiling t = tiling;
  t.precision = Precision::kBf16;
  Problem p = MakeProblem(b, 5);
  std::vector<float> packed;
  if (!RunChain(p, t, threads, prepack, &packed)) return 1e9;
  const std::vector<double> bound = Bf16ChainBound(p);
  double worst = 0;
  for (size_t i = 0; i < bound.size(); ++i)
    worst = std::max(worst, std::abs(double(p.y[i]) - p.want[i]) / bound[i]);
  return worst;
}

TEST(ConvChainBf16, InvertedResidualsWithinTheBound) {
  const Block blocks[] = {
      {1, 16, 20, 20, 96, 24, 3, 2, true, false}, {1, 24, 14, 14, 144, 24, 3, 1, true, true},
      {1, 15, 9, 11, 50, 21, 3, 1, true, true},  // odd C, C', E
      {2, 8, 11, 13, 48, 16, 3, 1, true, true},   {1, 32, 20, 20, 32, 16, 3, 1, false, false},
      {1, 13, 9, 31, 13, 20, 5, 2, false, false},  // no expand, odd channels
  };
  for (const Block& b : blocks)
    for (int64_t r : {1, 3, 100})
      for (int64_t eb : {EBlockNear(16), EBlockNear(48)})
        for (bool split : {false, true}) {
          const double ratio = Bf16BoundRatio(b, ChainTiling(r, eb, {0, 0}, split));
          EXPECT_LE(ratio, 1.0) << "c=" << b.c << " e=" << b.e << " out=" << b.out << " rows=" << r
                                << " e_block=" << eb << " split=" << split;
        }
}

TEST(ConvChainBf16, RoundsTheProductsTheOutputsDifferFromF32s) {
  const Block b{1, 24, 14, 14, 144, 24, 3, 1, true, true};
  ConvChainTiling t = ChainTiling(3, 48, {0, 0}, false);
  Problem f32 = MakeProblem(b, 5), bf16 = MakeProblem(b, 5);
  std::vector<float> f32_packed, bf16_packed;
  ASSERT_TRUE(RunChain(f32, t, 2, true, &f32_packed));
  t.precision = Precision::kBf16;
  ASSERT_TRUE(RunChain(bf16, t, 2, true, &bf16_packed));
  EXPECT_NE(f32.y, bf16.y);
}

TEST(ConvChainBf16, EveryBf16MicroTileThreadsAndUnpackedWeights) {
  const Block b{1, 23, 10, 23, 74, 28, 3, 1, true, true};
  for (auto [mr, nr] : Bf16MicroTileShapes()) {
    if (IsThinMicroTile(mr, nr)) continue;
    const int64_t eb = static_cast<int64_t>(mr) * 2;  // even; 74 is not a multiple of every block
    for (int threads : {1, 2, 3})
      for (bool split : {false, true})
        EXPECT_LE(Bf16BoundRatio(b, ChainTiling(2, eb, {mr, nr}, split), threads), 1.0)
            << mr << "x" << nr << " threads " << threads << " split " << split;
    EXPECT_LE(Bf16BoundRatio(b, ChainTiling(4, eb, {mr, nr}), 2, /*prepack=*/false), 1.0);
  }
}

TEST(ConvChainBf16, HalvesTheWeightsBytesAndTheLocalBuffer) {
  Problem p = MakeProblem(Block{1, 24, 14, 14, 144, 24, 3, 1, true, true});
  ConvChainTiling f32 = ChainTiling(2, 48), bf16 = f32;
  bf16.precision = Precision::kBf16;
  EXPECT_EQ(PrePackedConvChainWeightFloats(p.d, bf16),
            PrePackedConvChainWeightFloats(p.d, f32) / 2);  // even rows: exactly half
  EXPECT_LT(ConvChainLocalBytes(p.d, bf16), ConvChainLocalBytes(p.d, f32));
  const TilingEstimate a = EstimateConvChain(p.d, f32, 2), b = EstimateConvChain(p.d, bf16, 2);
  EXPECT_LT(b.bytes_in, a.bytes_in);
  EXPECT_EQ(b.bytes_out, a.bytes_out);
  EXPECT_EQ(bf16.ToString(), f32.ToString() + " bf16");
}

TEST(ConvChain, RunModesCountAlikeAndTheEstimateMatches) {
  for (int variant = 0; variant < 8; ++variant) {
    const bool expand = variant % 2 == 0, split = variant % 4 >= 2, bf16 = variant >= 4;
    Block b{1, 16, 12, 12, 48, 24, 3, 2, expand, true};
    if (!expand) b.e = b.c;
    ConvChainTiling t = ChainTiling(2, EBlockNear(16), {0, 0}, split);
    if (bf16) t.precision = Precision::kBf16;
    Problem p = MakeProblem(b);
    KernelConfig config;
    const Result<KernelStats> full = RunConvChain(p.d, t, config, RunMode::kFull);
    testing::ExpectModeCountsAlike(full, RunConvChain(p.d, t, config, RunMode::kCopyOnly),
                                   RunConvChain(p.d, t, config, RunMode::kComputeOnly));
    ASSERT_TRUE(full.ok());
    const TilingEstimate e = EstimateConvChain(p.d, t, config.threads);
    EXPECT_DOUBLE_EQ(e.bytes_in, static_cast<double>(full->bytes_global_to_local));
    EXPECT_DOUBLE_EQ(e.bytes_out, static_cast<double>(full->bytes_local_to_global));
    EXPECT_EQ(e.tiles, full->tiles);
    EXPECT_EQ(e.local_bytes, ConvChainLocalBytes(p.d, t));
  }
}

TEST(ConvChain, WorkRatioCountsTheRecomputedHalo) {
  Problem p = MakeProblem(Block{1, 16, 16, 16, 64, 16, 3, 1, true, false});
  EXPECT_DOUBLE_EQ(ConvChainWorkRatio(p.d, ChainTiling(16, 16)), 1.0);  // one band: no halo
  const double two = ConvChainWorkRatio(p.d, ChainTiling(8, 16));
  const double one = ConvChainWorkRatio(p.d, ChainTiling(1, 16));
  EXPECT_GT(two, 1.0);
  EXPECT_GT(one, two);  // bands of one row expand three rows each
  Problem dw = MakeProblem(Block{1, 16, 16, 16, 16, 16, 3, 1, false, false});
  EXPECT_DOUBLE_EQ(ConvChainWorkRatio(dw.d, ChainTiling(1, 16)), 1.0);  // nothing to recompute
}

TEST(ConvChain, ErrorsNameWhatIsWrong) {
  Problem p = MakeProblem(Block{});
  KernelConfig config;
  auto message = [&](const ConvChainDesc& d, const ConvChainTiling& t) {
    const Status s = ValidateConvChain(d, t, config);
    return s.ok() ? std::string("ok") : s.error().message();
  };
  const auto [mr, nr] = MicroTileShapes().front();
  EXPECT_NE(message(p.d, ChainTiling(2, mr + 1)).find("multiple of mr"), std::string::npos);
  EXPECT_NE(message(p.d, ChainTiling(0, mr)).find("positive"), std::string::npos);
  ConvChainTiling odd = ChainTiling(2, 48);
  odd.nr = 5;
  EXPECT_NE(message(p.d, odd).find("micro-tile"), std::string::npos);
  KernelConfig tiny;
  tiny.local_buffer_bytes = 4096;
  EXPECT_FALSE(ValidateConvChain(p.d, ChainTiling(100, 48), tiny).ok());
  EXPECT_FALSE(ConvChainTilingFits(p.d, ChainTiling(100, 48), tiny));

  ConvChainDesc bad = p.d;
  bad.depthwise.groups = 1;
  EXPECT_NE(message(bad, ChainTiling(2, 48)).find("groups"), std::string::npos);
  bad = p.d;
  bad.expand_w = nullptr;
  EXPECT_NE(message(bad, ChainTiling(2, 48)).find("weights"), std::string::npos);
  bad = p.d;
  bad.dw_act.push_back(EpilogueOp::Residual(p.x.data(), 1, 1));
  EXPECT_NE(message(bad, ChainTiling(2, 48)).find("dw_act"), std::string::npos);
  bad = p.d;
  bad.expand = false;  // 16 channels of X for 48 depthwise channels
  EXPECT_NE(message(bad, ChainTiling(2, 48)).find("channels"), std::string::npos);
  const Result<KernelStats> run = RunConvChain(bad, ChainTiling(2, 48), config);
  EXPECT_FALSE(run.ok());

  ConvChainTiling bf16 = ChainTiling(2, 42, {6, 32});
  bf16.precision = Precision::kBf16;
  EXPECT_EQ(message(p.d, bf16), "ok");
  bf16 = ChainTiling(2, 21, {7, 32});
  bf16.precision = Precision::kBf16;
  EXPECT_NE(message(p.d, bf16).find("k-pairs"), std::string::npos);
  bf16 = ChainTiling(2, 48, {4, 24});
  bf16.precision = Precision::kBf16;
  EXPECT_NE(message(p.d, bf16).find("no bf16 micro-kernel"), std::string::npos);
}

}  // namespace
}  // namespace fusetune::kernels
