// A windowed max pool fused into the convolution template
// (ConvDesc::max_pool): every algorithm with a MaxPool after its epilogue
// against the double reference conv pooled in double, on bands from the
// fewest rows a window needs to the whole image (overlapping halos), 1 and
// 2 threads, with and without pre-packed weights, ceil-mode and padded
// windows; only the pooled planes are written and the estimate counts what a
// run does; run modes; bands too short for a window and windows that do not
// fit the conv's output are refused.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/conv_winograd.h"
#include "kernels/estimate.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::MakeShape;
using testing::Tiling;
using testing::ToleranceOf;

// ONNX's window arithmetic over the conv's output, with ceil_mode.
ConvMaxPool MakePool(const ConvShape& s, int64_t k, int64_t stride, int64_t pad, bool ceil) {
  auto out = [&](int64_t in) {
    const int64_t span = in + 2 * pad - k;
    int64_t o = (ceil ? (span + stride - 1) / stride : span / stride) + 1;
    if (ceil && (o - 1) * stride >= in + pad) --o;  // the last window starts inside
    return o;
  };
  return ConvMaxPool{k, k, stride, stride, pad, pad, out(s.out_h), out(s.out_w)};
}

struct Case {
  ConvShape shape;
  ConvMaxPool pool;
};

// ResNet's stem scaled down (7x7/2 conv, 3x3/2 pool), a 3x3 stride-1 conv
// (Winograd) under a padded pool, a 2x2/2 pool, a ceil-mode pool, a batch
// of 2, a stride-1 pool and a depthwise conv.
std::vector<Case> Cases() {
  const ConvShape stem = MakeShape(1, 3, 22, 22, 16, 7, 2, 3);
  const ConvShape same = MakeShape(1, 8, 13, 13, 24, 3, 1, 1);
  const ConvShape batch = MakeShape(2, 12, 9, 11, 20, 3, 1, 1);
  const ConvShape depthwise = MakeShape(1, 32, 12, 12, 32, 3, 1, 1, 1, 32);
  return {
      {stem, MakePool(stem, 3, 2, 1, false)},   {same, MakePool(same, 3, 2, 1, false)},
      {same, MakePool(same, 2, 2, 0, false)},   {same, MakePool(same, 3, 2, 0, true)},
      {batch, MakePool(batch, 3, 1, 1, false)}, {depthwise, MakePool(depthwise, 3, 2, 1, false)}};
}

// Bands from the fewest rows a window needs to the whole image.
std::vector<ConvTiling> BandTilings(ConvAlgorithm a, const Case& c) {
  const ConvShape& s = c.shape;
  const int64_t nr = a == ConvAlgorithm::kIm2colGemm ? 32 : 1;
  auto px = [&](int64_t rows) { return (rows * s.out_w + nr - 1) / nr * nr; };
  std::vector<ConvTiling> v;
  for (int64_t rows : {c.pool.kernel_h, c.pool.kernel_h + 2, s.out_h}) {
    // im2col's blocks are whole micro-tiles: rounding up may add a row.
    v.push_back(Tiling(a, 16, px(rows), 8));
    v.push_back(Tiling(a, 48, px(rows), 256));
  }
  if (ConvAlgorithmUsesMicroTile(a))
    v.push_back(Tiling(a, 14, px(c.pool.kernel_h + 1), 16, 14, 16));
  return v;
}

// Runs `t` with the case's max pool after a bias (and optionally a residual
// and ReLU) and compares the pooled planes with ReferenceConv's pooled in
// double, relative to the unpooled output's largest magnitude.
testing::ConvRun RunMaxPooled(const Case& c, const ConvTiling& t, bool residual_relu, int threads,
                              bool prepack) {
  const ConvShape& s = c.shape;
  const ConvMaxPool& p = c.pool;
  const int64_t plane = p.out_h * p.out_w;
  testing::RandomConv conv(s, /*bias=*/true, residual_relu, 9, s.batch * s.out_channels * plane);
  conv.d.max_pool = p;
  const std::vector<double> full = conv.Want();
  if (prepack) conv.PrePack(t);
  testing::ConvRun run;
  if (!conv.Run(t, threads, 1 << 20, &run)) return run;
  double err = 0, scale = 1e-6;
  for (double v : full) scale = std::max(scale, std::abs(v));
  for (int64_t q = 0; q < s.batch * s.out_channels; ++q)
    for (int64_t ph = 0; ph < p.out_h; ++ph)
      for (int64_t pw = 0; pw < p.out_w; ++pw) {
        double want = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < p.kernel_h; ++i)
          for (int64_t j = 0; j < p.kernel_w; ++j) {
            const int64_t oh = ph * p.stride_h - p.pad_top + i;
            const int64_t ow = pw * p.stride_w - p.pad_left + j;
            if (oh >= 0 && oh < s.out_h && ow >= 0 && ow < s.out_w)
              want = std::max(want, full[(q * s.out_h + oh) * s.out_w + ow]);
          }
        err = std::max(err, std::abs(double(conv.y[q * plane + ph * p.out_w + pw]) - want));
      }
  run.max_rel_error = err / scale;
  return run;
}

class ConvMaxPoolTest : public ::testing::TestWithParam<ConvAlgorithm> {};

