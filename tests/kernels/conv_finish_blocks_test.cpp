// Finishing a conv tile in its 16-channel blocks (kernels/conv_finish_blocks.cpp)
// equals finishing it as rows (FinishConvTile): the direct conv into NCHW and
// NCHW16c Y and the NCHW16c depthwise into NCHW Y, with each epilogue the
// one-pass finish holds (a bias, ReLU, Clip, per-channel and scalar adds and
// multiplies) and ones it leaves to ApplyEpilogue (SiLU, an op after the
// clamp), on a partial block (24 channels) and tiles whose positions end in
// a tail of fewer than 16, counted alike. The rows' form is the same conv
// written to NHWC, itself checked against the double reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/conv_algorithm.h"
#include "kernels/conv_depthwise.h"
#include "kernels/conv_direct.h"
#include "kernels/layout.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::FromLayout;
using testing::MakeShape;
using testing::Tiling;
using testing::ToLayout;

struct NamedEpilogue {
  std::string name;
  std::vector<EpilogueOp> ops;
};

// Per-channel operands are one value per output channel (rows' view:
// row_stride 1, column stride 0); the scalar one value for the tile; the
// residual one of Y's shape (NCHW here, laid out as Y when run).
std::vector<NamedEpilogue> Epilogues(const ConvShape& s, const std::vector<float>& per_channel,
                                     const float* scalar, const float* residual) {
  const EpilogueOp multiply{EpilogueKind::kMultiply, per_channel.data(), 1, 0, 0, 1};
  const EpilogueOp add{EpilogueKind::kBiasAdd, per_channel.data(), 1, 0, 0, 1};
  const EpilogueOp add_scalar{EpilogueKind::kBiasAdd, scalar, 0, 0, 0, 1};
  const EpilogueOp relu = EpilogueOp::Act(EpilogueKind::kRelu);
  const EpilogueOp res = EpilogueOp::Residual(residual, s.pixels(), s.out_channels * s.pixels());
  return {{"bias only", {}},
          {"relu", {relu}},
          {"relu6", {EpilogueOp::Clip(0, 6)}},
          {"per-channel multiply, clip(-1, 1)", {multiply, EpilogueOp::Clip(-1, 1)}},
          {"scale, per-channel add, scalar add, relu",
           {EpilogueOp::Scale(0.5f), add, add_scalar, relu}},
          {"residual, relu", {res, relu}},
          {"per-channel multiply, residual, clip(-1, 1)", {multiply, res, EpilogueOp::Clip(-1, 1)}},
          {"silu (ApplyEpilogue)", {EpilogueOp::Act(EpilogueKind::kSilu)}},
          {"per-channel multiply, silu (ApplyEpilogue)",
           {multiply, EpilogueOp::Act(EpilogueKind::kSilu)}},
          {"relu then scale (ApplyEpilogue)", {relu, EpilogueOp::Scale(2.0f)}},
          {"residual then scale (ApplyEpilogue)", {res, EpilogueOp::Scale(2.0f)}}};
}

bool HasResidual(const std::vector<EpilogueOp>& ops) {
  return std::any_of(ops.begin(), ops.end(),
                     [](const EpilogueOp& op) { return op.kind == EpilogueKind::kResidualAdd; });
}

struct Finished {
  std::vector<float> y;  // NCHW
  KernelStats stats;
};

// Runs c's conv with X laid out as t says and its Y read back into NCHW.
Finished RunLaidOut(const testing::RandomConv& c, const ConvTiling& t, int threads) {
  const ConvShape& s = c.d.shape;
  const ActivationDims in{s.batch, s.in_channels, s.in_h, s.in_w};
  const ActivationDims out{s.batch, s.out_channels, s.out_h, s.out_w};
  const std::vector<float> x = ToLayout(c.x, in, t.in_layout);
  const std::vector<float> r = c.r.empty() ? c.r : ToLayout(c.r, out, t.out_layout);
  std::vector<float> y(static_cast<size_t>(out.elements()), -1.0f);
  ConvDesc d = c.d;
  d.x = x.data();
  d.y = y.data();
  for (EpilogueOp& op : d.epilogue)
    if (op.kind == EpilogueKind::kResidualAdd) op.data = r.data();
  KernelConfig config;
  config.threads = threads;
  Result<KernelStats> stats = RunConv(d, t, config);
  EXPECT_TRUE(stats.ok()) << (stats.ok() ? "" : stats.error().message()) << " " << t.ToString();
  return {FromLayout(y, out, t.out_layout), stats.ok() ? *stats : KernelStats{}};
}

double MaxRelativeDifference(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 1e-6;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(double(got[i]) - double(want[i])));
    scale = std::max(scale, std::abs(double(want[i])));
  }
  return err / scale;
}

