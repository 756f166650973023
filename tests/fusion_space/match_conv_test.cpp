// The convolution matcher: a Conv and its epilogue chain (bias, residual,
// ReLU, ReLU6 as Clip, HardSwish, SiLU) as one conv kernel instance, the
// reasons other groups are refused, and the conv tiling space (every point
// legal, JSON round trips, the default legal).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fusion_space/match.h"
#include "fusion_space/space.h"
#include "fusion_space/tiling_space.h"
#include "tests/fusion_space/model_util.h"
#include "tests/graph/test_util.h"

namespace fusetune::fusion_space {
namespace {

using kernels::EpilogueKind;

// A residual block, a depthwise conv with ReLU6, a pointwise conv with
// HardSwish, a 1-D conv with SiLU.
constexpr const char* kBlocks = R"(graph cnn opset 17 {
  input x: f32[2, 8, 10, 10]
  input s: f32[2, 4, 9]
  const w1: f32[16, 8, 3, 3]
  const b1: f32[16]
  const w2: f32[16, 16, 3, 3]
  const w3: f32[16, 1, 3, 3]
  const b3: f32[16, 1, 1]
  const w4: f32[8, 16, 1, 1]
  const w5: f32[6, 4, 3]
  const zero: f32[] = [0]
  const six: f32[] = [6]
  c1 = Conv(x, w1, b1) {pads=[1, 1, 1, 1]}
  r1 = Relu(c1)
  c2 = Conv(r1, w2) {pads=[1, 1, 1, 1]}
  a2 = Add(c2, r1)
  r2 = Relu(a2)
  c3 = Conv(r2, w3) {group=16, pads=[1, 1, 1, 1], strides=[2, 2]}
  a3 = Add(c3, b3)
  r3 = Clip(a3, zero, six)
  c4 = Conv(r3, w4)
  h4 = HardSwish(c4)
  c5 = Conv(s, w5) {pads=[1, 1]}
  g5 = Sigmoid(c5)
  m5 = Mul(c5, g5)
  output h4
  output m5
})";

// Node indices of kBlocks.
enum : int32_t { kC1, kR1, kC2, kA2, kR2, kC3, kA3, kR3, kC4, kH4, kC5, kG5, kM5 };

class MatchConvTest : public ::testing::Test {
 protected:
  MatchConvTest() : g_(testing::Parse(kBlocks)), flow_(g_) {}
  GroupMatch Match(std::vector<int32_t> nodes) { return MatchGroup(g_, flow_, nodes); }
  graph::Graph g_;
  Dataflow flow_;
};

