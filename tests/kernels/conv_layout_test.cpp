// Activation layouts (kernels/layout.h): the transform kernel against the
// layouts' index arithmetic, and the convolution template reading X and
// writing Y (with the residual its epilogue adds) in NHWC and NCHW16c,
// every algorithm that reads each layout, against the double reference
// conv; what cannot be held in a layout, or read by an algorithm, is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/conv_direct.h"
#include "kernels/conv_winograd.h"
#include "kernels/layout.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::FromLayout;
using testing::MakeShape;
using testing::Tiling;
using testing::ToLayout;

constexpr ActivationLayout kLayouts[] = {ActivationLayout::kNCHW, ActivationLayout::kNHWC,
                                         ActivationLayout::kNCHWc};

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST(LayoutNames, RoundTrip) {
  for (ActivationLayout l : kLayouts)
    EXPECT_EQ(ActivationLayoutFromName(ActivationLayoutName(l)), l);
  EXPECT_FALSE(ActivationLayoutFromName("nchw8c").has_value());
}

TEST(LayoutTransform, BlockTransposesOfEveryLength) {
  for (int64_t n : {1, 7, 15, 16, 17, 33, 49}) {
    const int64_t ld = n + 5;
    const std::vector<float> rows = Iota(16 * ld);
    std::vector<float> blocked(n * 16, -1.0f), back(16 * ld, -1.0f);
    RowsToBlocked(rows.data(), ld, n, blocked.data());
    for (int64_t p = 0; p < n; ++p)
      for (int64_t i = 0; i < 16; ++i) ASSERT_EQ(blocked[p * 16 + i], rows[i * ld + p]) << n;
    BlockedToRows(blocked.data(), n, back.data(), ld);
    for (int64_t i = 0; i < 16; ++i)
      for (int64_t p = 0; p < ld; ++p)  // the gap past n untouched
        ASSERT_EQ(back[i * ld + p], p < n ? rows[i * ld + p] : -1.0f) << n;
  }
}

// A block's first `lanes` channels back to rows: the rows past them untouched.
TEST(LayoutTransform, BlocksToFewerRowsThanLanes) {
  for (int64_t lanes : {1, 5, 8, 11})
    for (int64_t n : {7, 8, 17, 49}) {
      const int64_t ld = n + 3;
      const std::vector<float> blocked = Iota(n * 16);
      std::vector<float> rows(16 * ld, -1.0f);
      BlockedToRows(blocked.data(), n, rows.data(), ld, lanes);
      for (int64_t i = 0; i < 16; ++i)
        for (int64_t p = 0; p < ld; ++p)
          ASSERT_EQ(rows[i * ld + p], i < lanes && p < n ? blocked[p * 16 + i] : -1.0f)
              << lanes << " " << n;
    }
}

TEST(LayoutTransform, EveryPairMatchesTheIndexArithmetic) {
  // 2 images, a plane of 1100 positions (two position blocks), 48 channels.
  const ActivationDims d{2, 48, 25, 44};
  const std::vector<float> nchw = Iota(d.elements());
  for (ActivationLayout from : kLayouts)
    for (ActivationLayout to : kLayouts) {
      const std::vector<float> x = ToLayout(nchw, d, from);
      std::vector<float> y(x.size(), -1.0f);
      for (int threads : {1, 2}) {
        const Result<KernelStats> stats =
            RunLayoutTransform({d, from, to, x.data(), y.data()}, KernelConfig{1 << 20, threads});
        ASSERT_TRUE(stats.ok()) << stats.error().message();
        EXPECT_EQ(y, ToLayout(nchw, d, to))
            << ActivationLayoutName(from) << " -> " << ActivationLayoutName(to);
        EXPECT_EQ(stats->bytes_global_to_local, 4 * d.elements());
        EXPECT_EQ(stats->bytes_local_to_global, 4 * d.elements());
      }
    }
}

