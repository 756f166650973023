// The plan executor against the reference executor: on every test model,
// the unfused plan, the greedy plan and 100 random legal plans (fixed seed)
// produce the reference's outputs; buffer planning never overlaps live values
// and leaves graph outputs out of the arena.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fusion_space/space.h"
#include "graph/reference_executor.h"
#include "runtime/executor.h"
#include "tests/fusion_space/model_util.h"
#include "tests/graph/test_util.h"

namespace fusetune::runtime {
namespace {

// Tolerance relative to the output's scale: kernels use FMA, blocked sums
// and fast exp/erf (errors 2e-6 to 3e-5 in kernels/ tests).
constexpr double kTolerance = 1e-4;

void ExpectMatches(const graph::TensorMap& got, const graph::TensorMap& want,
                   const std::string& what) {
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << what;
    EXPECT_LE(testing::ScaledError(got.at(name), w), kTolerance) << what << " output " << name;
  }
}

TEST(Executor, UnfusedGreedyAndRandomPlansMatchTheReference) {
  for (const std::string& model : testing::AllTestModels()) {
    SCOPED_TRACE(model);
    graph::Graph g = testing::LoadTestModel(model);
    kernels::KernelConfig config;
    config.local_buffer_bytes = 256 * 1024;
    fusion_space::FusionSpace space(g, config);
    const graph::TensorMap feeds = graph::RandomFeeds(g, 1);
    auto want = graph::RunReference(g, feeds);
    ASSERT_TRUE(want.ok());
    Rng rng(ForkSeed(2026, std::hash<std::string>()(model) % 1000));
    for (int i = -2; i < 100; ++i) {
      const fusion_space::Plan plan = i == -2   ? space.Unfused()
                                      : i == -1 ? space.Greedy()
                                                : space.Random(rng);
      auto exe = KernelProgram::Compile(space, plan);
      ASSERT_TRUE(exe.ok()) << exe.error().message();
      EXPECT_GE((*exe)->buffers().arena_bytes, (*exe)->buffers().peak_live_bytes);
      for (graph::ValueId v : g.outputs)  // written into the returned tensors instead
        EXPECT_EQ((*exe)->buffers().offset.count(v), 0u) << g.value(v).name;
      auto got = (*exe)->Run(feeds);
      ASSERT_TRUE(got.ok()) << got.error().message();
      ExpectMatches(*got, want->outputs, fmt::format("plan {}", i));
      // The first run pre-packed the constant GEMM weights; later runs use them.
      auto again = (*exe)->Run(feeds);
      ASSERT_TRUE(again.ok()) << again.error().message();
      ExpectMatches(*again, want->outputs, fmt::format("plan {}, second run", i));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// LLaMA's rotary embedding as PyTorch exports it: the head split (Reshape,
// Transpose) and rotate-half (two Slices, a Neg and a Concat) around the
// multiply-adds, plus a strided slice (every second position).
constexpr const char* kRope = R"(graph rope opset 17 {
  input q: f32[1, 6, 32]
  const shape: i64[4] = [1, 6, 2, 16]
  const cos: f32[6, 16]
  const sin: f32[6, 16]
  const half: i64[1] = [8]
  const end: i64[1] = [9223372036854775807]
  const zero: i64[1] = [0]
  const last: i64[1] = [3]
  const one: i64[1] = [1]
  const two: i64[1] = [2]
  const seq: i64[1] = [2]
  r = Reshape(q, shape)
  t = Transpose(r) {perm=[0, 2, 1, 3]}
  a = Mul(t, cos)
  s1 = Slice(t, half, end, last, one)
  n = Neg(s1)
  s2 = Slice(t, zero, half, last, one)
  c = Concat(n, s2) {axis=-1}
  b = Mul(c, sin)
  y = Add(a, b)
  e = Slice(y, zero, end, seq, two)
  output y
  output e
})";

TEST(Executor, DataMovementRunsAsViewsAndPiecesMatchingTheReference) {
  graph::Graph g = testing::Parse(kRope);
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  const graph::TensorMap feeds = graph::RandomFeeds(g, 4);
  auto want = graph::RunReference(g, feeds);
  ASSERT_TRUE(want.ok());
  const std::vector<int32_t> rope = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  const fusion_space::GroupMatch& m = space.Match(rope);
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_EQ(m.instance.summary, "elementwise [1, 2, 6, 16] in 2 pieces");
  EXPECT_EQ(m.instance.inputs.size(), 3u);  // q (through views), cos, sin
  // Every single node, data movement included, is a native kernel.
  for (int32_t n = 0; n < static_cast<int32_t>(g.nodes.size()); ++n)
    EXPECT_EQ(space.Match({n}).instance.kind, fusion_space::KernelTemplate::kElementwise) << n;
  Rng rng(7);
  for (const std::vector<std::vector<int32_t>>& groups :
       std::vector<std::vector<std::vector<int32_t>>>{
           {rope, {9}},
           {{0, 1}, {2, 3, 4, 5, 6, 7, 8}, {9}},
           {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}}}) {
    for (int draw = 0; draw < 8; ++draw) {
      fusion_space::Plan plan;
      for (const auto& nodes : groups)
        plan.groups.push_back({nodes, space.Tilings(nodes).Sample(rng)});
      auto exe = KernelProgram::Compile(space, plan);
      ASSERT_TRUE(exe.ok()) << exe.error().message();
      auto got = (*exe)->Run(feeds);
      ASSERT_TRUE(got.ok()) << got.error().message();
      ExpectMatches(*got, want->outputs, fmt::format("{} groups, draw {}", groups.size(), draw));
    }
  }
}

TEST(Executor, AttentionReadsQkvThroughTheSplit) {
  // GPT-2's fused QKV projection is split in three before the head split:
  // the attention kernel reads each part at its offset, with no copy.
  graph::Graph g = testing::LoadTestModel("decoder_preln_op17");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  const fusion_space::Plan greedy = space.Greedy();
  int with_split = 0;
  for (const fusion_space::PlanGroup& group : greedy.groups) {
    const fusion_space::KernelInstance& k = space.Match(group.nodes).instance;
    if (k.kind != fusion_space::KernelTemplate::kAttention) continue;
    for (int32_t n : group.nodes) with_split += g.nodes[n].op_type == "Split";
  }
  EXPECT_EQ(with_split, 1);
  const graph::TensorMap feeds = graph::RandomFeeds(g, 5);
  auto want = graph::RunReference(g, feeds);
  auto exe = KernelProgram::Compile(space, greedy);
  ASSERT_TRUE(want.ok() && exe.ok());
  auto got = (*exe)->Run(feeds);
  ASSERT_TRUE(got.ok()) << got.error().message();
  ExpectMatches(*got, want->outputs, "greedy");
}

TEST(Executor, PostLnGemmWithItsLayerNormMatchesTheReference) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op17");
  fusion_space::FusionSpace space(g, testing::SmallKernelConfig());
  const graph::TensorMap feeds = graph::RandomFeeds(g, 6);
  auto want = graph::RunReference(g, feeds);
  ASSERT_TRUE(want.ok());
  int fused = 0;
  Rng rng(11);
  for (int32_t ln = 0; ln < static_cast<int32_t>(g.nodes.size()); ++ln) {
    if (g.nodes[ln].op_type != "LayerNormalization") continue;
    int32_t mm = ln;
    while (mm > 0 && g.nodes[mm].op_type != "MatMul") --mm;
    std::vector<int32_t> group;
    for (int32_t n = mm; n <= ln; ++n) group.push_back(n);
    const fusion_space::GroupMatch& m = space.Match(group);
    if (!m.decision.allowed()) continue;
    ++fused;
    for (int draw = 0; draw < 6; ++draw) {
      fusion_space::Plan plan;
      for (int32_t n = 0; n < static_cast<int32_t>(g.nodes.size()); ++n) {
        if (n == mm) plan.groups.push_back({group, space.Tilings(group).Sample(rng)});
        if (n < mm || n > ln) plan.groups.push_back({{n}, space.Tilings({n}).Default()});
      }
      auto exe = KernelProgram::Compile(space, plan);
      ASSERT_TRUE(exe.ok()) << exe.error().message();
      auto got = (*exe)->Run(feeds);
      ASSERT_TRUE(got.ok()) << got.error().message();
      ExpectMatches(*got, want->outputs, fmt::format("nodes {}..{}, draw {}", mm, ln, draw));
    }
  }
  EXPECT_EQ(fused, 2);  // after the attention's output projection and after the FFN
}

