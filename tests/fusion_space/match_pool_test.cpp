// The pool matcher: single MaxPool, AveragePool (count_include_pad,
// ceil_mode), GlobalAveragePool and GlobalMaxPool nodes as pool kernel
// instances with their windows resolved; pools in larger groups refused;
// the pool tiling space (every point legal, JSON round trips, the default
// legal) and its estimate.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fusion_space/match.h"
#include "fusion_space/space.h"
#include "fusion_space/tiling_space.h"
#include "tests/fusion_space/model_util.h"
#include "tests/graph/test_util.h"

namespace fusetune::fusion_space {
namespace {

using kernels::PoolKind;

constexpr const char* kPools = R"(graph pools opset 17 {
  input x: f32[1, 6, 15, 15]
  input s: f32[2, 5, 20]
  input v: f32[1, 3, 4, 5, 6]
  m = MaxPool(x) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]}
  r = Relu(m)
  a = AveragePool(r) {kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, count_include_pad=1}
  g = GlobalAveragePool(a)
  gm = GlobalMaxPool(x)
  a1 = AveragePool(s) {kernel_shape=[3], pads=[1, 1]}
  gv = GlobalAveragePool(v)
  output g
  output gm
  output a1
  output gv
})";

enum : int32_t { kM, kR, kAvg, kG, kGm, kAvg1, kGv };

class MatchPoolTest : public ::testing::Test {
 protected:
  MatchPoolTest() : g_(testing::Parse(kPools)), flow_(g_) {}
  GroupMatch Match(std::vector<int32_t> nodes) { return MatchGroup(g_, flow_, nodes); }
  graph::Graph g_;
  Dataflow flow_;
};

TEST_F(MatchPoolTest, MaxPoolIsAPoolKernel) {
  GroupMatch m = Match({kM});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  const KernelInstance& k = m.instance;
  EXPECT_EQ(k.kind, KernelTemplate::kPool);
  const kernels::PoolDesc& d = k.pool;
  EXPECT_EQ(d.kind, PoolKind::kMax);
  EXPECT_EQ(d.channels, 6);
  EXPECT_EQ(d.out_h, 8);
  EXPECT_EQ(d.out_w, 8);
  EXPECT_EQ(d.stride_h, 2);
  EXPECT_EQ(d.pad_top, 1);
  EXPECT_EQ(d.pad_bottom, 1);
  EXPECT_NE(d.x, nullptr);
  EXPECT_NE(d.y, nullptr);
  EXPECT_EQ(k.outputs.size(), 1u);
  EXPECT_EQ(k.summary.rfind("pool max 1x6x15x15 -> 8x8", 0), 0u) << k.summary;
}

TEST_F(MatchPoolTest, AveragePoolCeilModeAndIncludePad) {
  GroupMatch m = Match({kAvg});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  const kernels::PoolDesc& d = m.instance.pool;
  EXPECT_EQ(d.kind, PoolKind::kAverage);
  EXPECT_EQ(d.out_h, 4);  // ceil((8 - 2) / 2) + 1
  EXPECT_TRUE(d.count_include_pad);
  m = Match({kAvg1});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_EQ(m.instance.pool.in_h, 1);  // 1-D as 2-D of height 1
  EXPECT_EQ(m.instance.pool.kernel_h, 1);
  EXPECT_EQ(m.instance.pool.out_w, 20);
  EXPECT_FALSE(m.instance.pool.count_include_pad);
}

TEST_F(MatchPoolTest, GlobalPoolsFlattenThePlane) {
  GroupMatch m = Match({kG});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_EQ(m.instance.pool.kind, PoolKind::kGlobalAverage);
  m = Match({kGm});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_EQ(m.instance.pool.kind, PoolKind::kGlobalMax);
  EXPECT_EQ(m.instance.pool.in_h * m.instance.pool.in_w, 225);
  m = Match({kGv});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_EQ(m.instance.pool.in_h, 20);  // 3-D: 4 x 5 rows of 6
  EXPECT_EQ(m.instance.pool.in_w, 6);
}

// A pool fuses only as the end of a conv kernel (match_conv.h).
TEST_F(MatchPoolTest, PoolsAreNotFusedWithoutAConv) {
  GroupMatch m = Match({kM, kR});
  EXPECT_FALSE(m.decision.allowed());
  EXPECT_NE(m.decision.reason().find("only into the Conv"), std::string::npos)
      << m.decision.reason();
  m = Match({kR, kAvg});
  EXPECT_FALSE(m.decision.allowed());
  EXPECT_NE(m.decision.reason().find("AveragePool"), std::string::npos) << m.decision.reason();
}

TEST_F(MatchPoolTest, TilingSpaceIsLegalAndRoundTrips) {
  const kernels::KernelConfig config = testing::SmallKernelConfig();
  for (int32_t node : {kM, kAvg, kG, kGm, kAvg1, kGv}) {
    GroupMatch m = Match({node});
    ASSERT_TRUE(m.decision.allowed());
    TilingSpace space(m.instance, config);
    const auto& all = space.Enumerate();
    ASSERT_FALSE(all.empty()) << m.instance.summary;
    for (const Tiling& t : all) {
      EXPECT_EQ(TilingTemplate(t), KernelTemplate::kPool);
      EXPECT_TRUE(space.Check(t).allowed()) << TilingToString(t);
      Tiling back;
      ASSERT_TRUE(TilingFromJson(KernelTemplate::kPool, TilingToJson(t), &back).allowed());
      EXPECT_EQ(std::get<kernels::PoolTiling>(back), std::get<kernels::PoolTiling>(t));
      EXPECT_TRUE(space.ChoiceOf(t).has_value());
      const kernels::TilingEstimate e = EstimateTiling(m.instance, t, config.threads);
      EXPECT_GT(e.bytes_in, 0);
      EXPECT_GT(e.tiles, 0);
    }
    EXPECT_TRUE(space.Check(space.Default()).allowed()) << m.instance.summary;
  }
  Tiling bad;
  EXPECT_FALSE(
      TilingFromJson(KernelTemplate::kPool, nlohmann::json{{"channel_block", 16}}, &bad).allowed());
}

}  // namespace
}  // namespace fusetune::fusion_space
