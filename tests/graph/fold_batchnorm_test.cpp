// FoldBatchNorm (fold_batchnorm.cpp): folded graphs compute what the unfolded
// ones do on the reference executor (plain, grouped and depthwise convs, with
// and without bias), the cases that must not fold, and the same small CNN
// exported by PyTorch with and without BatchNormalization nodes
// (scripts/gen_models.py) ending up as the same graph after the passes.
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "graph/onnx_io.h"
#include "graph/passes.h"
#include "graph/shape_inference.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

struct ConvBnCase {
  int64_t c, m, group;
  bool bias;
  bool const_stats = true;  // false: the BN's mean is a graph input
  bool extra_use = false;   // the Conv's output is also a graph output
};

// x[2, c, 6, 6] -> Conv(3x3, pad 1) -> BatchNormalization -> Relu -> y.
Graph ConvBnRelu(const ConvBnCase& k, uint32_t seed) {
  std::mt19937 rng(seed);
  Graph g;
  g.opset = 13;
  TensorType xt;
  xt.dims = {2, k.c, 6, 6};
  const ValueId x = g.AddInput("x", xt);
  const ValueId w = g.AddConstant("w", testing::Uniform({k.m, k.c / k.group, 3, 3}, -1, 1, rng));
  Node conv{"Conv", "", "conv", {x, w}, {g.AddValue("conv_out")}, {}};
  if (k.bias) conv.inputs.push_back(g.AddConstant("b", testing::Uniform({k.m}, -0.5, 0.5, rng)));
  conv.attrs.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  conv.attrs.Set("group", k.group);
  const ValueId conv_out = conv.outputs[0];
  g.AddNode(std::move(conv));
  const ValueId scale = g.AddConstant("scale", testing::Uniform({k.m}, 0.5, 1.5, rng));
  const ValueId shift = g.AddConstant("shift", testing::Uniform({k.m}, -0.2, 0.2, rng));
  ValueId mean;
  if (k.const_stats) {
    mean = g.AddConstant("mean", testing::Uniform({k.m}, -0.5, 0.5, rng));
  } else {
    TensorType mt;
    mt.dims = {k.m};
    mean = g.AddInput("mean", mt);
  }
  const ValueId var = g.AddConstant("var", testing::Uniform({k.m}, 0.5, 2, rng));
  Node bn{"BatchNormalization",   "", "bn", {conv_out, scale, shift, mean, var},
          {g.AddValue("bn_out")}, {}};
  bn.attrs.Set("epsilon", 1e-3f);
  const ValueId bn_out = bn.outputs[0];
  g.AddNode(std::move(bn));
  g.AddNode({"Relu", "", "relu", {bn_out}, {g.AddValue("y")}, {}});
  g.outputs.push_back(*g.FindValue("y"));
  if (k.extra_use) g.outputs.push_back(conv_out);
  EXPECT_TRUE(InferShapes(g).ok());
  return g;
}

class FoldBatchNormCase : public ::testing::TestWithParam<ConvBnCase> {};