TEST_F(MatchConvTest, ConvBiasReluIsOneConvKernel) {
  GroupMatch m = Match({kC1, kR1});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  const KernelInstance& k = m.instance;
  EXPECT_EQ(k.kind, KernelTemplate::kConv);
  EXPECT_NE(k.conv.bias, nullptr);
  ASSERT_EQ(k.conv.epilogue.size(), 1u);
  EXPECT_EQ(k.conv.epilogue[0].kind, EpilogueKind::kRelu);
  EXPECT_EQ(k.conv.shape,
            (kernels::ConvShape{2, 8, 10, 10, 16, 10, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(k.summary, "conv 2x8x10x10 -> 16 k3x3 s1 p1 d1 g1 +bias +relu");
}

TEST_F(MatchConvTest, ResidualAddThenReluReadsTheShortcutThroughStrides) {
  GroupMatch m = Match({kC2, kA2, kR2});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  const auto& ops = m.instance.conv.epilogue;
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].kind, EpilogueKind::kResidualAdd);
  EXPECT_EQ(ops[0].row_stride, 100);     // a channel of 10x10 positions
  EXPECT_EQ(ops[0].col_stride, 1);       // positions flattened
  EXPECT_EQ(ops[0].batch_stride, 1600);  // an image
  EXPECT_EQ(ops[1].kind, EpilogueKind::kRelu);
  EXPECT_EQ(m.instance.conv.bias, nullptr);
}

TEST_F(MatchConvTest, DepthwiseWithChannelAddAndClipTakesTheAddAsItsBias) {
  GroupMatch m = Match({kC3, kA3, kR3});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  const KernelInstance& k = m.instance;
  EXPECT_EQ(k.conv.shape.groups, 16);
  EXPECT_EQ(k.conv.shape.out_h, 5);
  EXPECT_NE(k.conv.bias, nullptr);  // the [16, 1, 1] Add
  ASSERT_EQ(k.conv.epilogue.size(), 1u);
  EXPECT_EQ(k.conv.epilogue[0].kind, EpilogueKind::kClip);
  EXPECT_EQ(k.conv.epilogue[0].scalar, 0.0f);
  EXPECT_EQ(k.conv.epilogue[0].scalar2, 6.0f);
}

TEST_F(MatchConvTest, HardSwishAndSiluEpilogues) {
  GroupMatch m = Match({kC4, kH4});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  ASSERT_EQ(m.instance.conv.epilogue.size(), 1u);
  EXPECT_EQ(m.instance.conv.epilogue[0].kind, EpilogueKind::kHardSwish);
  m = Match({kC5, kG5, kM5});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  ASSERT_EQ(m.instance.conv.epilogue.size(), 1u);
  EXPECT_EQ(m.instance.conv.epilogue[0].kind, EpilogueKind::kSilu);
  EXPECT_EQ(m.instance.conv.shape.in_h, 1);  // 1-D held as 2-D of height 1
  EXPECT_EQ(m.instance.conv.shape.kernel_h, 1);
  EXPECT_EQ(m.instance.conv.shape.out_w, 9);
}

// Alone or after other elementwise ops, Clip, HardSigmoid and HardSwish run
// in the elementwise template (tests/runtime/conv_program_test.cpp checks
// their values in unfused and random plans).
TEST_F(MatchConvTest, BoundedActivationsAloneAreElementwiseKernels) {
  EXPECT_EQ(Match({kR3}).instance.kind, KernelTemplate::kElementwise);  // Clip(a3, 0, 6)
  EXPECT_EQ(Match({kH4}).instance.kind, KernelTemplate::kElementwise);  // HardSwish
  GroupMatch m = Match({kA3, kR3});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_EQ(m.instance.kind, KernelTemplate::kElementwise);
}

TEST_F(MatchConvTest, RefusalsSayWhy) {
  GroupMatch m = Match({kC1, kR1, kC2});
  EXPECT_FALSE(m.decision.allowed());
  // Two convs are a conv chain's (match_conv_chain.h) or nothing: c2 is 3x3.
  EXPECT_NE(m.decision.reason().find("conv chain"), std::string::npos) << m.decision.reason();
  // c1 is read by r1 only, but r1 by c2 and by the residual add: the chain
  // {c2, a2} leaves a2 and nothing else; {c1, r1, c2} is refused above; a group whose Conv output
  // is also read outside writes two values.
  m = Match({kC1});
  EXPECT_EQ(m.instance.kind, KernelTemplate::kConv);
  EXPECT_TRUE(m.instance.conv.epilogue.empty());
}

// The default tiling is a rule-based compiler's: depthwise convs on the
// depthwise kernel, 1x1 convs as GEMMs, the rest direct.
TEST_F(MatchConvTest, DefaultTilingsPickTheRuleBasedAlgorithm) {
  const kernels::KernelConfig config = testing::SmallKernelConfig();
  auto algorithm = [&](std::vector<int32_t> nodes) {
    GroupMatch m = Match(nodes);
    EXPECT_TRUE(m.decision.allowed());
    TilingSpace space(m.instance, config);
    return std::get<kernels::ConvTiling>(space.Default()).algorithm;
  };
  EXPECT_EQ(algorithm({kC2, kA2, kR2}), kernels::ConvAlgorithm::kDirect);
  EXPECT_EQ(algorithm({kC3, kA3, kR3}), kernels::ConvAlgorithm::kDepthwise);
  EXPECT_EQ(algorithm({kC4, kH4}), kernels::ConvAlgorithm::kIm2colGemm);
}

// A depthwise conv's tiles hold oc_block channels: its channel blocks run
// to the output channels, not to a group's one.
TEST_F(MatchConvTest, DepthwiseChannelBlocksCrossGroups) {
  GroupMatch m = Match({kC3, kA3, kR3});
  TilingSpace space(m.instance, testing::SmallKernelConfig());
  std::set<int64_t> depthwise_blocks;
  for (const Tiling& t : space.Enumerate()) {
    const auto& c = std::get<kernels::ConvTiling>(t);
    if (c.algorithm == kernels::ConvAlgorithm::kDepthwise) depthwise_blocks.insert(c.oc_block);
  }
  EXPECT_EQ(depthwise_blocks, (std::set<int64_t>{16}));  // 16 channels: one block covers them
}

TEST_F(MatchConvTest, TilingSpaceHoldsLegalPointsOfEveryApplicableAlgorithm) {
  const kernels::KernelConfig config = testing::SmallKernelConfig();
  for (std::vector<int32_t> nodes : std::vector<std::vector<int32_t>>{
           {kC1, kR1}, {kC3, kA3, kR3}, {kC4, kH4}, {kC5, kG5, kM5}}) {
    GroupMatch m = Match(nodes);
    ASSERT_TRUE(m.decision.allowed());
    TilingSpace space(m.instance, config);
    const auto& all = space.Enumerate();
    ASSERT_FALSE(all.empty()) << m.instance.summary;
    std::set<kernels::ConvAlgorithm> algorithms;
    for (const Tiling& t : all) {
      const auto& c = std::get<kernels::ConvTiling>(t);
      algorithms.insert(c.algorithm);
      EXPECT_TRUE(kernels::ConvAlgorithmApplies(m.instance.conv.shape, c.algorithm).ok());
      Tiling back;
      ASSERT_TRUE(TilingFromJson(KernelTemplate::kConv, TilingToJson(t), &back).allowed());
      EXPECT_EQ(std::get<kernels::ConvTiling>(back), c);
      EXPECT_TRUE(space.ChoiceOf(t).has_value());
    }
    EXPECT_TRUE(algorithms.count(kernels::ConvAlgorithm::kIm2colGemm)) << m.instance.summary;
    EXPECT_TRUE(space.Check(space.Default()).allowed()) << m.instance.summary;
  }
  Tiling bad;
  EXPECT_FALSE(TilingFromJson(KernelTemplate::kConv,
                              nlohmann::json{{"algorithm", "fft"}, {"oc_block", 16}}, &bad)
                   .allowed());
}

}  // namespace
}  // namespace fusetune::fusion_space

