// kDepthwise against the reference: MobileNetV2's depthwise shapes scaled
// down, strides, pads, dilation, 1-D, batches, odd widths, epilogues,
// threads and tilings; its errors; its estimate against what a run counts.
#include <gtest/gtest.h>

#include "kernels/conv.h"
#include "kernels/estimate.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::MakeShape;
using testing::RunAgainstReference;

constexpr double kTolerance = 1e-5;

ConvShape Depthwise(int64_t batch, int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride,
                    int64_t pad, int64_t dilation = 1) {
  return MakeShape(batch, c, h, w, c, k, stride, pad, dilation, c);
}

ConvTiling Tiling(int64_t oc_block, int64_t pixel_block) {
  ConvTiling t;
  t.algorithm = ConvAlgorithm::kDepthwise;
  t.oc_block = oc_block;
  t.pixel_block = pixel_block;
  return t;
}

TEST(ConvDepthwise, MobileNetShapesScaledDown) {
  const ConvShape shapes[] = {
      Depthwise(1, 32, 20, 20, 3, 1, 1),  Depthwise(1, 96, 20, 20, 3, 2, 1),
      Depthwise(1, 144, 14, 14, 3, 1, 1), Depthwise(1, 144, 14, 14, 3, 2, 1),
      Depthwise(1, 192, 9, 9, 3, 1, 1),   Depthwise(1, 576, 7, 7, 3, 2, 1),
      Depthwise(1, 24, 70, 70, 3, 1, 1),  Depthwise(1, 40, 7, 7, 3, 1, 1)};
  for (const ConvShape& s : shapes)
    for (const ConvTiling& t : {Tiling(16, 64), Tiling(7, 1), Tiling(64, 4096)})
      EXPECT_LT(RunAgainstReference(s, t).max_rel_error, kTolerance)
          << s.ToString() << " " << t.ToString();
}

TEST(ConvDepthwise, StridesPadsDilationsAndOddWidths) {
  const ConvShape shapes[] = {
      Depthwise(1, 5, 11, 13, 3, 1, 0), Depthwise(1, 5, 11, 13, 3, 2, 0),
      Depthwise(1, 5, 11, 37, 5, 2, 2), Depthwise(1, 3, 12, 35, 3, 1, 2, 2),
      Depthwise(1, 3, 12, 35, 3, 2, 2, 2), Depthwise(1, 4, 10, 41, 3, 3, 1),
      Depthwise(1, 4, 9, 9, 1, 1, 0), Depthwise(1, 4, 9, 67, 7, 1, 3),
      Depthwise(1, 6, 1, 50, 5, 1, 2), Depthwise(1, 6, 1, 51, 3, 2, 1),
      // Columns and rows past the last window (unread), pads wider than the kernel.
      Depthwise(1, 3, 12, 12, 3, 2, 0), Depthwise(1, 3, 5, 5, 3, 1, 3),
      Depthwise(1, 2, 9, 40, 7, 1, 9, 3)};
  for (const ConvShape& s : shapes)
    for (const ConvTiling& t : {Tiling(2, 1), Tiling(16, 100)})
      EXPECT_LT(RunAgainstReference(s, t).max_rel_error, kTolerance)
          << s.ToString() << " " << t.ToString();
}

TEST(ConvDepthwise, BatchEpiloguesAndThreads) {
  const ConvShape s = Depthwise(2, 19, 13, 17, 3, 1, 1);
  for (bool bias : {false, true})
    for (bool residual : {false, true})
      for (int threads : {1, 2})
        EXPECT_LT(
            RunAgainstReference(s, Tiling(8, 40), bias, residual, true, threads).max_rel_error,
            kTolerance)
            << bias << residual << threads;
}

TEST(ConvDepthwise, Errors) {
  EXPECT_FALSE(
      ConvAlgorithmApplies(MakeShape(1, 8, 8, 8, 8, 3, 1, 1), ConvAlgorithm::kDepthwise).ok());
  EXPECT_FALSE(
      ConvAlgorithmApplies(MakeShape(1, 8, 8, 8, 16, 3, 1, 1, 1, 8), ConvAlgorithm::kDepthwise)
          .ok());
  const ConvShape s = Depthwise(1, 64, 64, 64, 3, 1, 1);
  std::vector<float> x(64 * 64 * 64), w(64 * 9), y(64 * 64 * 64);
  ConvDesc d;
  d.shape = s;
  d.x = x.data();
  d.w = w.data();
  d.y = y.data();
  KernelConfig config;
  config.local_buffer_bytes = 64 << 10;
  EXPECT_FALSE(ValidateConv(d, Tiling(64, 4096), config).ok());
  EXPECT_TRUE(ValidateConv(d, Tiling(8, 128), config).ok());
  ConvDesc dense = d;
  dense.shape = MakeShape(1, 64, 64, 64, 64, 1);
  const Status status = ValidateConv(dense, Tiling(8, 128), config);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("groups"), std::string::npos);
}

TEST(ConvDepthwise, EstimateMatchesCountedTraffic) {
  const ConvShape shapes[] = {Depthwise(1, 40, 15, 15, 3, 2, 1), Depthwise(2, 19, 13, 17, 3, 1, 1),
                              Depthwise(1, 8, 1, 50, 5, 1, 2)};
  for (const ConvShape& s : shapes)
    for (bool residual : {false, true}) {
      const ConvTiling t = Tiling(16, 40);
      const testing::ConvRun run = RunAgainstReference(s, t, true, residual);
      std::vector<float> dummy(1);
      ConvDesc d;
      d.shape = s;
      d.x = d.w = d.bias = dummy.data();
      d.y = dummy.data();
      if (residual) d.epilogue.push_back(EpilogueOp::Residual(dummy.data(), s.pixels()));
      const TilingEstimate e = EstimateConv(d, t, 2);
      EXPECT_EQ(e.bytes_in, run.stats.bytes_global_to_local) << s.ToString();
      EXPECT_EQ(e.bytes_out, run.stats.bytes_local_to_global) << s.ToString();
      EXPECT_EQ(e.tiles, run.stats.tiles) << s.ToString();
      EXPECT_GT(e.lane_utilisation, 0);
      EXPECT_LE(e.lane_utilisation, 1);
    }
}

// Copy-only runs count what full runs count and leave the arithmetic out;
// compute-only runs copy nothing.
TEST(ConvDepthwise, RunModes) {
  testing::ExpectRunModesCountAlike(Depthwise(2, 19, 13, 17, 3, 2, 1), Tiling(8, 40));
}

}  // namespace
}  // namespace fusetune::kernels
