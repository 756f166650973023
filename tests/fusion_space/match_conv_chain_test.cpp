// The conv-chain matcher: MobileNetV2's inverted residual (1x1 expand,
// ReLU6, depthwise, ReLU6, 1x1 project, residual Add) and a depthwise conv
// with the pointwise one after it as conv-chain instances; the reasons other
// multi-conv groups are refused; the conv-chain tiling space (every point
// legal, JSON round trips, the default legal, nothing when the chain cannot
// fit the local buffer).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fusion_space/match.h"
#include "fusion_space/tiling_space.h"
#include "tests/graph/test_util.h"

namespace fusetune::fusion_space {
namespace {

using kernels::EpilogueKind;

constexpr const char* kChains = R"(graph chains opset 17 {
  input x: f32[1, 8, 12, 12]
  const we: f32[48, 8, 1, 1]
  const be: f32[48]
  const wd: f32[48, 1, 3, 3]
  const bd: f32[48]
  const wp: f32[8, 48, 1, 1]
  const bp: f32[8]
  const wd2: f32[8, 1, 3, 3]
  const wq: f32[16, 8, 1, 1]
  const zero: f32[] = [0]
  const six: f32[] = [6]
  e = Conv(x, we, be)
  re = Clip(e, zero, six)
  d = Conv(re, wd, bd) {group=48, pads=[1, 1, 1, 1]}
  rd = Clip(d, zero, six)
  p = Conv(rd, wp, bp)
  a = Add(p, x)
  d2 = Conv(a, wd2) {group=8, pads=[1, 1, 1, 1], strides=[2, 2]}
  r2 = Relu(d2)
  q = Conv(r2, wq)
  output q
})";

enum : int32_t { kE, kRe, kD, kRd, kP, kA, kD2, kR2, kQ };

class MatchConvChainTest : public ::testing::Test {
 protected:
  MatchConvChainTest() : g_(testing::Parse(kChains)), flow_(g_) {}
  GroupMatch Match(std::vector<int32_t> nodes) { return MatchGroup(g_, flow_, nodes); }
  graph::Graph g_;
  Dataflow flow_;
};

TEST_F(MatchConvChainTest, InvertedResidualIsOneConvChain) {
  GroupMatch m = Match({kE, kRe, kD, kRd, kP, kA});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  const KernelInstance& k = m.instance;
  EXPECT_EQ(k.kind, KernelTemplate::kConvChain);
  const kernels::ConvChainDesc& d = k.conv_chain;
  EXPECT_TRUE(d.expand);
  EXPECT_EQ(d.in_channels, 8);
  EXPECT_EQ(d.out_channels, 8);
  EXPECT_EQ(d.depthwise.in_channels, 48);
  EXPECT_EQ(d.depthwise.groups, 48);
  EXPECT_NE(d.expand_bias, nullptr);
  EXPECT_NE(d.dw_bias, nullptr);
  EXPECT_NE(d.project_bias, nullptr);
  ASSERT_EQ(d.expand_act.size(), 1u);
  EXPECT_EQ(d.expand_act[0].kind, EpilogueKind::kClip);
  ASSERT_EQ(d.dw_act.size(), 1u);
  EXPECT_EQ(d.dw_act[0].kind, EpilogueKind::kClip);
  ASSERT_EQ(d.epilogue.size(), 1u);
  EXPECT_EQ(d.epilogue[0].kind, EpilogueKind::kResidualAdd);
  EXPECT_EQ(k.outputs.size(), 1u);
  EXPECT_NE(k.summary.find("conv chain"), std::string::npos) << k.summary;
  // Without the residual Add the project's output leaves the group.
  m = Match({kE, kRe, kD, kRd, kP});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_TRUE(m.instance.conv_chain.epilogue.empty());
}

TEST_F(MatchConvChainTest, DepthwiseThenPointwiseIsAChainWithoutExpand) {
  GroupMatch m = Match({kD2, kR2, kQ});
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  const kernels::ConvChainDesc& d = m.instance.conv_chain;
  EXPECT_EQ(m.instance.kind, KernelTemplate::kConvChain);
  EXPECT_FALSE(d.expand);
  EXPECT_EQ(d.in_channels, 8);
  EXPECT_EQ(d.out_channels, 16);
  EXPECT_EQ(d.depthwise.stride_h, 2);
  ASSERT_EQ(d.dw_act.size(), 1u);
  EXPECT_EQ(d.dw_act[0].kind, EpilogueKind::kRelu);
}

TEST_F(MatchConvChainTest, RefusalsSayWhy) {
  auto reason = [&](std::vector<int32_t> nodes) {
    GroupMatch m = Match(nodes);
    EXPECT_FALSE(m.decision.allowed()) << m.instance.summary;
    return m.decision.allowed() ? std::string() : m.decision.reason();
  };
  // The depthwise conv last: nothing projects.
  EXPECT_NE(reason({kE, kRe, kD}).find("ends a conv chain"), std::string::npos);
  // The residual Add between the project and the next depthwise conv reads x.
  EXPECT_NE(reason({kP, kA, kD2, kR2, kQ}).find("reads an operand"), std::string::npos);
  // Four convs.
  EXPECT_NE(reason({kE, kRe, kD, kRd, kP, kA, kD2}).find("2 or 3"), std::string::npos);
}