namespace fusetune::fusion_space {
namespace {

// The same PyTorch CNN exported with its BatchNormalization nodes and with
// the exporter folding them: after the standard passes (FoldBatchNorm) the
// greedy plans have the same groups, kernels and workload keys, so tuning
// records of one serve the other.
TEST(MatchConvModels, ExportsWithAndWithoutBatchNormGiveTheSamePlan) {
  graph::Graph with_bn = testing::LoadTestModel("cnn_bn_op13");
  graph::Graph folded = testing::LoadTestModel("cnn_folded_op13");
  FusionSpace a(with_bn, testing::SmallKernelConfig());
  FusionSpace b(folded, testing::SmallKernelConfig());
  const Plan pa = a.Greedy(), pb = b.Greedy();
  ASSERT_EQ(pa.groups.size(), pb.groups.size());
  int convs = 0;
  for (size_t i = 0; i < pa.groups.size(); ++i) {
    const KernelInstance& ka = a.Match(pa.groups[i].nodes).instance;
    const KernelInstance& kb = b.Match(pb.groups[i].nodes).instance;
    EXPECT_EQ(ka.summary, kb.summary);
    EXPECT_EQ(a.Key(pa.groups[i].nodes).ToString(), b.Key(pb.groups[i].nodes).ToString());
    EXPECT_EQ(TilingToString(pa.groups[i].tiling), TilingToString(pb.groups[i].tiling));
    if (ka.kind == KernelTemplate::kConv || ka.kind == KernelTemplate::kConvChain)
      for (int32_t n : pa.groups[i].nodes) convs += with_bn.nodes[n].op_type == "Conv";
  }
  EXPECT_EQ(convs, 3);  // every conv in a conv kernel (the depthwise and pointwise ones fused)
}

}  // namespace
}  // namespace fusetune::fusion_space