TEST(LayoutTransform, RefusesWhatALayoutCannotHold) {
  const ActivationDims d{1, 24, 4, 4};  // 24 channels: not whole blocks of 16
  std::vector<float> x(d.elements()), y(d.elements());
  const Result<KernelStats> blocked = RunLayoutTransform(
      {d, ActivationLayout::kNCHW, ActivationLayout::kNCHWc, x.data(), y.data()}, KernelConfig{});
  ASSERT_FALSE(blocked.ok());
  EXPECT_NE(blocked.error().message().find("not a multiple of 16"), std::string::npos);
  EXPECT_TRUE(
      RunLayoutTransform({d, ActivationLayout::kNCHW, ActivationLayout::kNHWC, x.data(), y.data()},
                         KernelConfig{})
          .ok());
  EXPECT_FALSE(
      RunLayoutTransform({d, ActivationLayout::kNCHW, ActivationLayout::kNHWC, x.data(), x.data()},
                         KernelConfig{})
          .ok());
}

// Runs `t` on `c` with X, the residual and Y in the tiling's layouts and
// returns the largest error of Y (back in NCHW) against the reference.
double RunInLayouts(testing::RandomConv& c, const ConvTiling& t, int threads) {
  const ConvShape& s = c.d.shape;
  const ActivationDims in{s.batch, s.in_channels, s.in_h, s.in_w};
  const ActivationDims out{s.batch, s.out_channels, s.out_h, s.out_w};
  const std::vector<double> want = c.Want();
  const std::vector<float> x = ToLayout(c.x, in, t.in_layout);
  const std::vector<float> r = c.r.empty() ? c.r : ToLayout(c.r, out, t.out_layout);
  ConvDesc d = c.d;
  d.x = x.data();
  for (EpilogueOp& op : d.epilogue)
    if (op.kind == EpilogueKind::kResidualAdd) op.data = r.data();
  testing::ConvRun run;
  // c runs on this function's laid-out X and residual, then gets its own back.
  const ConvDesc own = c.d;
  c.d = d;
  const bool ran = c.Run(t, threads, 1 << 20, &run);
  c.d = own;
  if (!ran) return 1e9;
  const std::vector<float> y = FromLayout(c.y, out, t.out_layout);
  double err = 0, scale = 1e-6;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(double(y[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

struct LayoutCase {
  ConvShape shape;
  std::vector<ConvAlgorithm> algorithms;
};

std::vector<LayoutCase> LayoutCases() {
  using A = ConvAlgorithm;
  return {
      // 3x3 stride 1: every algorithm; 2 images.
      {MakeShape(2, 32, 10, 9, 48, 3, 1, 1),
       {A::kIm2colGemm, A::kDirect, A::kWinograd2, A::kWinograd4}},
      // stride 2, a 1x1 conv, and depthwise.
      {MakeShape(1, 16, 13, 11, 32, 3, 2, 1), {A::kIm2colGemm, A::kDirect}},
      {MakeShape(1, 32, 7, 7, 64, 1), {A::kIm2colGemm, A::kDirect}},
      {MakeShape(1, 32, 12, 12, 32, 3, 1, 1, 1, 32), {A::kDepthwise}},
      // Depthwise on NCHW16c's own path: 7x7 (fewer columns than a vector),
      // stride 2 on an odd width, dilation 2, 5x5, two images.
      {MakeShape(1, 48, 7, 7, 48, 3, 1, 1, 1, 48), {A::kDepthwise}},
      {MakeShape(1, 32, 15, 13, 32, 3, 2, 1, 1, 32), {A::kDepthwise}},
      {MakeShape(2, 16, 11, 9, 16, 3, 1, 2, 2, 16), {A::kDepthwise}},
      {MakeShape(1, 64, 10, 10, 64, 5, 1, 2, 1, 64), {A::kDepthwise}},
  };
}

TEST(ConvLayouts, EveryAlgorithmReadsAndWritesEachLayout) {
  for (const LayoutCase& lc : LayoutCases())
    for (ConvAlgorithm a : lc.algorithms)
      for (ActivationLayout in : kLayouts)
        for (ActivationLayout out : kLayouts) {
          // im2col reads NCHW16c only for a 1x1 stride-1 unpadded conv.
          const bool pointwise = lc.shape.kernel_h == 1 && lc.shape.stride_h == 1;
          if (a == ConvAlgorithm::kIm2colGemm && in != ActivationLayout::kNCHW &&
              !(pointwise && in == ActivationLayout::kNCHWc))
            continue;
          // 24 output channels a block: tiles that straddle NCHW16c's
          // blocks (direct's blocks are vectors of 16, and depthwise on
          // NCHW16c takes whole blocks of 16).
          const bool whole_blocks =
              a == ConvAlgorithm::kDirect ||
              (a == ConvAlgorithm::kDepthwise && in == ActivationLayout::kNCHWc &&
               out == ActivationLayout::kNCHWc);
          for (int64_t oc_block : {int64_t{16}, int64_t{whole_blocks ? 48 : 24}}) {
            const int64_t nr = a == ConvAlgorithm::kIm2colGemm ? 32 : 1;
            ConvTiling t = Tiling(a, oc_block, 2 * lc.shape.out_w * nr, 16);
            t.in_layout = in;
            t.out_layout = out;
            testing::RandomConv c(lc.shape, true, /*residual_relu=*/true, 11,
                                  lc.shape.batch * lc.shape.out_channels * lc.shape.pixels());
            for (int threads : {1, 2})
              EXPECT_LE(RunInLayouts(c, t, threads), testing::ToleranceOf(a))
                  << lc.shape.ToString() << " " << t.ToString() << " threads " << threads;
          }
        }
}

// The direct convolution in bf16 copies its bands through CopyBands as the
// f32 form does, 16 channels at a time, then rounds them to pairs: every
// layout in and out, odd slices included (channel counts of whole NCHW16c
// blocks: the test's rearranging assumes them). bf16 products over K <= 432
// terms of random signs stay far below 1e-2 of the output's scale.
TEST(ConvLayouts, DirectInBf16ReadsAndWritesEachLayout) {
  for (const ConvShape& shape :
       {MakeShape(2, 32, 10, 9, 48, 3, 1, 1), MakeShape(1, 16, 13, 11, 32, 3, 2, 1),
        MakeShape(1, 32, 7, 7, 64, 1), MakeShape(1, 48, 8, 8, 16, 3, 1, 1)})
    for (ActivationLayout in : kLayouts)
      for (ActivationLayout out : kLayouts)
        for (int64_t k_block : {int64_t{5}, int64_t{32}}) {
          ConvTiling t = Tiling(ConvAlgorithm::kDirect, 48, 2 * shape.out_w, k_block);
          t.precision = Precision::kBf16;
          t.in_layout = in;
          t.out_layout = out;
          testing::RandomConv c(shape, true, /*residual_relu=*/true, 11,
                                shape.batch * shape.out_channels * shape.pixels());
          EXPECT_LE(RunInLayouts(c, t, 2), 1e-2) << shape.ToString() << " " << t.ToString();
        }
}

// A 1x1 stride-1 direct conv on NCHW16c reads X's blocks as they lie
// (conv_direct.cpp, DirectLayout::band_blocked): slices of whole blocks (16, 32,
// 64 channels; 48 leaves a last slice of 16), tiles of 2 rows (the last
// one short) and of all of them, two images, maps of one column chunk (9
// wide), of two-row register blocks (7 wide) and of two chunks (20 wide),
// every output layout; against the reference, and counted as the NCHW
// input's copies are. Slices that cut blocks (k_block 24, 5) take the
// transposing copy: the same answers.
TEST(ConvLayouts, DirectPointwiseReadsNchw16cBlocksAsTheyLie) {
  for (const ConvShape& s : {MakeShape(2, 64, 7, 9, 48, 1), MakeShape(1, 64, 7, 7, 32, 1),
                             MakeShape(1, 32, 3, 20, 32, 1)})
    for (ActivationLayout out : kLayouts)
      for (int64_t k_block :
           {int64_t{16}, int64_t{32}, int64_t{48}, int64_t{64}, int64_t{24}, int64_t{5}})
        for (int64_t rows : {int64_t{2}, s.out_h}) {
          ConvTiling t = Tiling(ConvAlgorithm::kDirect, 32, rows * s.out_w, k_block);
          t.in_layout = ActivationLayout::kNCHWc;
          t.out_layout = out;
          testing::RandomConv c(s, true, /*residual_relu=*/true, 5,
                                s.batch * s.out_channels * s.pixels());
          EXPECT_EQ(conv_detail::DirectLayoutOf(c.d, t).band_blocked, k_block % 16 == 0) << k_block;
          for (int threads : {1, 2})
            EXPECT_LE(RunInLayouts(c, t, threads), testing::ToleranceOf(ConvAlgorithm::kDirect))
                << s.ToString() << " " << t.ToString() << " threads " << threads;
          testing::ConvRun blocked, planes;
          ASSERT_TRUE(c.Run(t, 2, 1 << 20, &blocked));
          t.in_layout = ActivationLayout::kNCHW;
          ASSERT_TRUE(c.Run(t, 2, 1 << 20, &planes));
          EXPECT_EQ(blocked.stats.bytes_global_to_local, planes.stats.bytes_global_to_local)
              << t.ToString();
          t.in_layout = ActivationLayout::kNCHWc;
          testing::ExpectRunModesCountAlike(s, t);
        }
}

// Into NCHW16c the direct conv finishes its sums in their blocks
// (FinishBlockedConvTile), not transposed into rows and back, and needs no
// tile of rows in its local buffer: counted as into NCHW (bias, residual, a
// per-channel multiplier once per position, output), in every run mode.
TEST(ConvLayouts, DirectFinishedInBlocksCountsAsInRows) {
  const ConvShape s = MakeShape(2, 32, 9, 8, 48, 3, 1, 1);
  ConvTiling t = Tiling(ConvAlgorithm::kDirect, 32, 3 * s.out_w, 16);
  testing::RandomConv c(s, true, /*residual_relu=*/true, 4, s.batch * s.out_channels * s.pixels());
  const std::vector<float> per_channel(static_cast<size_t>(s.out_channels), 0.5f);
  c.d.epilogue.push_back({EpilogueKind::kMultiply, per_channel.data(), 1, 0, 0, 1});
  testing::ConvRun rows, blocks;
  ASSERT_TRUE(c.Run(t, 2, 1 << 20, &rows));
  const int64_t rows_local = ConvLocalBytes(c.d, t);
  EXPECT_FALSE(conv_detail::DirectLayoutOf(c.d, t).finish_blocks);
  t.out_layout = ActivationLayout::kNCHWc;
  EXPECT_TRUE(conv_detail::DirectLayoutOf(c.d, t).finish_blocks);
  EXPECT_LT(ConvLocalBytes(c.d, t), rows_local);
  ASSERT_TRUE(c.Run(t, 2, 1 << 20, &blocks));
  EXPECT_EQ(blocks.stats.bytes_global_to_local, rows.stats.bytes_global_to_local);
  EXPECT_EQ(blocks.stats.bytes_local_to_global, rows.stats.bytes_local_to_global);
  EXPECT_EQ(blocks.stats.tiles, rows.stats.tiles);
  testing::ExpectRunModesCountAlike(s, t);
}

TEST(ConvLayouts, AMaxPooledConvWritesItsPooledPlanesInTheLayout) {
  const ConvShape s = MakeShape(1, 16, 14, 14, 32, 3, 1, 1);
  const ConvMaxPool pool{3, 3, 2, 2, 1, 1, 7, 7};
  const ActivationDims pooled{1, 32, 7, 7};
  for (ActivationLayout out : kLayouts) {
    testing::RandomConv nchw(s, true, false, 3, pooled.elements());
    nchw.d.max_pool = pool;
    testing::RandomConv laid(s, true, false, 3, pooled.elements());
    laid.d.max_pool = pool;
    ConvTiling t = Tiling(ConvAlgorithm::kDirect, 16, 5 * s.out_w, 16);
    testing::ConvRun run;
    ASSERT_TRUE(nchw.Run(t, 2, 1 << 20, &run));
    t.out_layout = out;
    ASSERT_TRUE(laid.Run(t, 2, 1 << 20, &run));
    EXPECT_EQ(FromLayout(laid.y, pooled, out), nchw.y) << ActivationLayoutName(out);
  }
}

TEST(ConvLayouts, RefusesLayoutsItCannotHoldOrRead) {
  const ConvShape s = MakeShape(1, 24, 8, 8, 32, 3, 1, 1);
  testing::RandomConv c(s, true, false, 1, s.out_channels * s.pixels());
  const KernelConfig config;
  auto refusal = [&](ConvTiling t, ActivationLayout in, ActivationLayout out) {
    t.in_layout = in;
    t.out_layout = out;
    const Status st = ValidateConv(c.d, t, config);
    return st.ok() ? std::string() : st.error().message();
  };
  const ConvTiling direct = Tiling(ConvAlgorithm::kDirect, 16, 64, 16);
  EXPECT_NE(refusal(direct, ActivationLayout::kNCHWc, ActivationLayout::kNCHW).find("in_layout"),
            std::string::npos);  // 24 input channels
  EXPECT_EQ(refusal(direct, ActivationLayout::kNHWC, ActivationLayout::kNCHWc), "");
  const ConvTiling im2col = Tiling(ConvAlgorithm::kIm2colGemm, 16, 64, 16);
  EXPECT_NE(refusal(im2col, ActivationLayout::kNHWC, ActivationLayout::kNCHW)
                .find("im2col_gemm reads NCHW input, or NCHW16c for a 1x1"),
            std::string::npos);
  // im2col reads NCHW16c for a 1x1 conv whose positions are X's, not for
  // one that crops them (out 7x7 of an 8x8 input).
  ConvShape crop = MakeShape(1, 16, 8, 8, 16, 1);
  testing::RandomConv pointwise(crop, true, false, 1, 16 * 64);
  const ConvTiling gemm = Tiling(ConvAlgorithm::kIm2colGemm, 16, 64, 16);
  ConvTiling blocked_in = gemm;
  blocked_in.in_layout = ActivationLayout::kNCHWc;
  EXPECT_TRUE(ValidateConv(pointwise.d, blocked_in, config).ok());
  pointwise.d.shape.out_h = pointwise.d.shape.out_w = 7;
  EXPECT_FALSE(ValidateConv(pointwise.d, blocked_in, config).ok());
  c.d.global_pool = ConvGlobalPool::kAverage;
  EXPECT_NE(refusal(direct, ActivationLayout::kNCHW, ActivationLayout::kNHWC).find("global pool"),
            std::string::npos);
}

// Depthwise on NCHW16c runs its own path (conv_depthwise_blocked.cpp): its
// counted traffic equals the NCHW path's for the same tiles (the same band
// rows, bias, residual and output), its run modes count alike, and it takes
// only whole blocks of 16 channels and no max pool.
TEST(ConvLayouts, BlockedDepthwiseCountsAndRefusals) {
  const ConvShape s = MakeShape(1, 64, 14, 14, 64, 3, 2, 1, 1, 64);
  ConvTiling blocked = Tiling(ConvAlgorithm::kDepthwise, 32, 3 * s.out_w, 16);
  blocked.in_layout = blocked.out_layout = ActivationLayout::kNCHWc;
  const ConvTiling nchw = Tiling(ConvAlgorithm::kDepthwise, 32, 3 * s.out_w, 16);
  testing::RandomConv c(s, true, /*residual_relu=*/true, 9, s.out_channels * s.pixels());
  testing::ConvRun a, b;
  ASSERT_TRUE(c.Run(blocked, 2, 1 << 20, &a));
  ASSERT_TRUE(c.Run(nchw, 2, 1 << 20, &b));
  EXPECT_EQ(a.stats.bytes_global_to_local, b.stats.bytes_global_to_local);
  EXPECT_EQ(a.stats.bytes_local_to_global, b.stats.bytes_local_to_global);
  const KernelConfig config{1 << 20, 2};
  testing::ExpectModeCountsAlike(RunConv(c.d, blocked, config, RunMode::kFull),
                                 RunConv(c.d, blocked, config, RunMode::kCopyOnly),
                                 RunConv(c.d, blocked, config, RunMode::kComputeOnly));
  ConvTiling odd = blocked;
  odd.oc_block = 24;
  EXPECT_FALSE(ValidateConv(c.d, odd, config).ok());
  c.d.max_pool = ConvMaxPool{3, 3, 2, 2, 1, 1, 4, 4};
  EXPECT_FALSE(ValidateConv(c.d, blocked, config).ok());
}

}  // namespace
}  // namespace fusetune::kernels
