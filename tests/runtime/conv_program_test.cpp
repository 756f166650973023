// CNN programs against the reference executor: convolution groups (and a
// depthwise -> pointwise conv chain) with their epilogues (bias, residual,
// ReLU, ReLU6, HardSwish, SiLU), depthwise and 1-D convs, pools and a
// classifier head, in the unfused, greedy and
// random plans, each tiling drawn from the conv tiling space (every
// algorithm that applies); max, average and global pools (ceil_mode,
// count_include_pad, 1-D) as pool kernels between them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>

#include "fusion_space/space.h"
#include "graph/passes.h"
#include "graph/reference_executor.h"
#include "runtime/executor.h"
#include "tests/graph/test_util.h"

namespace fusetune::runtime {
namespace {

// Relative to the output's scale: Winograd F(4x4, 3x3) is the least exact
// algorithm a random plan may draw (kernels/conv_winograd.h).
constexpr double kConvProgramTolerance = 1e-3;

constexpr const char* kSmallCnn = R"(graph cnn opset 17 {
  input x: f32[1, 3, 20, 20]
  const w0: f32[16, 3, 3, 3]
  const b0: f32[16]
  const w1: f32[16, 16, 3, 3]
  const b1: f32[16]
  const w2: f32[16, 1, 3, 3]
  const b2: f32[16, 1, 1]
  const w3: f32[24, 16, 1, 1]
  const w4: f32[24, 24, 3, 3]
  const fc: f32[24, 10]
  const fb: f32[10]
  const zero: f32[] = [0]
  const six: f32[] = [6]
  c0 = Conv(x, w0, b0) {pads=[1, 1, 1, 1], strides=[2, 2]}
  r0 = Relu(c0)
  c1 = Conv(r0, w1, b1) {pads=[1, 1, 1, 1]}
  a1 = Add(c1, r0)
  r1 = Relu(a1)
  c2 = Conv(r1, w2) {group=16, pads=[1, 1, 1, 1]}
  a2 = Add(c2, b2)
  r2 = Clip(a2, zero, six)
  c3 = Conv(r2, w3)
  h3 = HardSwish(c3)
  c4 = Conv(h3, w4) {pads=[2, 2, 2, 2], dilations=[2, 2]}
  s4 = Sigmoid(c4)
  m4 = Mul(c4, s4)
  p = GlobalAveragePool(m4)
  f = Flatten(p) {axis=1}
  y = Gemm(f, fc, fb)
  output y
})";

std::string Describe(fusion_space::FusionSpace& space, const fusion_space::Plan& plan) {
  std::string s;
  for (const fusion_space::PlanGroup& group : plan.groups)
    s += fmt::format("\n  {} [{}]", space.Match(group.nodes).instance.summary,
                     fusion_space::TilingToString(group.tiling));
  return s;
}