TEST(Executor, DataMovementGroupsSayWhyNot) {
  graph::Graph g = testing::Parse(
      "graph g opset 17 { input x: f32[4, 8]\n"
      "n = Neg(x)  c = Concat(n, x) {axis=1}  d = Concat(c, c) {axis=0}  y = Relu(n)"
      "  t = Transpose(y) {perm=[1, 0]}  output d  output t }");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  auto reason = [&](std::vector<int32_t> nodes) { return space.Match(nodes).decision.reason(); };
  EXPECT_NE(reason({0, 1}).find("node 0 (Neg) feeds the Concat and is read elsewhere"),
            std::string::npos)
      << reason({0, 1});
  EXPECT_NE(reason({1, 2}).find("a group holds one"), std::string::npos) << reason({1, 2});
  EXPECT_NE(reason({3, 4}).find("would need a copy"), std::string::npos) << reason({3, 4});
}

// Constant GEMM weights are pre-packed once, on the first run, and at least
// as large as the weights themselves (panels padded to the micro-tile);
// the traffic a run counts does not change.
TEST(Executor, ConstantWeightsArePrePackedOnTheFirstRun) {
  graph::Graph g = testing::LoadTestModel("mlp");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  auto exe = KernelProgram::Compile(space, space.Greedy());
  ASSERT_TRUE(exe.ok());
  EXPECT_EQ((*exe)->packed_weight_bytes(), 0);
  const graph::TensorMap feeds = graph::RandomFeeds(g, 4);
  RunReport first, second;
  ASSERT_TRUE((*exe)->Run(feeds, &first).ok());
  const int64_t packed = (*exe)->packed_weight_bytes();
  int64_t weights = 0;
  for (const graph::Value& v : g.values)
    if (v.is_constant() && v.type.dims.size() == 2) weights += v.constant->nbytes();
  EXPECT_GE(packed, weights / 2) << "the MLP's matrices are its weights";
  ASSERT_TRUE((*exe)->Run(feeds, &second).ok());
  EXPECT_EQ((*exe)->packed_weight_bytes(), packed) << "packed once";
  EXPECT_EQ(first.total.bytes_global_to_local, second.total.bytes_global_to_local);
}

