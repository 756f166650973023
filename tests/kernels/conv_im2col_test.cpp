// The implicit-GEMM (im2col) convolution against the double-precision
// reference: every micro-tile shape, blocks smaller and larger than the
// shape, reduction slices, groups, strides, padding, dilation, 1-D, batches,
// epilogues, pre-packed weights and thread counts; its tiling rules, run
// modes, and its estimate against the traffic it counts.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/conv.h"
#include "kernels/estimate.h"
#include "kernels/microkernel.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::MakeShape;
using testing::RunAgainstReference;

constexpr double kIm2colTolerance = 1e-5;

ConvTiling Im2col(int64_t oc_block, int64_t pixel_block, int64_t k_block, int mr, int nr) {
  ConvTiling t;
  t.algorithm = ConvAlgorithm::kIm2colGemm;
  t.oc_block = oc_block;
  t.pixel_block = pixel_block;
  t.k_block = k_block;
  t.mr = mr;
  t.nr = nr;
  return t;
}

struct NamedShape {
  const char* name;
  ConvShape shape;
};

std::vector<NamedShape> Shapes() {
  return {
      {"resnet_3x3", MakeShape(1, 16, 14, 14, 32, 3, 1, 1)},
      {"stem_7x7_s2", MakeShape(1, 3, 32, 32, 16, 7, 2, 3)},
      {"pointwise_s1", MakeShape(1, 32, 9, 9, 24, 1)},
      {"pointwise_s2", MakeShape(1, 32, 10, 10, 24, 1, 2)},
      // Rows wider than one 32-float window of the stride-2 vector steps.
      {"pointwise_s2_wide", MakeShape(1, 8, 6, 70, 12, 1, 2)},
      {"3x3_s2_wide_odd", MakeShape(1, 6, 7, 67, 16, 3, 2, 1)},
      {"dilation_2", MakeShape(1, 8, 12, 12, 16, 3, 1, 2, 2)},
      {"groups_2", MakeShape(1, 16, 10, 10, 32, 3, 1, 1, 1, 2)},
      {"groups_4_s2", MakeShape(1, 16, 9, 11, 20, 3, 2, 1, 1, 4)},
      {"depthwise", MakeShape(1, 16, 10, 10, 16, 3, 1, 1, 1, 16)},
      {"conv1d", MakeShape(1, 8, 1, 50, 12, 5, 1, 2)},
      {"batch_2", MakeShape(2, 8, 9, 9, 16, 3, 1, 1)},
      {"odd_sizes", MakeShape(1, 7, 13, 11, 13, 3, 1, 1)},
      {"pad_wider_than_row", MakeShape(1, 4, 3, 3, 8, 5, 1, 4)},
  };
}

// Three tilings per micro shape: small blocks with short k slices, two
// micro-tiles each way with k covering K, and blocks larger than the shape
// with an odd slice.
std::vector<ConvTiling> TilingsFor(int mr, int nr) {
  return {Im2col(mr, nr, 16, mr, nr), Im2col(2 * mr, 2 * nr, 4096, mr, nr),
          Im2col(10 * mr, 12 * nr, 37, mr, nr)};
}

TEST(ConvIm2col, MatchesReferenceOnEveryShapeTilingAndMicroShape) {
  int variant = 0;
  for (const NamedShape& ns : Shapes())
    for (auto [mr, nr] : MicroTileShapes())
      for (const ConvTiling& t : TilingsFor(mr, nr)) {
        // Cycle through the run options so that every combination of shape
        // and tiling also sees a different pre-packing, thread count and epilogue.
        const bool prepack = variant % 2 == 0, bias = variant % 3 != 0;
        const bool residual_relu = variant % 4 == 1;
        const int threads = 1 + (variant / 2) % 2;
        ++variant;
        SCOPED_TRACE(fmt::format("{} {} prepack={} bias={} residual_relu={} threads={}", ns.name,
                                 t.ToString(), prepack, bias, residual_relu, threads));
        const testing::ConvRun run =
            RunAgainstReference(ns.shape, t, bias, residual_relu, prepack, threads);
        EXPECT_LE(run.max_rel_error, kIm2colTolerance);
      }
}