// Runs the unfused plan, `greedy` and `random_plans` random plans (from
// `seed`), each twice (the second run on the pre-packed weights), against
// the reference outputs; `visit` sees each plan first. Stops at the first failure.
void ExpectPlansMatch(fusion_space::FusionSpace& space, const fusion_space::Plan& greedy,
                      const graph::TensorMap& feeds, const graph::TensorMap& want, uint64_t seed,
                      int random_plans,
                      const std::function<void(const fusion_space::Plan&)>& visit = {}) {
  Rng rng(seed);
  for (int i = -2; i < random_plans; ++i) {
    const fusion_space::Plan plan = i == -2   ? space.Unfused()
                                    : i == -1 ? greedy
                                              : space.Random(rng);
    if (visit) visit(plan);
    auto exe = KernelProgram::Compile(space, plan);
    ASSERT_TRUE(exe.ok()) << exe.error().message();
    for (int run = 0; run < 2; ++run) {
      auto got = (*exe)->Run(feeds);
      ASSERT_TRUE(got.ok()) << got.error().message();
      for (const auto& [name, w] : want)
        EXPECT_LE(testing::ScaledError(got->at(name), w), kConvProgramTolerance)
            << fmt::format("plan {} run {} output {}: {}", i, run, name, Describe(space, plan));
    }
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(ConvProgram, UnfusedGreedyAndRandomPlansMatchTheReference) {
  graph::Graph g = testing::Parse(kSmallCnn);
  kernels::KernelConfig config;
  config.local_buffer_bytes = 256 * 1024;
  fusion_space::FusionSpace space(g, config);
  const graph::TensorMap feeds = graph::RandomFeeds(g, 3);
  auto want = graph::RunReference(g, feeds);
  ASSERT_TRUE(want.ok()) << want.error().message();
  const fusion_space::Plan greedy = space.Greedy();
  // Every conv runs in a conv kernel: c2 (depthwise) and c3 (pointwise) as one conv chain.
  int convs = 0, chains = 0;
  for (const fusion_space::PlanGroup& group : greedy.groups) {
    const fusion_space::KernelTemplate kind = space.Match(group.nodes).instance.kind;
    chains += kind == fusion_space::KernelTemplate::kConvChain;
    if (kind == fusion_space::KernelTemplate::kConv ||
        kind == fusion_space::KernelTemplate::kConvChain)
      for (int32_t n : group.nodes) convs += g.nodes[n].op_type == "Conv";
  }
  EXPECT_EQ(convs, 5) << Describe(space, greedy);
  EXPECT_EQ(chains, 1) << Describe(space, greedy);
  ExpectPlansMatch(space, greedy, feeds, want->outputs, 2026, 40);
}

// A stem (conv, ReLU, 3x3 stride-2 max pool: one max-pooled conv kernel in
// the greedy plan, and in the random plans that draw it), a residual conv on
// the pooled map, average pools with ceil_mode and count_include_pad, a
// ceil_mode max pool, a global max pool, and 1-D max and average pools.
constexpr const char* kPoolCnn = R"(graph poolcnn opset 17 {
  input x: f32[2, 3, 23, 23]
  input t: f32[2, 5, 17]
  const w0: f32[16, 3, 3, 3]
  const b0: f32[16]
  const w1: f32[16, 16, 3, 3]
  c0 = Conv(x, w0, b0) {pads=[1, 1, 1, 1]}
  r0 = Relu(c0)
  m0 = MaxPool(r0) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]}
  c1 = Conv(m0, w1) {pads=[1, 1, 1, 1]}
  a1 = Add(c1, m0)
  a2 = AveragePool(a1) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1}
  a3 = AveragePool(a2) {kernel_shape=[2, 2], pads=[0, 0, 1, 1], count_include_pad=1}
  m3 = MaxPool(a3) {kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1}
  g = GlobalMaxPool(m3)
  p1 = MaxPool(t) {kernel_shape=[3], strides=[2]}
  q1 = AveragePool(t) {kernel_shape=[4], pads=[2, 2]}
  output g
  output a2
  output p1
  output q1
})";

TEST(ConvProgram, PoolsRunAsPoolKernelsInEveryPlan) {
  graph::Graph g = testing::Parse(kPoolCnn);
  kernels::KernelConfig config;
  config.local_buffer_bytes = 256 * 1024;
  fusion_space::FusionSpace space(g, config);
  const graph::TensorMap feeds = graph::RandomFeeds(g, 5);
  auto want = graph::RunReference(g, feeds);
  ASSERT_TRUE(want.ok()) << want.error().message();
  const fusion_space::Plan greedy = space.Greedy();
  auto count = [&](const fusion_space::Plan& plan, int* pool_kernels, int* max_pooled_convs) {
    for (const fusion_space::PlanGroup& group : plan.groups) {
      const fusion_space::KernelInstance& k = space.Match(group.nodes).instance;
      *pool_kernels += k.kind == fusion_space::KernelTemplate::kPool;
      *max_pooled_convs +=
          k.kind == fusion_space::KernelTemplate::kConv && k.conv.max_pool.active();
    }
  };
  int pool_kernels = 0, max_pooled = 0;
  count(greedy, &pool_kernels, &max_pooled);
  EXPECT_EQ(pool_kernels, 6) << Describe(space, greedy);
  EXPECT_EQ(max_pooled, 1) << Describe(space, greedy);  // the stem
  max_pooled = 0;
  ExpectPlansMatch(space, greedy, feeds, want->outputs, 37, 30,
                   [&](const fusion_space::Plan& plan) {
                     int pools = 0;
                     count(plan, &pools, &max_pooled);
                   });
  EXPECT_GT(max_pooled, 5);  // random plans drew the stem's pooled conv
}

