// LowerBatchNorm (lower_batchnorm.cpp): a BatchNormalization that no Conv
// absorbs becomes Mul and Add by per-channel constants that compute what the
// BN does on the reference executor, after an Add, a Relu, a MaxPool or a
// graph input, on 1-D (N, C, L), 2-D (N, C, H, W) and (N, C) inputs; BNs
// with non-constant statistics stay.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>

#include "graph/passes.h"
#include "graph/shape_inference.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

struct BnCase {
  std::string before;  // "Add", "Relu", "MaxPool" or "" (the BN reads x)
  Dims spatial;        // {} for (N, C) input
  bool const_stats = true;
};

// x[2, 5, spatial...] -> `before` -> BatchNormalization -> y.
Graph OpThenBn(const BnCase& k, uint32_t seed) {
  std::mt19937 rng(seed);
  Graph g;
  g.opset = 13;
  TensorType xt;
  xt.dims = {2, 5};
  xt.dims.insert(xt.dims.end(), k.spatial.begin(), k.spatial.end());
  ValueId in = g.AddInput("x", xt);
  if (k.before == "Add") {
    const ValueId x2 = g.AddInput("x2", xt);
    const ValueId out = g.AddValue("pre");
    g.AddNode({"Add", "", "add", {in, x2}, {out}, {}});
    in = out;
  } else if (k.before == "Relu") {
    const ValueId out = g.AddValue("pre");
    g.AddNode({"Relu", "", "relu", {in}, {out}, {}});
    in = out;
  } else if (k.before == "MaxPool") {
    Node pool{"MaxPool", "", "pool", {in}, {g.AddValue("pre")}, {}};
    pool.attrs.Set("kernel_shape", std::vector<int64_t>(k.spatial.size(), 2));
    in = pool.outputs[0];
    g.AddNode(std::move(pool));
  }
  std::vector<ValueId> stats;
  for (auto [name, lo, hi] : {std::tuple{"scale", 0.5, 1.5}, std::tuple{"shift", -0.2, 0.2},
                              std::tuple{"mean", -0.5, 0.5}, std::tuple{"var", 0.5, 2.0}}) {
    if (!k.const_stats && std::string(name) == "mean") {
      TensorType mt;
      mt.dims = {5};
      stats.push_back(g.AddInput(name, mt));
    } else {
      stats.push_back(g.AddConstant(name, testing::Uniform({5}, lo, hi, rng)));
    }
  }
  Node bn{"BatchNormalization", "", "bn", {in, stats[0], stats[1], stats[2], stats[3]},
          {g.AddValue("y")},    {}};
  bn.attrs.Set("epsilon", 1e-3f);
  g.AddNode(std::move(bn));
  g.outputs.push_back(*g.FindValue("y"));
  EXPECT_TRUE(InferShapes(g).ok());
  return g;
}

std::string CaseName(const BnCase& k) {
  std::string s = k.before.empty() ? "Input" : k.before;
  s += "_rank" + std::to_string(k.spatial.size() + 2);
  return s;
}

class LowerBatchNormCase : public ::testing::TestWithParam<BnCase> {};

TEST_P(LowerBatchNormCase, LoweredGraphMatchesTheBatchNorm) {
  const Graph before = OpThenBn(GetParam(), 3);
  Graph after = before;
  auto lowered = LowerBatchNorm(after);
  ASSERT_TRUE(lowered.ok()) << lowered.error().ToString();
  EXPECT_EQ(*lowered, 1);
  ASSERT_TRUE(after.Validate().ok());
  EXPECT_EQ(testing::CountOps(after, "BatchNormalization"), 0);
  EXPECT_EQ(testing::CountOps(after, "Mul"), 1);
  ASSERT_EQ(after.nodes.back().op_type, "Add");
  EXPECT_EQ(after.value(after.outputs[0]).name, "y");
  // The per-channel constants broadcast along axis 1 only.
  const Dims& cdims = after.type(after.nodes.back().inputs[1]).dims;
  ASSERT_EQ(static_cast<int64_t>(cdims.size()), before.type(before.inputs[0]).rank() - 1);
  EXPECT_EQ(cdims[0], 5);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const TensorMap feeds = RandomFeeds(before, seed);
    EXPECT_LE(
        testing::ScaledError(testing::RunFirst(after, feeds), testing::RunFirst(before, feeds)),
        1e-5);
  }
  // The standard passes end with the same lowering.
  Graph standard = before;
  ASSERT_TRUE(RunStandardPasses(standard).ok());
  EXPECT_EQ(testing::CountOps(standard, "BatchNormalization"), 0);
  const TensorMap feeds = RandomFeeds(before, 9);
  EXPECT_LE(
      testing::ScaledError(testing::RunFirst(standard, feeds), testing::RunFirst(before, feeds)),
      1e-5);
}

INSTANTIATE_TEST_SUITE_P(Producers, LowerBatchNormCase,
                         ::testing::Values(BnCase{"Add", {9}}, BnCase{"Add", {5, 6}},
                                           BnCase{"Relu", {9}}, BnCase{"Relu", {5, 6}},
                                           BnCase{"Relu", {}}, BnCase{"MaxPool", {9}},
                                           BnCase{"MaxPool", {6, 7}}, BnCase{"", {4, 4}}),
                         [](const ::testing::TestParamInfo<BnCase>& i) {
                           return CaseName(i.param);
                         });

TEST(LowerBatchNorm, NonConstantStatisticsStay) {
  Graph g = OpThenBn({"Relu", {5, 6}, false}, 4);
  auto lowered = LowerBatchNorm(g);
  ASSERT_TRUE(lowered.ok());
  EXPECT_EQ(*lowered, 0);
  ASSERT_TRUE(RunStandardPasses(g).ok());
  EXPECT_EQ(testing::CountOps(g, "BatchNormalization"), 1);
}

// A BN after a Conv is folded, not lowered, even when the passes also lower.
TEST(LowerBatchNorm, ConvBnIsStillFolded) {
  Graph g = testing::Parse(R"(graph g { input x: f32[1, 2, 4, 4]
    const w: f32[2, 2, 1, 1] = [1, 2, 3, 4]
    const s: f32[2] = [1, 2]  const b: f32[2] = [0, 1]
    const m: f32[2] = [0.5, -0.5]  const v: f32[2] = [1, 4]
    c = Conv(x, w)
    y = BatchNormalization(c, s, b, m, v)
    output y })");
  ASSERT_TRUE(RunStandardPasses(g).ok());
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Conv");
}

}  // namespace
}  // namespace fusetune::graph