TEST(ConvIm2col, EveryOptionOnAResnetShape) {
  const ConvShape s = MakeShape(2, 16, 14, 14, 32, 3, 1, 1);
  for (const ConvTiling& t : {Im2col(16, 64, 4096, 8, 32), Im2col(8, 32, 40, 8, 32)})
    for (bool bias : {false, true})
      for (bool residual_relu : {false, true})
        for (bool prepack : {false, true})
          for (int threads : {1, 2}) {
            SCOPED_TRACE(fmt::format("{} bias={} residual_relu={} prepack={} threads={}",
                                     t.ToString(), bias, residual_relu, prepack, threads));
            EXPECT_LE(
                RunAgainstReference(s, t, bias, residual_relu, prepack, threads).max_rel_error,
                kIm2colTolerance);
          }
}

TEST(ConvIm2col, OcBlockMayCoverAGroupWithoutBeingAMultipleOfMr) {
  const ConvShape s = MakeShape(1, 8, 10, 10, 20, 3, 1, 1);
  EXPECT_LE(RunAgainstReference(s, Im2col(20, 64, 4096, 8, 32)).max_rel_error, kIm2colTolerance);
  EXPECT_LE(RunAgainstReference(s, Im2col(30, 64, 4096, 8, 32)).max_rel_error, kIm2colTolerance);
}

struct Tensors {
  std::vector<float> x, w, b, r, y;
  ConvDesc desc;
};

Tensors MakeTensors(const ConvShape& s, bool residual) {
  Tensors t;
  t.x.assign(s.batch * s.in_channels * s.in_h * s.in_w, 0.5f);
  t.w.assign(s.out_channels * s.in_per_group() * s.kernel_h * s.kernel_w, 0.25f);
  t.b.assign(s.out_channels, 1.0f);
  t.r.assign(s.batch * s.out_channels * s.pixels(), 2.0f);
  t.y.assign(t.r.size(), 0.0f);
  t.desc.shape = s;
  t.desc.x = t.x.data();
  t.desc.w = t.w.data();
  t.desc.bias = t.b.data();
  t.desc.y = t.y.data();
  if (residual) {
    t.desc.epilogue.push_back(EpilogueOp::Residual(t.r.data(), s.pixels(), t.y.size() / s.batch));
    t.desc.epilogue.push_back(EpilogueOp::Act(EpilogueKind::kRelu));
  }
  return t;
}

TEST(ConvIm2col, RefusesATilingThatDoesNotFitTheLocalBuffer) {
  const ConvShape s = MakeShape(1, 64, 28, 28, 64, 3, 1, 1);
  Tensors t = MakeTensors(s, false);
  const ConvTiling tiling = Im2col(64, 512, 576, 8, 32);
  KernelConfig config;
  config.local_buffer_bytes = 64 * 1024;
  ASSERT_GT(ConvLocalBytes(t.desc, tiling), 64 * 1024);
  const Status status = ValidateConv(t.desc, tiling, config);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("local buffer"), std::string::npos)
      << status.error().message();
  EXPECT_FALSE(ConvTilingFits(t.desc, tiling, config));
  EXPECT_FALSE(RunConv(t.desc, tiling, config).ok());
}

TEST(ConvIm2col, RefusesBrokenTilingRules) {
  const ConvShape s = MakeShape(1, 8, 10, 10, 32, 3, 1, 1);
  Tensors t = MakeTensors(s, false);
  const KernelConfig config;
  const Status micro = ValidateConv(t.desc, Im2col(16, 64, 72, 5, 32), config);
  ASSERT_FALSE(micro.ok());
  EXPECT_NE(micro.error().message().find("tiling.mr"), std::string::npos);
  const Status oc = ValidateConv(t.desc, Im2col(12, 64, 72, 8, 32), config);
  ASSERT_FALSE(oc.ok());
  EXPECT_NE(oc.error().message().find("tiling.oc_block"), std::string::npos);
  const Status px = ValidateConv(t.desc, Im2col(16, 48, 72, 8, 32), config);
  ASSERT_FALSE(px.ok());
  EXPECT_NE(px.error().message().find("tiling.pixel_block"), std::string::npos);
  EXPECT_TRUE(ValidateConv(t.desc, Im2col(16, 64, 1, 8, 32), config).ok());
  EXPECT_TRUE(ConvAlgorithmApplies(s, ConvAlgorithm::kIm2colGemm).ok());
}