// BatchNormalizations that no conv absorbs (after a max pool, after a
// residual Add, on a 1-D signal) run lowered to Mul and Add: elementwise
// work in fused kernels, never a reference kernel, in every plan.
constexpr const char* kBnCnn = R"(graph bncnn opset 17 {
  input x: f32[1, 3, 16, 16]
  input t: f32[2, 4, 11]
  const w0: f32[8, 3, 3, 3]
  const b0: f32[8]
  const w1: f32[8, 8, 3, 3]
  const s8: f32[8] = [1, 2, 0.5, 1.5, 0.8, 1.2, 0.9, 1.1]
  const h8: f32[8]
  const m8: f32[8]
  const v8: f32[8] = [1, 4, 0.5, 2, 0.7, 1.3, 0.6, 1.8]
  const s4: f32[4] = [0.5, 1, 1.5, 2]
  const h4: f32[4]
  const m4: f32[4]
  const v4: f32[4] = [2, 0.5, 1, 3]
  c0 = Conv(x, w0, b0) {pads=[1, 1, 1, 1]}
  r0 = Relu(c0)
  p0 = MaxPool(r0) {kernel_shape=[2, 2], strides=[2, 2]}
  n0 = BatchNormalization(p0, s8, h8, m8, v8)
  r1 = Relu(n0)
  c1 = Conv(r1, w1) {pads=[1, 1, 1, 1]}
  a1 = Add(c1, p0)
  n1 = BatchNormalization(a1, s8, h8, m8, v8) {epsilon=1e-3}
  y = Relu(n1)
  u = Relu(t)
  n2 = BatchNormalization(u, s4, h4, m4, v4)
  output y
  output n2
})";

TEST(ConvProgram, LoweredBatchNormsRunInFusedKernels) {
  graph::Graph g = testing::Parse(kBnCnn);
  const graph::TensorMap feeds = graph::RandomFeeds(g, 8);
  auto want = graph::RunReference(g, feeds);  // with the BatchNormalization nodes
  ASSERT_TRUE(want.ok()) << want.error().message();
  ASSERT_TRUE(graph::RunStandardPasses(g).ok());
  for (const graph::Node& node : g.nodes) ASSERT_NE(node.op_type, "BatchNormalization");
  kernels::KernelConfig config;
  config.local_buffer_bytes = 256 * 1024;
  fusion_space::FusionSpace space(g, config);
  ExpectPlansMatch(space, space.Greedy(), feeds, want->outputs, 11, 20,
                   [&](const fusion_space::Plan& plan) {
                     for (const fusion_space::PlanGroup& group : plan.groups)
                       EXPECT_NE(space.Match(group.nodes).instance.kind,
                                 fusion_space::KernelTemplate::kReference)
                           << Describe(space, plan);
                   });
}

// The ends of CNNs with their global pool fused into the last conv:
// ResNet's Conv -> residual Add -> Relu -> GlobalAveragePool -> Flatten ->
// Gemm, MobileNetV2's Conv -> Clip -> GlobalAveragePool, a 3x3 conv with
// GlobalMaxPool (Winograd applies), a depthwise conv and a 1-D conv pooled.
constexpr const char* kPooledEnds = R"(graph ends opset 17 {
  input x: f32[2, 16, 7, 7]
  input s: f32[1, 6, 19]
  const w1: f32[16, 16, 3, 3]
  const b1: f32[16]
  const w2: f32[40, 16, 1, 1]
  const b2: f32[40]
  const w3: f32[24, 16, 3, 3]
  const w4: f32[16, 1, 3, 3]
  const w5: f32[12, 6, 3]
  const fc: f32[16, 10]
  const fb: f32[10]
  const zero: f32[] = [0]
  const six: f32[] = [6]
  c1 = Conv(x, w1, b1) {pads=[1, 1, 1, 1]}
  a1 = Add(c1, x)
  r1 = Relu(a1)
  p1 = GlobalAveragePool(r1)
  f1 = Flatten(p1) {axis=1}
  y1 = Gemm(f1, fc, fb)
  c2 = Conv(r1, w2, b2)
  k2 = Clip(c2, zero, six)
  p2 = GlobalAveragePool(k2)
  c3 = Conv(x, w3) {pads=[1, 1, 1, 1]}
  p3 = GlobalMaxPool(c3)
  c4 = Conv(x, w4) {group=16, pads=[1, 1, 1, 1]}
  r4 = Relu(c4)
  p4 = GlobalAveragePool(r4)
  c5 = Conv(s, w5) {pads=[1, 1]}
  p5 = GlobalMaxPool(c5)
  output y1
  output p2
  output p3
  output p4
  output p5
})";

