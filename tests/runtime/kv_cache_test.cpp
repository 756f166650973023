// KV caches served in place (runtime/kv_cache.h): a decode step compiled at
// the cache's capacity and run step by step appends its rows and attends to
// the rows held, giving what the same graph compiled at each length and fed
// the dense cache gives on the reference executor; loading a prefill's rows,
// reading the rows back, and the errors (a fed past, a full cache, rows of
// the wrong shape, a plan whose cache is read by other kernels than attention).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "fusion_space/space.h"
#include "graph/passes.h"
#include "graph/reference_executor.h"
#include "runtime/executor.h"
#include "tests/graph/test_util.h"

namespace fusetune::runtime {
namespace {

constexpr double kCacheTolerance =
    1e-4;  // relative to the output's scale (kernels' FMA and fast exp)
constexpr int64_t kHeads = 2, kDim = 8, kCapacity = 8;

// One new token (scaled before it joins the cache, as rotary embedding
// would) against `past` cached rows of keys and values.
graph::Graph DecodeStep(int64_t past) {
  graph::Graph g = testing::Parse(fmt::format(R"(graph g opset 17 {{
    input q: f32[1, {0}, 1, {1}]  input k_new: f32[1, {0}, 1, {1}]  input v_new: f32[1, {0}, 1, {1}]
    input past_k: f32[1, {0}, {2}, {1}]  input past_v: f32[1, {0}, {2}, {1}]
    const two: f32[] = [2]  const scale: f32[] = [0.35]
    k2 = Mul(k_new, two)
    present_k = Concat(past_k, k2) {{axis=2}}
    present_v = Concat(past_v, v_new) {{axis=2}}
    kt = Transpose(present_k) {{perm=[0, 1, 3, 2]}}
    s = MatMul(q, kt)  ss = Mul(s, scale)  p = Softmax(ss) {{axis=-1}}  o = MatMul(p, present_v)
    output o  output present_k  output present_v }})",
                                              kHeads, kDim, past));
  EXPECT_TRUE(graph::RunStandardPasses(g).ok());
  return g;
}

struct Fixture {
  graph::Graph graph = DecodeStep(kCapacity - 1);
  fusion_space::FusionSpace space{graph, kernels::KernelConfig{}};
  std::unique_ptr<KernelProgram> program;
  explicit Fixture(bool greedy = true) {
    auto p = KernelProgram::Compile(space, greedy ? space.Greedy() : space.Unfused());
    EXPECT_TRUE(p.ok()) << p.error().message();
    program = std::move(*p);
  }
};

graph::TensorMap NewToken(std::mt19937& rng) {
  graph::TensorMap t;
  for (const char* name : {"q", "k_new", "v_new"})
    t[name] = testing::Uniform({1, kHeads, 1, kDim}, -1, 1, rng);
  return t;
}

// The reference: the step compiled at `past` rows, fed the dense cache.
graph::TensorMap Reference(const graph::TensorMap& token, const graph::Tensor& past_k,
                           const graph::Tensor& past_v) {
  graph::TensorMap feeds = token;
  feeds["past_k"] = past_k;
  feeds["past_v"] = past_v;
  auto r = graph::RunReference(DecodeStep(past_k.dims()[2]), feeds);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r->outputs;
}

TEST(KvCache, StepsInPlaceMatchTheDenseCache) {
  Fixture f;
  ASSERT_TRUE(f.program->ServeKvCacheInPlace().ok());
  EXPECT_EQ(f.program->kv_cache_capacity(), kCapacity);
  std::mt19937 rng(7);
  graph::Tensor past_k = testing::Uniform({1, kHeads, 3, kDim}, -1, 1, rng);
  graph::Tensor past_v = testing::Uniform({1, kHeads, 3, kDim}, -1, 1, rng);
  ASSERT_TRUE(f.program->LoadKvCache({{"past_k", past_k}, {"past_v", past_v}}).ok());
  for (int64_t step = 0; f.program->kv_cache_length() < kCapacity; ++step) {
    SCOPED_TRACE(fmt::format("step {}, {} rows held", step, f.program->kv_cache_length()));
    const graph::TensorMap token = NewToken(rng);
    const graph::TensorMap want = Reference(token, past_k, past_v);
    auto got = f.program->Run(token);
    ASSERT_TRUE(got.ok()) << got.error().message();
    EXPECT_EQ(got->count("present_k"), 0u);  // kept in the program
    EXPECT_LE(testing::ScaledError(got->at("o"), want.at("o")), kCacheTolerance);
    past_k = want.at("present_k");
    past_v = want.at("present_v");
    auto held = f.program->KvCacheRows("past_k");
    ASSERT_TRUE(held.ok());
    EXPECT_LE(testing::ScaledError(*held, past_k), 1e-6);
  }
  auto full = f.program->Run(NewToken(rng));
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().message().find("the KV cache is full"), std::string::npos);
}