TEST_P(FoldBatchNormCase, FoldedGraphMatchesTheUnfoldedOne) {
  const Graph before = ConvBnRelu(GetParam(), 7);
  Graph after = before;
  auto folded = FoldBatchNorm(after);
  ASSERT_TRUE(folded.ok()) << folded.error().ToString();
  EXPECT_EQ(*folded, 1);
  ASSERT_TRUE(after.Validate().ok());
  EXPECT_EQ(testing::CountOps(after, "BatchNormalization"), 0);
  ASSERT_EQ(after.nodes.size(), 2u);
  EXPECT_EQ(after.nodes[0].op_type, "Conv");
  EXPECT_EQ(after.nodes[0].inputs.size(), 3u);  // gained or updated its bias
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const TensorMap feeds = RandomFeeds(before, seed);
    const Tensor want = testing::RunFirst(before, feeds);
    const Tensor got = testing::RunFirst(after, feeds);
    EXPECT_LE(testing::ScaledError(got, want), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Convs, FoldBatchNormCase,
                         ::testing::Values(ConvBnCase{4, 6, 1, false}, ConvBnCase{4, 6, 1, true},
                                           ConvBnCase{4, 6, 2, true},    // grouped
                                           ConvBnCase{6, 6, 6, false},   // depthwise
                                           ConvBnCase{6, 12, 6, true}),  // depthwise, multiplier 2
                         [](const ::testing::TestParamInfo<ConvBnCase>& i) {
                           return "c" + std::to_string(i.param.c) + "m" +
                                  std::to_string(i.param.m) + "g" + std::to_string(i.param.group) +
                                  (i.param.bias ? "bias" : "");
                         });

// x[5, 4] -> Gemm or MatMul with constant weights -> BatchNormalization -> y.
Graph ProductBn(const std::string& op, bool trans_b, bool with_c, uint32_t seed) {
  std::mt19937 rng(seed);
  Graph g;
  g.opset = 13;
  TensorType xt;
  xt.dims = {5, 4};
  const ValueId x = g.AddInput("x", xt);
  const ValueId w =
      g.AddConstant("w", testing::Uniform(trans_b ? Dims{6, 4} : Dims{4, 6}, -1, 1, rng));
  Node prod{op, "", "prod", {x, w}, {g.AddValue("prod_out")}, {}};
  if (op == "Gemm") {
    if (trans_b) prod.attrs.Set("transB", int64_t{1});
    prod.attrs.Set("alpha", 0.75f);
    prod.attrs.Set("beta", 1.5f);
    if (with_c) prod.inputs.push_back(g.AddConstant("c", testing::Uniform({1, 6}, -0.5, 0.5, rng)));
  }
  const ValueId prod_out = prod.outputs[0];
  g.AddNode(std::move(prod));
  std::vector<ValueId> stats;
  for (auto [name, lo, hi] : {std::tuple{"scale", 0.5, 1.5}, std::tuple{"shift", -0.2, 0.2},
                              std::tuple{"mean", -0.5, 0.5}, std::tuple{"var", 0.5, 2.0}})
    stats.push_back(g.AddConstant(name, testing::Uniform({6}, lo, hi, rng)));
  g.AddNode({"BatchNormalization",
             "",
             "bn",
             {prod_out, stats[0], stats[1], stats[2], stats[3]},
             {g.AddValue("y")},
             {}});
  g.outputs.push_back(*g.FindValue("y"));
  EXPECT_TRUE(InferShapes(g).ok());
  return g;
}

TEST(FoldBatchNorm, GemmAndMatMulFoldToo) {
  struct Case {
    const char* op;
    bool trans_b, with_c;
    const char* last_op;
  };
  for (const Case& c : {Case{"Gemm", false, false, "Gemm"}, Case{"Gemm", true, true, "Gemm"},
                        Case{"Gemm", false, true, "Gemm"}, Case{"MatMul", false, false, "Add"}}) {
    const Graph before = ProductBn(c.op, c.trans_b, c.with_c, 9);
    Graph after = before;
    auto folded = FoldBatchNorm(after);
    ASSERT_TRUE(folded.ok()) << folded.error().ToString();
    EXPECT_EQ(*folded, 1) << c.op;
    ASSERT_TRUE(after.Validate().ok());
    EXPECT_EQ(testing::CountOps(after, "BatchNormalization"), 0);
    EXPECT_EQ(after.nodes.back().op_type, c.last_op);
    EXPECT_EQ(after.value(after.outputs[0]).name, "y");
    const TensorMap feeds = RandomFeeds(before, 4);
    EXPECT_LE(
        testing::ScaledError(testing::RunFirst(after, feeds), testing::RunFirst(before, feeds)),
        1e-5)
        << c.op << " transB=" << c.trans_b << " C=" << c.with_c;
  }
}

TEST(FoldBatchNorm, StandardPassesLeaveNoBatchNormInConvBnRelu) {
  Graph g = ConvBnRelu({8, 8, 1, true}, 3);
  ASSERT_TRUE(RunStandardPasses(g).ok());
  EXPECT_EQ(testing::CountOps(g, "BatchNormalization"), 0);
  EXPECT_EQ(testing::CountOps(g, "Conv"), 1);
  EXPECT_EQ(testing::CountOps(g, "Relu"), 1);
  EXPECT_EQ(g.value(g.outputs[0]).name, "y");
}

TEST(FoldBatchNorm, ConvOutputWithAnotherUseIsNotFolded) {
  ConvBnCase k{4, 6, 1, true};
  k.extra_use = true;
  Graph g = ConvBnRelu(k, 5);
  auto folded = FoldBatchNorm(g);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 0);
  EXPECT_EQ(testing::CountOps(g, "BatchNormalization"), 1);
}