TEST(ConvProgram, GlobalPoolsFusedIntoConvsInEveryPlan) {
  graph::Graph g = testing::Parse(kPooledEnds);
  kernels::KernelConfig config;
  config.local_buffer_bytes = 256 * 1024;
  fusion_space::FusionSpace space(g, config);
  const graph::TensorMap feeds = graph::RandomFeeds(g, 6);
  auto want = graph::RunReference(g, feeds);
  ASSERT_TRUE(want.ok()) << want.error().message();
  const fusion_space::Plan greedy = space.Greedy();
  auto pooled_convs = [&](const fusion_space::Plan& plan) {
    int n = 0;
    for (const fusion_space::PlanGroup& group : plan.groups) {
      const fusion_space::KernelInstance& k = space.Match(group.nodes).instance;
      n += k.kind == fusion_space::KernelTemplate::kConv &&
           k.conv.global_pool != kernels::ConvGlobalPool::kNone;
    }
    return n;
  };
  // r1 is read by c2 too, so its pool stays a pool kernel; the other four fuse.
  EXPECT_EQ(pooled_convs(greedy), 4) << Describe(space, greedy);
  int pooled = 0;
  ExpectPlansMatch(space, greedy, feeds, want->outputs, 41, 40,
                   [&](const fusion_space::Plan& plan) { pooled += pooled_convs(plan); });
  EXPECT_GT(pooled, 40);  // random plans drew pooled convs with random tilings
}

// Under a mixed policy every conv and conv-chain group of the greedy plan
// given a bf16 tiling drawn from its space, im2col's in even trials and
// direct's in odd ones (where the group has one): the program pre-packs bf16 weights
// and its outputs stay within what bf16 products allow (2^-8 per operand,
// summed over at most 216 terms here: 2e-2 of the output's scale is far
// above what random signs leave, which is about 1e-3).
TEST(ConvProgram, Bf16ConvGroupsMatchTheReferenceWithinBf16Rounding) {
  graph::Graph g = testing::Parse(kSmallCnn);
  kernels::KernelConfig config;
  config.local_buffer_bytes = 256 * 1024;
  config.offer_bf16 = true;
  fusion_space::FusionSpace space(g, config);
  const graph::TensorMap feeds = graph::RandomFeeds(g, 3);
  auto want = graph::RunReference(g, feeds);
  ASSERT_TRUE(want.ok()) << want.error().message();
  Rng rng(40);
  int direct = 0, chains = 0;
  for (int trial = 0; trial < 4; ++trial) {
    const kernels::ConvAlgorithm algorithm =
        trial % 2 ? kernels::ConvAlgorithm::kDirect : kernels::ConvAlgorithm::kIm2colGemm;
    fusion_space::Plan plan = space.Greedy();
    int bf16 = 0;
    for (fusion_space::PlanGroup& group : plan.groups) {
      std::vector<fusion_space::Tiling> points, of_algorithm;
      for (const fusion_space::Tiling& t : space.Tilings(group.nodes).Enumerate())
        if (fusion_space::TilingPrecision(t) == kernels::Precision::kBf16) {
          points.push_back(t);
          const auto* conv = std::get_if<kernels::ConvTiling>(&t);
          if (conv && conv->algorithm == algorithm) of_algorithm.push_back(t);
        }
      if (points.empty()) continue;
      if (!of_algorithm.empty()) points = of_algorithm;
      direct += algorithm == kernels::ConvAlgorithm::kDirect && !of_algorithm.empty();
      chains +=
          fusion_space::TilingTemplate(points.front()) == fusion_space::KernelTemplate::kConvChain;
      group.tiling = points[rng.Below(points.size())];
      ++bf16;
    }
    EXPECT_GE(bf16, 4) << Describe(space, plan);  // c0, c1 and c4, and the chain of c2 and c3
    auto exe = KernelProgram::Compile(space, plan);
    ASSERT_TRUE(exe.ok()) << exe.error().message();
    for (int run = 0; run < 2; ++run) {
      auto got = (*exe)->Run(feeds);
      ASSERT_TRUE(got.ok()) << got.error().message();
      const double err = testing::ScaledError(got->at("y"), want->outputs.at("y"));
      EXPECT_LE(err, 2e-2) << Describe(space, plan);
      EXPECT_GT(err, 0) << "bf16 rounds: the outputs cannot be exact";
    }
  }
  EXPECT_GE(direct, 2) << "direct bf16 groups ran";
  EXPECT_EQ(chains, 4) << "the conv chain ran in bf16 in every trial";
}

}  // namespace
}  // namespace fusetune::runtime