namespace fusetune::fusion_space {
namespace {

// The ends of CNNs: ResNet's Conv -> residual Add -> Relu ->
// GlobalAveragePool -> Flatten -> Gemm, MobileNetV2's Conv -> Clip ->
// GlobalAveragePool, a GlobalMaxPool of a 40x40 map (too many positions for
// a pooled tile) and one whose pooled value is also a graph output.
constexpr const char* kEnds = R"(graph ends opset 17 {
  input x: f32[2, 16, 7, 7]
  input big: f32[1, 4, 40, 40]
  const w1: f32[16, 16, 3, 3]
  const w2: f32[24, 16, 1, 1]
  const w3: f32[8, 4, 3, 3]
  const fc: f32[16, 10]
  const zero: f32[] = [0]
  const six: f32[] = [6]
  c1 = Conv(x, w1) {pads=[1, 1, 1, 1]}
  a1 = Add(c1, x)
  r1 = Relu(a1)
  p1 = GlobalAveragePool(r1)
  f1 = Flatten(p1) {axis=1}
  y1 = Gemm(f1, fc)
  c2 = Conv(x, w2)
  k2 = Clip(c2, zero, six)
  p2 = GlobalAveragePool(k2)
  c3 = Conv(big, w3) {pads=[1, 1, 1, 1]}
  p3 = GlobalMaxPool(c3)
  c4 = Conv(x, w2)
  r4 = Relu(c4)
  p4 = GlobalMaxPool(r4)
  output y1
  output p2
  output p3
  output p4
  output r4
})";

enum : int32_t {
  kEC1,
  kEA1,
  kER1,
  kEP1,
  kEF1,
  kEY1,
  kEC2,
  kEK2,
  kEP2,
  kEC3,
  kEP3,
  kEC4,
  kER4,
  kEP4
};

class MatchConvPoolTest : public ::testing::Test {
 protected:
  MatchConvPoolTest() : g_(testing::Parse(kEnds)), flow_(g_) {}
  GroupMatch Match(std::vector<int32_t> nodes) { return MatchGroup(g_, flow_, nodes); }
  graph::Graph g_;
  Dataflow flow_;
};

TEST_F(MatchConvPoolTest, ResNetEndIsOnePooledConvKernel) {
  GroupMatch m = Match({kEC1, kEA1, kER1, kEP1});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  const KernelInstance& k = m.instance;
  EXPECT_EQ(k.kind, KernelTemplate::kConv);
  EXPECT_EQ(k.conv.global_pool, kernels::ConvGlobalPool::kAverage);
  ASSERT_EQ(k.conv.epilogue.size(), 2u);
  EXPECT_EQ(k.conv.epilogue[0].kind, EpilogueKind::kResidualAdd);
  EXPECT_EQ(k.conv.epilogue[0].batch_stride, 16 * 49);  // the residual keeps the conv's shape
  EXPECT_EQ(k.conv.epilogue[1].kind, EpilogueKind::kRelu);
  // Only the pooled [2, 16, 1, 1] leaves, through Y's slot.
  ASSERT_EQ(k.outputs.size(), 1u);
  EXPECT_EQ(k.outputs[0], g_.nodes[kEP1].outputs[0]);
  EXPECT_EQ(k.slots[SlotIndex(k.conv.y)].value, g_.nodes[kEP1].outputs[0]);
  EXPECT_EQ(k.summary,
            "conv 2x16x7x7 -> 16 k3x3 s1 p1 d1 g1 +residual_add +relu +global_average_pool");
}