TEST(ConvIm2col, CopyOnlyCountsTheBytesOfAFullRunAndComputeOnlyNone) {
  for (const ConvTiling& tiling : {Im2col(16, 64, 4096, 8, 32), Im2col(8, 32, 20, 8, 32)}) {
    const ConvShape s = MakeShape(2, 8, 11, 11, 24, 3, 2, 1);
    Tensors t = MakeTensors(s, true);
    KernelConfig config;
    const Result<KernelStats> full = RunConv(t.desc, tiling, config, RunMode::kFull);
    const Result<KernelStats> copy = RunConv(t.desc, tiling, config, RunMode::kCopyOnly);
    const Result<KernelStats> compute = RunConv(t.desc, tiling, config, RunMode::kComputeOnly);
    ASSERT_TRUE(full.ok() && copy.ok() && compute.ok());
    EXPECT_GT(full->bytes_global_to_local, 0);
    EXPECT_EQ(copy->bytes_global_to_local, full->bytes_global_to_local);
    EXPECT_EQ(copy->bytes_local_to_global, full->bytes_local_to_global);
    EXPECT_EQ(copy->tiles, full->tiles);
    EXPECT_EQ(compute->bytes_global_to_local, 0);
    EXPECT_EQ(compute->bytes_local_to_global, 0);
    EXPECT_EQ(compute->tiles, full->tiles);
  }
}

TEST(ConvIm2col, EstimateMatchesTheCountedTraffic) {
  const std::vector<ConvShape> shapes = {
      MakeShape(2, 16, 14, 14, 32, 3, 1, 1), MakeShape(1, 32, 9, 9, 24, 1),
      MakeShape(1, 16, 9, 11, 20, 3, 2, 1, 1, 4), MakeShape(1, 3, 32, 32, 16, 7, 2, 3)};
  const std::vector<ConvTiling> tilings = {Im2col(16, 64, 4096, 8, 32), Im2col(8, 32, 40, 8, 32),
                                           Im2col(64, 512, 4096, 6, 32)};
  for (const ConvShape& s : shapes)
    for (const ConvTiling& tiling : tilings)
      for (bool residual : {false, true})
        for (int threads : {1, 2}) {
          SCOPED_TRACE(fmt::format("{} {} residual={} threads={}", s.ToString(), tiling.ToString(),
                                   residual, threads));
          Tensors t = MakeTensors(s, residual);
          KernelConfig config;
          config.threads = threads;
          const Result<KernelStats> got = RunConv(t.desc, tiling, config);
          ASSERT_TRUE(got.ok()) << got.error().message();
          const TilingEstimate e = EstimateConv(t.desc, tiling, threads);
          EXPECT_EQ(e.bytes_in, static_cast<double>(got->bytes_global_to_local));
          EXPECT_EQ(e.bytes_out, static_cast<double>(got->bytes_local_to_global));
          EXPECT_EQ(e.tiles, got->tiles);
          EXPECT_EQ(e.local_bytes, ConvLocalBytes(t.desc, tiling));
          EXPECT_GT(e.lane_utilisation, 0);
          EXPECT_LE(e.lane_utilisation, 1 + 1e-12);
          EXPECT_GE(e.max_thread_work, 1.0 / threads - 1e-12);
          EXPECT_LE(e.max_thread_work, 1 + 1e-12);
          EXPECT_GE(e.max_thread_tiles, (e.tiles + threads - 1) / threads);
          EXPECT_GT(e.steps, 0);
        }
}

// With k covering K, consecutive channel blocks of one position block share
// the gathered B block: the input is read once per position block and group.
TEST(ConvIm2col, ChannelBlocksReuseTheGatheredBlock) {
  const ConvShape s = MakeShape(1, 16, 8, 8, 64, 3, 1, 1);
  Tensors t = MakeTensors(s, false);
  KernelConfig config;
  config.threads = 1;
  const int64_t k = 16 * 9;
  const Result<KernelStats> one = RunConv(t.desc, Im2col(16, 64, 4096, 8, 32), config);
  ASSERT_TRUE(one.ok());
  // A: the whole of W; B: the im2col matrix once; bias: 64 floats.
  EXPECT_EQ(one->bytes_global_to_local, 4 * (64 * k + k * 64 + 64));
  const Result<KernelStats> sliced = RunConv(t.desc, Im2col(16, 64, 72, 8, 32), config);
  ASSERT_TRUE(sliced.ok());
  EXPECT_EQ(sliced->bytes_global_to_local, 4 * (64 * k + 4 * k * 64 + 64));
}

}  // namespace
}  // namespace fusetune::kernels
