// A MaxPool ending a conv kernel (match_conv.h, ConvDesc::max_pool):
// ResNet's stem (Conv -> Relu -> MaxPool 3x3/2) as one conv kernel writing
// only the pooled map, a ceil-mode pool on the conv itself, the refusals
// (dilations, the pooled value read outside the group, two pools; the
// importer refuses MaxPool's Indices output), and a tiling space whose every point holds a window's
// rows.
#include <gtest/gtest.h>

#include <set>

#include "fusion_space/match.h"
#include "fusion_space/space.h"
#include "fusion_space/tiling_space.h"
#include "tests/fusion_space/model_util.h"
#include "tests/graph/test_util.h"

namespace fusetune::fusion_space {
namespace {

constexpr const char* kStems = R"(graph stems opset 17 {
  input x: f32[1, 3, 32, 32]
  const w1: f32[16, 3, 7, 7]
  const b1: f32[16]
  const w2: f32[8, 16, 3, 3]
  c1 = Conv(x, w1, b1) {pads=[3, 3, 3, 3], strides=[2, 2]}
  r1 = Relu(c1)
  p1 = MaxPool(r1) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]}
  c2 = Conv(p1, w2) {pads=[1, 1, 1, 1]}
  p2 = MaxPool(c2) {kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1}
  c4 = Conv(p1, w2)
  p4 = MaxPool(c4) {kernel_shape=[2, 2], dilations=[2, 2]}
  c5 = Conv(p1, w2)
  r5 = Relu(c5)
  p5 = MaxPool(r5) {kernel_shape=[2, 2]}
  g5 = GlobalMaxPool(p5)
  output p2
  output p4
  output r5
  output g5
})";

enum : int32_t { kC1, kR1, kP1, kC2, kP2, kC4, kP4, kC5, kR5, kP5, kG5 };

class MatchConvMaxPoolTest : public ::testing::Test {
 protected:
  MatchConvMaxPoolTest() : g_(testing::Parse(kStems)), flow_(g_) {}
  GroupMatch Match(std::vector<int32_t> nodes) { return MatchGroup(g_, flow_, nodes); }
  std::string Refusal(std::vector<int32_t> nodes) {
    GroupMatch m = Match(nodes);
    EXPECT_FALSE(m.decision.allowed());
    return m.decision.reason();
  }
  graph::Graph g_;
  Dataflow flow_;
};

TEST_F(MatchConvMaxPoolTest, ResNetStemIsOneMaxPooledConvKernel) {
  GroupMatch m = Match({kC1, kR1, kP1});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  const KernelInstance& k = m.instance;
  EXPECT_EQ(k.kind, KernelTemplate::kConv);
  EXPECT_EQ(k.conv.max_pool, (kernels::ConvMaxPool{3, 3, 2, 2, 1, 1, 8, 8}));
  EXPECT_EQ(k.conv.global_pool, kernels::ConvGlobalPool::kNone);
  ASSERT_EQ(k.conv.epilogue.size(), 1u);
  EXPECT_EQ(k.conv.epilogue[0].kind, kernels::EpilogueKind::kRelu);
  // Only the pooled [1, 16, 8, 8] leaves, through Y's slot.
  ASSERT_EQ(k.outputs.size(), 1u);
  EXPECT_EQ(k.outputs[0], g_.nodes[kP1].outputs[0]);
  EXPECT_EQ(k.slots[SlotIndex(k.conv.y)].value, g_.nodes[kP1].outputs[0]);
  EXPECT_EQ(k.summary,
            "conv 1x3x32x32 -> 16 k7x7 s2 p3 d1 g1 +bias +relu +max_pool k3x3 s2x2 p1,1 -> 8x8");
}

TEST_F(MatchConvMaxPoolTest, CeilModePoolOnTheConvItself) {
  GroupMatch m = Match({kC2, kP2});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_TRUE(m.instance.conv.epilogue.empty());
  EXPECT_EQ(m.instance.conv.max_pool, (kernels::ConvMaxPool{2, 2, 2, 2, 0, 0, 4, 4}));  // 8 -> 4
}

TEST_F(MatchConvMaxPoolTest, RefusalsSayWhy) {
  std::string why = Refusal({kC4, kP4});
  EXPECT_NE(why.find("dilations"), std::string::npos) << why;
  why = Refusal({kC5, kR5, kP5});  // r5 is a graph output too
  EXPECT_NE(why.find("read outside the group"), std::string::npos) << why;
  why = Refusal({kC5, kR5, kP5, kG5});
  EXPECT_FALSE(why.empty());
  why = Refusal({kR1, kP1});
  EXPECT_NE(why.find("only into the Conv"), std::string::npos) << why;
  // Alone, the pool stays a pool kernel.
  EXPECT_EQ(Match({kP1}).instance.kind, KernelTemplate::kPool);
}

// Every point of the stem's tiling space holds at least a window's rows;
// every algorithm that applies to a 7x7/2 conv has points; tilings round-trip.
TEST_F(MatchConvMaxPoolTest, TilingSpaceHoldsWindows) {
  const kernels::KernelConfig config = testing::SmallKernelConfig();
  GroupMatch m = Match({kC1, kR1, kP1});
  ASSERT_TRUE(m.decision.allowed());
  TilingSpace space(m.instance, config);
  std::set<kernels::ConvAlgorithm> algorithms;
  for (const Tiling& t : space.Enumerate()) {
    const auto& c = std::get<kernels::ConvTiling>(t);
    algorithms.insert(c.algorithm);
    EXPECT_GE(c.pixel_block, 3 * 16) << c.ToString();
    EXPECT_TRUE(kernels::ValidateConv(m.instance.conv, c, config).ok());
  }
  EXPECT_EQ(algorithms.size(), 2u);  // im2col and direct
  EXPECT_TRUE(space.Check(space.Default()).allowed());
  kernels::ConvTiling short_band = std::get<kernels::ConvTiling>(space.Default());
  short_band.pixel_block = 32;  // two rows of 16
  EXPECT_FALSE(space.Check(short_band).allowed());
}

TEST_F(MatchConvMaxPoolTest, GreedyPlanFusesTheStemPool) {
  FusionSpace space(g_, testing::SmallKernelConfig());
  int pooled = 0;
  for (const PlanGroup& group : space.Greedy().groups) {
    const KernelInstance& k = space.Match(group.nodes).instance;
    pooled += k.kind == KernelTemplate::kConv && k.conv.max_pool.active();
  }
  EXPECT_EQ(pooled, 2);  // the stem and c2's ceil-mode pool
}

}  // namespace
}  // namespace fusetune::fusion_space