// The weights scope (the cold-weights cache protocol flushes it) is the
// graph's constants and the pre-packed weights: everything but the arena.
TEST(Executor, TheWeightsScopeIsEverythingButTheArena) {
  graph::Graph g = testing::LoadTestModel("mlp");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  auto exe = KernelProgram::Compile(space, space.Greedy());
  ASSERT_TRUE(exe.ok());
  ASSERT_TRUE((*exe)->Run(graph::RandomFeeds(g, 4)).ok());  // packs the weights
  auto bytes_of = [&](KernelProgram::MemoryScope scope) {
    size_t bytes = 0;
    (*exe)->VisitMemory([&](const std::byte*, size_t n) { bytes += n; }, scope);
    return static_cast<int64_t>(bytes);
  };
  int64_t constants = 0;
  for (const graph::Value& v : g.values)
    if (v.is_constant()) constants += v.constant->nbytes();
  const int64_t weights = bytes_of(KernelProgram::MemoryScope::kWeights);
  EXPECT_GE(weights, constants + (*exe)->packed_weight_bytes());
  int64_t outputs = 0;  // the outputs kept for the next run (the mlp's steps write y)
  for (graph::ValueId v : g.outputs) outputs += static_cast<int64_t>(g.type(v).nbytes());
  EXPECT_EQ(bytes_of(KernelProgram::MemoryScope::kAll),
            weights + (*exe)->buffers().arena_bytes + outputs);
}