TEST(FoldBatchNorm, NonConstantStatisticsAreNotFolded) {
  ConvBnCase k{4, 6, 1, true};
  k.const_stats = false;
  Graph g = ConvBnRelu(k, 5);
  ASSERT_TRUE(RunStandardPasses(g).ok());
  EXPECT_EQ(testing::CountOps(g, "BatchNormalization"), 1);
}

TEST(FoldBatchNorm, BatchNormNotAfterAConvIsNotFolded) {
  Graph g = testing::Parse(R"(graph g { input x: f32[1, 2, 3]
    const s: f32[2] = [1, 2]  const b: f32[2] = [0, 1]
    const m: f32[2] = [0.5, -0.5]  const v: f32[2] = [1, 4]
    r = Relu(x)
    y = BatchNormalization(r, s, b, m, v)
    output y })");
  auto folded = FoldBatchNorm(g);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 0);
  EXPECT_EQ(testing::CountOps(g, "BatchNormalization"), 1);
  // The standard passes lower it instead (lower_batchnorm_test.cpp).
  ASSERT_TRUE(RunStandardPasses(g).ok());
  EXPECT_EQ(testing::CountOps(g, "BatchNormalization"), 0);
}

// The PyTorch export that keeps BatchNormalization (training=PRESERVE) and
// the default one that folds it: after the standard passes, the same node
// op types in the same order with the same output shapes.
TEST(FoldBatchNorm, PyTorchExportsWithAndWithoutBatchNormAgree) {
  auto with_bn = ImportOnnxFile(testing::TestData("cnn_bn_op13.onnx"));
  auto folded = ImportOnnxFile(testing::TestData("cnn_folded_op13.onnx"));
  ASSERT_TRUE(with_bn.ok()) << with_bn.error().ToString();
  ASSERT_TRUE(folded.ok()) << folded.error().ToString();
  EXPECT_EQ(testing::CountOps(*with_bn, "BatchNormalization"), 3);
  EXPECT_EQ(testing::CountOps(*folded, "BatchNormalization"), 0);
  ASSERT_TRUE(RunStandardPasses(*with_bn).ok());
  ASSERT_TRUE(RunStandardPasses(*folded).ok());
  ASSERT_EQ(with_bn->nodes.size(), folded->nodes.size());
  for (size_t i = 0; i < folded->nodes.size(); ++i) {
    const Node& a = with_bn->nodes[i];
    const Node& b = folded->nodes[i];
    EXPECT_EQ(a.op_type, b.op_type) << "node " << i;
    ASSERT_EQ(a.inputs.size(), b.inputs.size()) << "node " << i;
    for (size_t k = 0; k < a.inputs.size(); ++k) {
      if (a.inputs[k] == kNoValue || b.inputs[k] == kNoValue) continue;
      EXPECT_EQ(with_bn->type(a.inputs[k]).dims, folded->type(b.inputs[k]).dims)
          << "node " << i << " input " << k;
    }
    EXPECT_EQ(with_bn->type(a.outputs[0]).dims, folded->type(b.outputs[0]).dims) << "node " << i;
  }
  // Same weights, so the same function too (up to f32 rounding of the folds).
  const TensorMap feeds = RandomFeeds(*folded, 11);
  EXPECT_LE(
      testing::ScaledError(testing::RunFirst(*with_bn, feeds), testing::RunFirst(*folded, feeds)),
      1e-5);
}

}  // namespace
}  // namespace fusetune::graph