TEST_P(ConvMaxPoolTest, PooledOutputMatchesTheReference) {
  const ConvAlgorithm a = GetParam();
  int runs = 0;
  for (const Case& c : Cases()) {
    const ConvShape& s = c.shape;
    if (!ConvAlgorithmApplies(s, a).ok()) continue;
    for (const ConvTiling& t : BandTilings(a, c))
      for (bool residual_relu : {false, true})
        for (int threads : {1, 2}) {
          SCOPED_TRACE(s.ToString() + " " + c.pool.ToString() + " " + t.ToString() +
                       (residual_relu ? " +residual+relu" : "") + " threads " +
                       std::to_string(threads));
          const testing::ConvRun run = RunMaxPooled(c, t, residual_relu, threads, threads == 2);
          EXPECT_LT(run.max_rel_error, ToleranceOf(a));
          // Only the pooled planes leave the local buffer.
          EXPECT_EQ(run.stats.bytes_local_to_global,
                    4 * s.batch * s.out_channels * c.pool.out_h * c.pool.out_w);
          ++runs;
        }
  }
  EXPECT_GT(runs, 0);
}

TEST_P(ConvMaxPoolTest, EstimateMatchesCountedTraffic) {
  const ConvAlgorithm a = GetParam();
  for (const Case& c : Cases()) {
    if (!ConvAlgorithmApplies(c.shape, a).ok()) continue;
    for (const ConvTiling& t : BandTilings(a, c)) {
      SCOPED_TRACE(c.shape.ToString() + " " + c.pool.ToString() + " " + t.ToString());
      const testing::ConvRun run = RunMaxPooled(c, t, true, 2, true);
      testing::RandomConv conv(c.shape, true, true, 9, 1);
      conv.d.max_pool = c.pool;
      conv.PrePack(t);
      const TilingEstimate e = EstimateConv(conv.d, t, 2);
      EXPECT_EQ(e.bytes_in, run.stats.bytes_global_to_local);
      EXPECT_EQ(e.bytes_out, run.stats.bytes_local_to_global);
      EXPECT_EQ(e.tiles, run.stats.tiles);
      EXPECT_EQ(e.local_bytes, ConvLocalBytes(conv.d, t));
    }
  }
}

TEST_P(ConvMaxPoolTest, RunModesCountAlike) {
  const ConvAlgorithm a = GetParam();
  for (const Case& c : Cases()) {
    if (!ConvAlgorithmApplies(c.shape, a).ok()) continue;
    const ConvTiling t = BandTilings(a, c)[0];
    testing::RandomConv conv(c.shape, true, false, 3,
                             c.shape.batch * c.shape.out_channels * c.pool.out_h * c.pool.out_w);
    conv.d.max_pool = c.pool;
    KernelConfig config;
    testing::ExpectModeCountsAlike(RunConv(conv.d, t, config, RunMode::kFull),
                                   RunConv(conv.d, t, config, RunMode::kCopyOnly),
                                   RunConv(conv.d, t, config, RunMode::kComputeOnly));
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ConvMaxPoolTest,
                         ::testing::Values(ConvAlgorithm::kIm2colGemm, ConvAlgorithm::kDirect,
                                           ConvAlgorithm::kWinograd2, ConvAlgorithm::kWinograd4,
                                           ConvAlgorithm::kDepthwise),
                         [](const ::testing::TestParamInfo<ConvAlgorithm>& i) {
                           return std::string(ConvAlgorithmName(i.param));
                         });

TEST(ConvMaxPool, BandsShorterThanAWindowAreRefused) {
  const Case c = Cases()[0];
  testing::RandomConv conv(c.shape, true, false, 1, 1);
  conv.d.max_pool = c.pool;
  KernelConfig config;
  const int64_t w = c.shape.out_w;
  const Status short_band =
      ValidateConv(conv.d, Tiling(ConvAlgorithm::kDirect, 16, 2 * w, 8), config);
  ASSERT_FALSE(short_band.ok());
  EXPECT_NE(short_band.error().message().find("tiling.pixel_block"), std::string::npos)
      << short_band.error().message();
  EXPECT_TRUE(ValidateConv(conv.d, Tiling(ConvAlgorithm::kDirect, 16, 3 * w, 8), config).ok());
  // Without the pool, any band works.
  conv.d.max_pool = ConvMaxPool{};
  EXPECT_TRUE(ValidateConv(conv.d, Tiling(ConvAlgorithm::kDirect, 16, 2 * w, 8), config).ok());
}

TEST(ConvMaxPool, WindowsThatDoNotFitTheOutputAreRefused) {
  const Case c = Cases()[0];
  testing::RandomConv conv(c.shape, true, false, 1, 1);
  KernelConfig config;
  const ConvTiling t = Tiling(ConvAlgorithm::kDirect, 16, 1024, 8);
  auto refused = [&](ConvMaxPool p, const std::string& why) {
    conv.d.max_pool = p;
    const Status s = ValidateConv(conv.d, t, config);
    ASSERT_FALSE(s.ok()) << p.ToString();
    EXPECT_NE(s.error().message().find(why), std::string::npos) << s.error().message();
  };
  ConvMaxPool p = c.pool;
  p.pad_top = 3;
  refused(p, "pads must be smaller than the window");
  p = c.pool;
  p.out_w += 2;
  refused(p, "the last window starts past");
  p = c.pool;
  p.stride_w = 0;
  refused(p, "must be positive");
  conv.d.max_pool = c.pool;
  conv.d.global_pool = ConvGlobalPool::kMax;
  EXPECT_FALSE(ValidateConv(conv.d, t, config).ok());
}

}  // namespace
}  // namespace fusetune::kernels