TEST_F(MatchConvPoolTest, MobileNetEndAndGlobalMaxPool) {
  GroupMatch m = Match({kEC2, kEK2, kEP2});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_EQ(m.instance.conv.global_pool, kernels::ConvGlobalPool::kAverage);
  ASSERT_EQ(m.instance.conv.epilogue.size(), 1u);
  EXPECT_EQ(m.instance.conv.epilogue[0].kind, EpilogueKind::kClip);
  // The pool may read the conv's output itself.
  graph::Graph g = testing::Parse(R"(graph g opset 17 { input x: f32[1, 8, 5, 5]
    const w: f32[16, 8, 3, 3]  c = Conv(x, w)  p = GlobalMaxPool(c)  output p })");
  Dataflow flow(g);
  m = MatchGroup(g, flow, std::vector<int32_t>{0, 1});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_EQ(m.instance.conv.global_pool, kernels::ConvGlobalPool::kMax);
  EXPECT_TRUE(m.instance.conv.epilogue.empty());
}

TEST_F(MatchConvPoolTest, RefusalsSayWhy) {
  auto reason = [&](std::vector<int32_t> nodes) {
    GroupMatch m = Match(nodes);
    EXPECT_FALSE(m.decision.allowed());
    return m.decision.reason();
  };
  std::string why = reason({kER1, kEP1});
  EXPECT_NE(why.find("only into the Conv"), std::string::npos) << why;
  why = reason({kEC4, kER4, kEP4});  // r4 is a graph output too
  EXPECT_NE(why.find("read outside the group"), std::string::npos) << why;
  why = reason({kEC3, kEP3});  // a 40x40 map
  EXPECT_NE(why.find("1600 positions"), std::string::npos) << why;
  why = reason({kEC1, kEA1, kER1, kEP1, kEF1});
  EXPECT_NE(why.find("no fused kernel"), std::string::npos) << why;  // Flatten
  why = reason({kEC1, kEA1, kEP1});                                  // the pool skips the Relu
  EXPECT_FALSE(why.empty());
  // Alone, the pools stay pool kernels.
  EXPECT_EQ(Match({kEP1}).instance.kind, KernelTemplate::kPool);
}

// Every point of a pooled conv's tiling space holds all positions of an
// image in one tile; every algorithm that applies has points.
TEST_F(MatchConvPoolTest, TilingSpaceHoldsWholeImages) {
  const kernels::KernelConfig config = testing::SmallKernelConfig();
  GroupMatch m = Match({kEC1, kEA1, kER1, kEP1});
  ASSERT_TRUE(m.decision.allowed());
  TilingSpace space(m.instance, config);
  std::set<kernels::ConvAlgorithm> algorithms;
  for (const Tiling& t : space.Enumerate()) {
    const auto& c = std::get<kernels::ConvTiling>(t);
    algorithms.insert(c.algorithm);
    EXPECT_TRUE(kernels::ValidateConv(m.instance.conv, c, config).ok());
  }
  EXPECT_EQ(algorithms.size(), 4u);  // im2col, direct, both Winograds (not depthwise)
  EXPECT_TRUE(space.Check(space.Default()).allowed());
  kernels::ConvTiling cut = std::get<kernels::ConvTiling>(space.Default());
  cut.algorithm = kernels::ConvAlgorithm::kDirect;
  cut.pixel_block = 16;  // two rows of 7
  EXPECT_FALSE(space.Check(cut).allowed());
}

// The candidates hold the pooled groups, and the greedy plan takes them.
TEST_F(MatchConvPoolTest, GreedyPlanFusesThePools) {
  FusionSpace space(g_, testing::SmallKernelConfig());
  int pooled = 0;
  for (const PlanGroup& group : space.Greedy().groups) {
    const KernelInstance& k = space.Match(group.nodes).instance;
    pooled +=
        k.kind == KernelTemplate::kConv && k.conv.global_pool != kernels::ConvGlobalPool::kNone;
  }
  EXPECT_EQ(pooled, 2);  // ResNet's and MobileNet's ends
}

}  // namespace
}  // namespace fusetune::fusion_space