// The blocks' finish against the rows' (the same tiling into NHWC) for every
// epilogue (finished in blocks where want_blocks, but for a residual into
// NCHW); the rows' form against the reference where the epilogue is the
// bias alone. A NaN in X stays NaN where the rows' form keeps it.
void ExpectBlocksFinishAsRows(const ConvShape& s, ConvTiling t, ActivationLayout out,
                              bool want_blocks) {
  const std::vector<float> per_channel = [&] {
    std::vector<float> v(static_cast<size_t>(s.out_channels));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f + 0.125f * static_cast<float>(i % 7);
    return v;
  }();
  const float scalar = -0.75f;
  testing::RandomConv c(s, true, /*residual_relu=*/true, 9, s.batch * s.out_channels * s.pixels());
  c.x[c.x.size() / 2] = std::nanf("");
  for (const NamedEpilogue& e : Epilogues(s, per_channel, &scalar, c.r.data())) {
    c.d.epilogue = e.ops;
    t.out_layout = out;
    const bool blocks = t.algorithm == ConvAlgorithm::kDepthwise
                            ? conv_detail::DepthwiseBlocked(c.d, t)
                            : conv_detail::DirectLayoutOf(c.d, t).finish_blocks;
    EXPECT_EQ(blocks, want_blocks && !(out == ActivationLayout::kNCHW && HasResidual(e.ops)))
        << e.name << " " << t.ToString();
    ConvTiling rows_t = t;
    rows_t.out_layout = ActivationLayout::kNHWC;
    for (int threads : {1, 2}) {
      const Finished got = RunLaidOut(c, t, threads);
      Finished rows = RunLaidOut(c, rows_t, threads);
      EXPECT_LE(MaxRelativeDifference(got.y, rows.y), 1e-6)
          << s.ToString() << " " << t.ToString() << " " << e.name << " threads " << threads;
      int64_t nan_differs = 0;
      for (size_t i = 0; i < got.y.size(); ++i)
        nan_differs += std::isnan(got.y[i]) != std::isnan(rows.y[i]);
      EXPECT_EQ(nan_differs, 0) << e.name << " " << t.ToString();
      // The NCHW16c depthwise finishes block by block, a scalar operand
      // counted for each block where the rows' form counts it for the tile.
      const bool scalar_per_block = blocks && t.algorithm == ConvAlgorithm::kDepthwise &&
                                    e.name.find("scalar") != std::string::npos;
      if (!scalar_per_block) {
        EXPECT_EQ(got.stats.bytes_global_to_local, rows.stats.bytes_global_to_local) << e.name;
      }
      EXPECT_EQ(got.stats.bytes_local_to_global, rows.stats.bytes_local_to_global) << e.name;
      if (e.ops.empty()) {
        testing::RandomConv clean(s, true, false, 9, s.batch * s.out_channels * s.pixels());
        const std::vector<double> want = clean.Want();
        rows = RunLaidOut(clean, rows_t, threads);
        EXPECT_LE(MaxRelativeDifference(rows.y, std::vector<float>(want.begin(), want.end())),
                  testing::ToleranceOf(t.algorithm))
            << s.ToString() << " " << rows_t.ToString();
      }
    }
  }
}

TEST(ConvFinishBlocks, DirectIntoNchwFinishesInBlocks) {
  // The stem's form (3 channels in, stride 2), a partial last block (24
  // channels) with 72 positions (a tail of 8), and a 1x1.
  for (const ConvShape& s : {MakeShape(1, 3, 17, 17, 32, 3, 2, 1),
                             MakeShape(2, 32, 9, 8, 24, 3, 1, 1), MakeShape(1, 32, 7, 7, 48, 1)})
    for (int64_t oc_block : {int64_t{16}, int64_t{32}}) {
      const ConvTiling t = Tiling(ConvAlgorithm::kDirect, oc_block, 3 * s.out_w, 16);
      ExpectBlocksFinishAsRows(s, t, ActivationLayout::kNCHW, true);
      if (s.out_channels % 16 == 0) ExpectBlocksFinishAsRows(s, t, ActivationLayout::kNCHWc, true);
    }
}

TEST(ConvFinishBlocks, DepthwiseOnNchw16cWritesNchw) {
  for (const ConvShape& s :
       {MakeShape(1, 32, 14, 14, 32, 3, 1, 1, 1, 32), MakeShape(2, 48, 9, 7, 48, 3, 2, 1, 1, 48)}) {
    ConvTiling t = Tiling(ConvAlgorithm::kDepthwise, 32, 2 * s.out_w, 16);
    t.in_layout = ActivationLayout::kNCHWc;
    ExpectBlocksFinishAsRows(s, t, ActivationLayout::kNCHW, true);
    // Blocks cut by oc_block, or an NCHW residual: the NCHW form's
    // transposing band copies, the same answers.
    t.oc_block = 24;
    ExpectBlocksFinishAsRows(s, t, ActivationLayout::kNCHW, false);
  }
  const ConvShape s = MakeShape(1, 32, 8, 8, 32, 3, 1, 1, 1, 32);
  testing::RandomConv c(s, true, /*residual_relu=*/true, 3, s.out_channels * s.pixels());
  ConvTiling t = Tiling(ConvAlgorithm::kDepthwise, 32, 2 * s.out_w, 16);
  t.in_layout = ActivationLayout::kNCHWc;
  EXPECT_FALSE(conv_detail::DepthwiseBlocked(c.d, t));
  const std::vector<double> want = c.Want();
  EXPECT_LE(
      MaxRelativeDifference(RunLaidOut(c, t, 2).y, std::vector<float>(want.begin(), want.end())),
      testing::ToleranceOf(ConvAlgorithm::kDepthwise));
}

TEST(ConvFinishBlocks, NchwOutputCountsAlikeInEveryRunMode) {
  const ConvShape s = MakeShape(1, 16, 9, 9, 24, 3, 1, 1);
  ConvTiling t = Tiling(ConvAlgorithm::kDirect, 32, 3 * s.out_w, 16);
  testing::ExpectRunModesCountAlike(s, t);
  const ConvShape dw = MakeShape(1, 32, 9, 9, 32, 3, 1, 1, 1, 32);
  t = Tiling(ConvAlgorithm::kDepthwise, 32, 3 * dw.out_w, 16);
  t.in_layout = ActivationLayout::kNCHWc;
  testing::ExpectRunModesCountAlike(dw, t);
}

}  // namespace
}  // namespace fusetune::kernels