TEST(KvCache, AnEmptyCacheFillsFromTheFirstRow) {
  Fixture f;
  ASSERT_TRUE(f.program->ServeKvCacheInPlace().ok());
  std::mt19937 rng(8);
  const graph::TensorMap token = NewToken(rng);
  const graph::Tensor none(graph::DataType::kFloat32, {1, kHeads, 0, kDim});
  auto got = f.program->Run(token);
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_LE(testing::ScaledError(got->at("o"), Reference(token, none, none).at("o")),
            kCacheTolerance);
  EXPECT_EQ(f.program->kv_cache_length(), 1);
}

TEST(KvCache, BadUseIsAnError) {
  Fixture f;
  ASSERT_TRUE(f.program->ServeKvCacheInPlace().ok());
  std::mt19937 rng(9);
  graph::TensorMap fed = NewToken(rng);
  fed["past_k"] = testing::Uniform({1, kHeads, kCapacity - 1, kDim}, -1, 1, rng);
  auto r = f.program->Run(fed);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("held by the executable's KV cache"), std::string::npos);
  const graph::Tensor rows3 = testing::Uniform({1, kHeads, 3, kDim}, -1, 1, rng);
  const graph::Tensor rows2 = testing::Uniform({1, kHeads, 2, kDim}, -1, 1, rng);
  const graph::Tensor wide = testing::Uniform({1, kHeads + 1, 3, kDim}, -1, 1, rng);
  EXPECT_FALSE(f.program->LoadKvCache({{"past_k", rows3}}).ok());  // past_v missing
  EXPECT_FALSE(f.program->LoadKvCache({{"past_k", rows3}, {"past_v", rows2}}).ok());
  EXPECT_FALSE(f.program->LoadKvCache({{"past_k", wide}, {"past_v", wide}}).ok());
  EXPECT_FALSE(f.program->LoadKvCache({{"q", rows3}, {"past_v", rows3}}).ok());
  EXPECT_FALSE(f.program->KvCacheRows("o").ok());
  EXPECT_EQ(f.program->kv_cache_length(), 0);
}

// Unfused, the cache is transposed by a kernel of its own before attention
// reads it: that kernel would read rows no run wrote.
TEST(KvCache, AnUnfusedPlanRunsAsWritten) {
  Fixture f(/*greedy=*/false);
  const Status served = f.program->ServeKvCacheInPlace();
  ASSERT_FALSE(served.ok());
  EXPECT_NE(served.error().message().find("not by attention"), std::string::npos)
      << served.error().message();
  EXPECT_FALSE(f.program->serves_kv_cache());
}

TEST(KvCache, AFailedRunKeepsTheRowsAndAnEmptyLoadEmpties) {
  Fixture f;
  ASSERT_TRUE(f.program->ServeKvCacheInPlace().ok());
  std::mt19937 rng(10);
  const graph::Tensor rows = testing::Uniform({1, kHeads, 3, kDim}, -1, 1, rng);
  ASSERT_TRUE(f.program->LoadKvCache({{"past_k", rows}, {"past_v", rows}}).ok());
  graph::TensorMap bad = NewToken(rng);
  bad["q"] = testing::Uniform({1, kHeads, 2, kDim}, -1, 1, rng);  // the wrong shape
  ASSERT_FALSE(f.program->Run(bad).ok());
  EXPECT_EQ(f.program->kv_cache_length(), 3);
  auto held = f.program->KvCacheRows("past_v");
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->BitwiseEquals(rows));
  ASSERT_TRUE(f.program->LoadKvCache({}).ok());
  EXPECT_EQ(f.program->kv_cache_length(), 0);
}

// A constant computed from the past's length (a position taken from
// past_k.shape[2] at export) differs between two lengths: refused.
TEST(KvCache, ConstantsThatDependOnTheLengthAreRefused) {
  const graph::Graph a = DecodeStep(kCapacity - 1), same = DecodeStep(kCapacity);
  EXPECT_TRUE(CheckLengthFree(a, same).ok());
  const auto with_position = [](int64_t past) {
    return testing::Parse(fmt::format(R"(graph g opset 17 {{
      input x: f32[4]  const position: f32[] = [{}]  y = Add(x, position)  output y }})",
                                      past));
  };
  const Status s = CheckLengthFree(with_position(7), with_position(8));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("constant 'position' depends on the cache's length"),
            std::string::npos)
      << s.error().message();
}

TEST(KvCache, FindsOnlyConcatsOfAnInputIntoAnOutput) {
  const graph::Graph g = DecodeStep(3);
  const std::vector<KvCacheLink> links = FindKvCacheLinks(g);
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(g.value(links[0].past).name, "past_k");
  EXPECT_EQ(g.value(links[0].present).name, "present_k");
  EXPECT_EQ(links[0].axis, 2);
  const graph::Graph other = testing::Parse(R"(graph g opset 17 {
    input a: f32[2, 3]  input b: f32[2, 1]
    c = Concat(a, b) {axis=1}  d = Relu(a)
    output c  output d })");
  EXPECT_TRUE(FindKvCacheLinks(other).empty());  // `a` has another reader
}

}  // namespace
}  // namespace fusetune::runtime
