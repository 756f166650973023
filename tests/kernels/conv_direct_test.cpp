// kDirect against the reference: ResNet-50's 3x3 and 1x1 layers scaled
// down, strides, pads, dilation, 1-D, batches, channel counts off 16, odd
// widths, epilogues, with and without pre-packed weights, threads and
// tilings; its errors; its estimate against what a run counts.
#include <gtest/gtest.h>

#include "kernels/conv.h"
#include "kernels/estimate.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::MakeShape;
using testing::RunAgainstReference;

constexpr double kDirectTolerance = 1e-5;

ConvTiling Tiling(int64_t oc_block, int64_t pixel_block, int64_t k_block) {
  ConvTiling t;
  t.algorithm = ConvAlgorithm::kDirect;
  t.oc_block = oc_block;
  t.pixel_block = pixel_block;
  t.k_block = k_block;
  return t;
}

TEST(ConvDirect, ResNetShapesScaledDown) {
  const ConvShape shapes[] = {
      MakeShape(1, 64, 14, 14, 64, 3, 1, 1),  MakeShape(1, 128, 7, 7, 128, 3, 1, 1),
      MakeShape(1, 32, 9, 9, 48, 3, 1, 1),    MakeShape(1, 256, 4, 4, 64, 3, 1, 1),
      MakeShape(1, 256, 14, 14, 64, 1),       MakeShape(1, 96, 7, 7, 256, 1),
      MakeShape(1, 64, 15, 15, 128, 1, 2, 0), MakeShape(1, 3, 32, 32, 32, 7, 2, 3)};
  for (const ConvShape& s : shapes)
    for (const ConvTiling& t : {Tiling(64, 256, 64), Tiling(16, 1, 7), Tiling(128, 4096, 512)})
      for (bool prepack : {true, false})
        EXPECT_LT(RunAgainstReference(s, t, true, false, prepack).max_rel_error, kDirectTolerance)
            << s.ToString() << " " << t.ToString() << " prepack " << prepack;
}

TEST(ConvDirect, StridesPadsDilationsAndOddShapes) {
  const ConvShape shapes[] = {
      MakeShape(1, 5, 11, 13, 17, 3, 1, 0), MakeShape(1, 5, 11, 13, 33, 3, 2, 0),
      MakeShape(1, 7, 11, 37, 20, 5, 2, 2), MakeShape(1, 3, 12, 35, 16, 3, 1, 2, 2),
      MakeShape(1, 3, 12, 35, 16, 3, 2, 2, 2), MakeShape(1, 4, 10, 41, 5, 3, 3, 1),
      MakeShape(1, 6, 1, 50, 24, 5, 1, 2), MakeShape(1, 6, 1, 51, 40, 3, 2, 1),
      MakeShape(1, 9, 9, 29, 1, 3, 1, 1),
      // Columns and rows past the last window (unread), pads wider than the kernel.
      MakeShape(1, 3, 12, 12, 16, 3, 2, 0), MakeShape(1, 3, 5, 5, 17, 3, 1, 3),
      MakeShape(1, 2, 9, 40, 16, 7, 1, 9, 3)};
  for (const ConvShape& s : shapes)
    for (const ConvTiling& t : {Tiling(16, 1, 2), Tiling(48, 100, 256)})
      for (bool prepack : {true, false})
        EXPECT_LT(RunAgainstReference(s, t, true, false, prepack).max_rel_error, kDirectTolerance)
            << s.ToString() << " " << t.ToString() << " prepack " << prepack;
}

TEST(ConvDirect, BatchEpiloguesAndThreads) {
  const ConvShape s = MakeShape(2, 19, 13, 17, 37, 3, 1, 1);
  for (bool bias : {false, true})
    for (bool residual : {false, true})
      for (int threads : {1, 2})
        EXPECT_LT(RunAgainstReference(s, Tiling(32, 40, 8), bias, residual, threads == 1, threads)
                      .max_rel_error,
                  kDirectTolerance)
            << bias << residual << threads;
}

TEST(ConvDirect, Errors) {
  const Status grouped =
      ConvAlgorithmApplies(MakeShape(1, 8, 8, 8, 16, 3, 1, 1, 1, 2), ConvAlgorithm::kDirect);
  ASSERT_FALSE(grouped.ok());
  EXPECT_NE(grouped.error().message().find("groups"), std::string::npos);
  const ConvShape s = MakeShape(1, 64, 56, 56, 64, 3, 1, 1);
  std::vector<float> x(64 * 56 * 56), w(64 * 64 * 9), y(64 * 56 * 56);
  ConvDesc d;
  d.shape = s;
  d.x = x.data();
  d.w = w.data();
  d.y = y.data();
  KernelConfig config;
  config.local_buffer_bytes = 256 << 10;
  EXPECT_FALSE(ValidateConv(d, Tiling(64, 3136, 64), config).ok());  // too big
  EXPECT_TRUE(ValidateConv(d, Tiling(64, 112, 32), config).ok());
  const Status odd = ValidateConv(d, Tiling(24, 112, 32), config);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.error().message().find("oc_block"), std::string::npos);
}

TEST(ConvDirect, EstimateMatchesCountedTraffic) {
  const ConvShape shapes[] = {MakeShape(1, 20, 15, 15, 40, 3, 2, 1),
                              MakeShape(2, 19, 13, 17, 37, 3, 1, 1),
                              MakeShape(1, 8, 1, 50, 16, 5, 1, 2), MakeShape(1, 64, 7, 7, 64, 1)};
  for (const ConvShape& s : shapes)
    for (bool prepack : {true, false})
      for (bool residual : {false, true})
        // k_block 256 is one slice: the band is reused across channel blocks.
        for (const ConvTiling& t : {Tiling(32, 40, 16), Tiling(16, 40, 256)}) {
          const testing::ConvRun run = RunAgainstReference(s, t, true, residual, prepack);
          std::vector<float> dummy(1);
          ConvDesc d;
          d.shape = s;
          d.x = d.w = d.bias = dummy.data();
          d.y = dummy.data();
          if (prepack) d.w_packed = dummy.data();
          if (residual) d.epilogue.push_back(EpilogueOp::Residual(dummy.data(), s.pixels()));
          const TilingEstimate e = EstimateConv(d, t, 2);
          EXPECT_EQ(e.bytes_in, run.stats.bytes_global_to_local) << s.ToString() << t.ToString();
          EXPECT_EQ(e.bytes_out, run.stats.bytes_local_to_global) << s.ToString() << t.ToString();
          EXPECT_EQ(e.tiles, run.stats.tiles) << s.ToString() << t.ToString();
          EXPECT_GT(e.lane_utilisation, 0);
          EXPECT_LE(e.lane_utilisation, 1);
        }
}

// Copy-only runs count what full runs count and leave the arithmetic out;
// compute-only runs copy nothing.
TEST(ConvDirect, RunModes) {
  testing::ExpectRunModesCountAlike(MakeShape(2, 19, 13, 17, 37, 3, 1, 1), Tiling(32, 40, 8));
}

}  // namespace
}  // namespace fusetune::kernels
