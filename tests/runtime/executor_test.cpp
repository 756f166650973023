// The plan executor against the reference executor: on every test model,
// the unfused plan, the greedy plan and 100 random legal plans (fixed seed)
// produce the reference's outputs; buffer planning never overlaps live values.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fusion_space/space.h"
#include "graph/reference_executor.h"
#include "runtime/executor.h"
#include "tests/fusion_space/model_util.h"

namespace fusetune {
namespace {

// Tolerance relative to the output's scale: kernels use FMA, blocked sums
// and fast exp/erf (errors 2e-6 to 3e-5 in kernels/ tests).
constexpr double kTolerance = 1e-4;

void ExpectMatches(const TensorMap& got, const TensorMap& want, const std::string& what) {
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << what;
    EXPECT_LE(testing::ScaledError(got.at(name), w), kTolerance) << what << " output " << name;
  }
}

TEST(Executor, UnfusedGreedyAndRandomPlansMatchTheReference) {
  for (const std::string& model : testing::AllTestModels()) {
    SCOPED_TRACE(model);
    Graph g = testing::LoadTestModel(model);
    kernels::KernelConfig config;
    config.local_buffer_bytes = 256 * 1024;
    FusionSpace space(g, config);
    const TensorMap feeds = RandomFeeds(g, 1);
    auto want = RunReference(g, feeds);
    ASSERT_TRUE(want.ok());
    Rng rng(ForkSeed(2026, std::hash<std::string>()(model) % 1000));
    for (int i = -2; i < 100; ++i) {
      const Plan plan = i == -2 ? space.Unfused() : i == -1 ? space.Greedy() : space.Random(rng);
      auto exe = KernelProgram::Compile(space, plan);
      ASSERT_TRUE(exe.ok()) << exe.error().message();
      EXPECT_GE((*exe)->buffers().arena_bytes, (*exe)->buffers().peak_live_bytes);
      auto got = (*exe)->Run(feeds);
      ASSERT_TRUE(got.ok()) << got.error().message();
      ExpectMatches(*got, want->outputs, fmt::format("plan {}", i));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(Executor, FusedPlanNeedsLessMemoryAndTraffic) {
  Graph g = testing::LoadTestModel("encoder_postln_op13");
  FusionSpace space(g, kernels::KernelConfig{});
  auto unfused = KernelProgram::Compile(space, space.Unfused());
  auto greedy = KernelProgram::Compile(space, space.Greedy());
  ASSERT_TRUE(unfused.ok() && greedy.ok());
  EXPECT_LT((*greedy)->buffers().arena_bytes, (*unfused)->buffers().arena_bytes);
  EXPECT_LT((*unfused)->buffers().arena_bytes, (*unfused)->buffers().no_reuse_bytes);
  RunReport ru, rg;
  const TensorMap feeds = RandomFeeds(g, 3);
  ASSERT_TRUE((*unfused)->Run(feeds, &ru).ok());
  ASSERT_TRUE((*greedy)->Run(feeds, &rg).ok());
  EXPECT_LT(rg.total.bytes_local_to_global, ru.total.bytes_local_to_global);
}

TEST(Executor, RejectsInvalidPlansAndFeeds) {
  Graph g = testing::LoadTestModel("mlp");
  FusionSpace space(g, kernels::KernelConfig{});
  Plan plan = space.Unfused();
  plan.groups.pop_back();
  auto exe = KernelProgram::Compile(space, plan);
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.error().message().find("in no group"), std::string::npos);
  auto ok = KernelProgram::Compile(space, space.Greedy());
  ASSERT_TRUE(ok.ok());
  TensorMap bad{{"x", Tensor(DataType::kFloat32, {3, 3})}};
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
}  // namespace fusetune