// A run writes its outputs into the previous run's tensors once the caller
// has let go of them, and into fresh ones while the caller still holds them.
TEST(Executor, OutputsAreReusedOnlyWhenTheCallerLetGoOfThem) {
  graph::Graph g = testing::LoadTestModel("mlp");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  auto exe = KernelProgram::Compile(space, space.Greedy());
  ASSERT_TRUE(exe.ok());
  const std::string y = g.value(g.outputs[0]).name;
  const graph::TensorMap a = graph::RandomFeeds(g, 4), b = graph::RandomFeeds(g, 5);
  auto first = (*exe)->Run(a);
  ASSERT_TRUE(first.ok());
  const graph::Tensor held = first->at(y).Clone();
  auto second = (*exe)->Run(b);  // `first` is still held: fresh tensors
  ASSERT_TRUE(second.ok());
  EXPECT_NE(first->at(y).raw(), second->at(y).raw());
  EXPECT_TRUE(first->at(y).BitwiseEquals(held)) << "a held output was overwritten";
  const std::byte* second_buffer = second->at(y).raw();
  const graph::Tensor second_values = second->at(y).Clone();
  first = graph::TensorMap{};
  second = graph::TensorMap{};
  auto third = (*exe)->Run(b);  // nothing held: the kept tensors are written again
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->at(y).raw(), second_buffer);
  EXPECT_TRUE(third->at(y).BitwiseEquals(second_values));
}

TEST(Executor, FusedPlanNeedsLessMemoryAndTraffic) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  auto unfused = KernelProgram::Compile(space, space.Unfused());
  auto greedy = KernelProgram::Compile(space, space.Greedy());
  ASSERT_TRUE(unfused.ok() && greedy.ok());
  EXPECT_LT((*greedy)->buffers().arena_bytes, (*unfused)->buffers().arena_bytes);
  EXPECT_LT((*unfused)->buffers().arena_bytes, (*unfused)->buffers().no_reuse_bytes);
  RunReport ru, rg;
  const graph::TensorMap feeds = graph::RandomFeeds(g, 3);
  ASSERT_TRUE((*unfused)->Run(feeds, &ru).ok());
  ASSERT_TRUE((*greedy)->Run(feeds, &rg).ok());
  EXPECT_LT(rg.total.bytes_local_to_global, ru.total.bytes_local_to_global);
}

TEST(Executor, RejectsInvalidPlansAndFeeds) {
  graph::Graph g = testing::LoadTestModel("mlp");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  fusion_space::Plan plan = space.Unfused();
  plan.groups.pop_back();
  auto exe = KernelProgram::Compile(space, plan);
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.error().message().find("in no group"), std::string::npos);
  auto ok = KernelProgram::Compile(space, space.Greedy());
  ASSERT_TRUE(ok.ok());
  graph::TensorMap bad{{"x", graph::Tensor(graph::DataType::kFloat32, {3, 3})}};
  auto r = (*ok)->Run(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kShapeMismatch);
}

TEST(BufferPlan, OverlappingLifetimesNeverShareMemory) {
  Rng rng(4);
  std::vector<BufferLifetime> l;
  for (int i = 0; i < 200; ++i) {
    const int64_t a = static_cast<int64_t>(rng.Below(50));
    l.push_back(
        {i, static_cast<int64_t>(1 + rng.Below(5000)), a, a + static_cast<int64_t>(rng.Below(10))});
  }
  BufferPlan p = PlanBuffers(l, 60);
  for (size_t i = 0; i < l.size(); ++i)
    for (size_t j = i + 1; j < l.size(); ++j) {
      const bool time = l[i].first_step <= l[j].last_step && l[j].first_step <= l[i].last_step;
      const int64_t ai = p.offset[l[i].value], aj = p.offset[l[j].value];
      const bool space = ai < aj + l[j].bytes && aj < ai + l[i].bytes;
      EXPECT_FALSE(time && space) << i << " " << j;
    }
  EXPECT_GE(p.arena_bytes, p.peak_live_bytes);
  EXPECT_LT(p.arena_bytes, p.no_reuse_bytes);
}

}  // namespace
}  // namespace fusetune::runtime