TEST(MatchConvChain, AnIntermediateReadOutsideIsRefused) {
  graph::Graph g = testing::Parse(R"(graph leak opset 17 {
    input x: f32[1, 4, 6, 6]
    const wd: f32[4, 1, 3, 3]
    const wp: f32[8, 4, 1, 1]
    d = Conv(x, wd) {group=4, pads=[1, 1, 1, 1]}
    r = Relu(d)
    p = Conv(r, wp)
    output p
    output r
  })");
  Dataflow flow(g);
  const int32_t nodes[] = {0, 1, 2};
  GroupMatch m = MatchGroup(g, flow, nodes);
  ASSERT_FALSE(m.decision.allowed());
  EXPECT_NE(m.decision.reason().find("writes one value"), std::string::npos) << m.decision.reason();
}

// Convs that do not read each other through the group: refused with a
// reason, not followed out of the group (this crashed the matcher).
TEST(MatchConvChain, ConvsThatDoNotReadEachOtherAreRefused) {
  const char* graphs[] = {R"(graph branches opset 17 {
    input x: f32[1, 8, 6, 6]
    const wa: f32[8, 8, 1, 1]
    const wd: f32[8, 1, 3, 3]
    const wp: f32[8, 8, 1, 1]
    a = Conv(x, wa)
    d = Conv(x, wd) {group=8, pads=[1, 1, 1, 1]}
    p = Conv(d, wp)
    s = Add(p, a)
    output s
  })",
                          R"(graph siblings opset 17 {
    input x: f32[1, 8, 6, 6]
    const wd: f32[8, 1, 3, 3]
    const wp: f32[8, 8, 1, 1]
    d = Conv(x, wd) {group=8, pads=[1, 1, 1, 1]}
    p = Conv(x, wp)
    s = Add(p, d)
    output s
  })"};
  for (const char* text : graphs) {
    graph::Graph g = testing::Parse(text);
    Dataflow flow(g);
    std::vector<int32_t> nodes(g.nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) nodes[i] = static_cast<int32_t>(i);
    GroupMatch m = MatchGroup(g, flow, nodes);
    ASSERT_FALSE(m.decision.allowed()) << m.instance.summary;
    EXPECT_NE(m.decision.reason().find("does not read"), std::string::npos) << m.decision.reason();
  }
}

// Convs without biases, each followed by an Add of a per-channel constant
// (some exporters' folded BN): the adds become the stages' biases.
TEST(MatchConvChain, ChannelAddsAfterBiaslessConvsBecomeBiases) {
  graph::Graph g = testing::Parse(R"(graph biasless opset 17 {
    input x: f32[1, 8, 6, 6]
    const we: f32[16, 8, 1, 1]
    const be: f32[1, 16, 1, 1]
    const wd: f32[16, 1, 3, 3]
    const bd: f32[1, 16, 1, 1]
    const wp: f32[8, 16, 1, 1]
    const bp: f32[1, 8, 1, 1]
    e = Conv(x, we)
    ea = Add(e, be)
    er = Relu(ea)
    d = Conv(er, wd) {group=16, pads=[1, 1, 1, 1]}
    da = Add(d, bd)
    dr = Relu(da)
    p = Conv(dr, wp)
    pa = Add(p, bp)
    output pa
  })");
  Dataflow flow(g);
  const int32_t nodes[] = {0, 1, 2, 3, 4, 5, 6, 7};
  GroupMatch m = MatchGroup(g, flow, nodes);
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  const kernels::ConvChainDesc& d = m.instance.conv_chain;
  EXPECT_NE(d.expand_bias, nullptr);
  EXPECT_NE(d.dw_bias, nullptr);
  EXPECT_NE(d.project_bias, nullptr);
  ASSERT_EQ(d.expand_act.size(), 1u);
  EXPECT_EQ(d.expand_act[0].kind, EpilogueKind::kRelu);
  ASSERT_EQ(d.dw_act.size(), 1u);
  EXPECT_TRUE(d.epilogue.empty());
}

TEST_F(MatchConvChainTest, TilingSpaceIsLegalRoundTripsAndHasALegalDefault) {
  GroupMatch m = Match({kE, kRe, kD, kRd, kP, kA});
  ASSERT_TRUE(m.decision.allowed());
  kernels::KernelConfig config;
  config.local_buffer_bytes = 256 * 1024;
  TilingSpace space(m.instance, config);
  const std::vector<Tiling>& all = space.Enumerate();
  ASSERT_FALSE(all.empty());
  for (const Tiling& t : all) {
    EXPECT_TRUE(space.Check(t).allowed()) << TilingToString(t);
    Tiling back;
    ASSERT_TRUE(TilingFromJson(KernelTemplate::kConvChain, TilingToJson(t), &back).allowed());
    EXPECT_EQ(TilingToString(back), TilingToString(t));
    EXPECT_TRUE(space.ChoiceOf(t).has_value());
  }
  const Tiling preferred = space.Default();
  EXPECT_TRUE(space.Check(preferred).allowed()) << TilingToString(preferred);
  // e_block past the expanded channels is the same schedule as 48.
  const auto& t = std::get<kernels::ConvChainTiling>(all.front());
  kernels::ConvChainTiling past = t;
  past.e_block = 96;
  if (past.e_block % past.mr == 0) {
    EXPECT_FALSE(space.Check(past).allowed());
  }
  Tiling bad;
  EXPECT_FALSE(
      TilingFromJson(KernelTemplate::kConvChain, nlohmann::json{{"rows", 2}}, &bad).allowed());
  // A local buffer too small for any band: no tiling, so the fusion is not legal here.
  config.local_buffer_bytes = 1024;
  EXPECT_TRUE(TilingSpace(m.instance, config).Enumerate().empty());
}

}  // namespace
}  // namespace fusetune::fusion_space
