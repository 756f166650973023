// measure/ in process: statistics, JSON round trips, group subgraphs, and the
// sanity of the metrics on real plans.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "graph/subgraph.h"
#include "graph/workload_key.h"
#include "measure/measurement.h"
#include "target/target.h"
#include "tests/fusion_space/model_util.h"
#include "tests/graph/test_util.h"

namespace fusetune::measure {
namespace {

MeasureOptions QuickOptions() {
  MeasureOptions o;
  o.min_repeats = 3;
  o.min_seconds = 0.0;
  o.peak_gflops = 100;
  o.dram_gbps = 10;
  return o;
}

MeasureResult MeasurePlanInProcess(const graph::Graph& g, fusion_space::FusionSpace& space,
                                   const fusion_space::Plan& plan, const MeasureOptions& o,
                                   const MeasureHooks& hooks = {}) {
  auto exe = runtime::KernelProgram::Compile(space, plan);
  EXPECT_TRUE(exe.ok());
  auto ref = ComputeReference(g, o.input_seed);
  EXPECT_TRUE(ref.ok());
  return MeasureProgram(**exe, *ref, o, hooks);
}

TEST(Summarize, MedianQuartilesAndExtremes) {
  TimeStats s = Summarize({5, 1, 3, 2, 4});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.spread, (4.0 - 2.0) / 3.0);
  EXPECT_DOUBLE_EQ(Summarize({1, 2, 3, 4}).median, 2.5);
  EXPECT_EQ(Summarize({}).count, 0);
}

TEST(MeasureJson, ResultRoundTripKeepsEveryField) {
  MeasureResult r;
  r.status = MeasureStatus::kWrong;
  r.error = "mismatch";
  r.time = Summarize({1e-3, 2e-3, 3e-3});
  r.busy = Summarize({0.5e-3});
  r.threads = 2;
  r.caches_flushed = true;
  r.launches = 7;
  r.bytes_in = 1234;
  r.bytes_out = 99;
  r.overlap = 0.25;
  r.max_error = INFINITY;
  r.worst = WorstElement{"y", {1, 2}, NAN, 1.5, INFINITY};
  auto back = ResultFromJson(nlohmann::json::parse(ResultToJson(r).dump()));
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(back->status, MeasureStatus::kWrong);
  EXPECT_EQ(back->error, "mismatch");
  EXPECT_DOUBLE_EQ(back->time.median, 2e-3);
  EXPECT_EQ(back->launches, 7);
  EXPECT_EQ(back->bytes_in, 1234);
  EXPECT_DOUBLE_EQ(back->overlap, 0.25);
  EXPECT_TRUE(std::isinf(back->max_error));
  ASSERT_TRUE(back->worst.has_value());
  EXPECT_EQ(back->worst->position, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(std::isnan(back->worst->got));
  EXPECT_FALSE(ResultFromJson(nlohmann::json{{"status", "great"}}).ok());
  auto options = OptionsFromJson(OptionsToJson(QuickOptions()));
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->min_repeats, 3);
  nlohmann::json bad = OptionsToJson(QuickOptions());
  bad["threads"] = 0;
  EXPECT_FALSE(OptionsFromJson(bad).ok());
}

// A group extracted as a graph has the group's workload key and computes what
// the group computes inside the whole graph.
TEST(GroupSubgraph, SameKeyAndSameValuesAsInsideTheGraph) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  const fusion_space::Plan greedy = space.Greedy();
  graph::TensorMap feeds = graph::RandomFeeds(g, 7);
  auto full = graph::RunReference(g, feeds, {.keep_intermediates = true});
  ASSERT_TRUE(full.ok());
  int checked = 0;
  for (const fusion_space::PlanGroup& group : greedy.groups) {
    if (group.nodes.size() < 2) continue;
    graph::Graph sub = graph::ExtractSubgraph(g, group.nodes);
    EXPECT_EQ(graph::CanonicalizeGraph(sub).key, graph::ComputeWorkloadKey(g, group.nodes));
    graph::TensorMap sub_feeds;
    for (graph::ValueId v : sub.inputs) {
      auto id = g.FindValue(sub.value(v).name);
      ASSERT_TRUE(id.has_value());
      sub_feeds[sub.value(v).name] = full->values[*id];
    }
    auto got = graph::RunReference(sub, sub_feeds);
    ASSERT_TRUE(got.ok());
    for (const auto& [name, tensor] : got->outputs)
      EXPECT_LT(testing::ScaledError(tensor, full->values[*g.FindValue(name)]), 1e-6) << name;
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

TEST(Metrics, FusedPlanMovesFewerBytesAndMetricsAreSane) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  const MeasureOptions o = QuickOptions();
  const MeasureResult unfused = MeasurePlanInProcess(g, space, space.Unfused(), o);
  const MeasureResult fused = MeasurePlanInProcess(g, space, space.Greedy(), o);
  for (const MeasureResult* r : {&unfused, &fused}) {
    ASSERT_TRUE(r->ok()) << r->error;
    EXPECT_EQ(r->threads, 2);
    EXPECT_TRUE(r->caches_flushed);
    EXPECT_GE(r->time.count, 3);
    EXPECT_LE(r->time.min, r->time.median);
    EXPECT_LE(r->time.median, r->time.max);
    EXPECT_GE(r->overlap, 0.0);
    EXPECT_LE(r->overlap, 1.0);
    EXPECT_GE(r->overhead_seconds, 0.0);
    EXPECT_LE(r->busy.median, r->time.median * 1.001);
    EXPECT_GT(r->flops, 0);
    EXPECT_GT(r->roofline_fraction, 0);
    EXPECT_LT(r->max_error, 1e-4);
  }
  EXPECT_LT(fused.bytes_in + fused.bytes_out, unfused.bytes_in + unfused.bytes_out);
  EXPECT_LT(fused.launches, unfused.launches);
  EXPECT_DOUBLE_EQ(fused.flops, unfused.flops);
}

TEST(Metrics, WrongOutputsGiveStatusWrongWithTheWorstElement) {
  graph::Graph g = testing::Parse(
      "graph g opset 17 { input x: f32[4, 8]\n"
      "a = Relu(x)  b = Exp(a)  output b }");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  MeasureHooks hooks;
  hooks.on_outputs = [](const graph::Graph&, graph::TensorMap& outputs) {
    outputs.at("b").data<float>()[11] += 0.5f;
  };
  const MeasureResult r = MeasurePlanInProcess(g, space, space.Greedy(), QuickOptions(), hooks);
  EXPECT_EQ(r.status, MeasureStatus::kWrong);
  ASSERT_TRUE(r.worst.has_value());
  EXPECT_EQ(r.worst->output, "b");
  EXPECT_EQ(r.worst->position, (std::vector<int64_t>{1, 3}));
  EXPECT_NEAR(r.worst->got - r.worst->want, 0.5, 1e-5);
  EXPECT_NE(r.error.find("'b'"), std::string::npos) << r.error;
}

TEST(Metrics, WarmCachesAreRecordedAndOverlapCanBeSkipped) {
  graph::Graph g = testing::LoadTestModel("mlp");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  MeasureOptions o = QuickOptions();
  o.caches = target::CacheProtocol::kWarm;
  o.measure_overlap = false;
  o.threads = 2;
  const MeasureResult r = MeasurePlanInProcess(g, space, space.Greedy(), o);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_FALSE(r.caches_flushed);
  EXPECT_EQ(r.overlap, -1);
  EXPECT_EQ(r.copy_busy.count, 0);
}

// A measurement's options say which cache protocol its records are keyed under.
TEST(CacheProtocolOf, FollowsTheCachesOption) {
  MeasureOptions options;
  EXPECT_EQ(CacheProtocolOf(options), target::CacheProtocol::kFlushed);
  options.caches = target::CacheProtocol::kColdWeights;
  EXPECT_EQ(CacheProtocolOf(options), target::CacheProtocol::kColdWeights);
}

// The worker pipe carries the protocol by name, and refuses one it does not know.
TEST(MeasureOptionsJson, TheCacheProtocolRoundTrips) {
  for (auto p : {target::CacheProtocol::kFlushed, target::CacheProtocol::kWarm,
                 target::CacheProtocol::kColdWeights}) {
    MeasureOptions o;
    o.caches = p;
    auto back = OptionsFromJson(OptionsToJson(o));
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_EQ(back->caches, p);
  }
  nlohmann::json j = OptionsToJson(MeasureOptions{});
  j["caches"] = "lukewarm";
  auto bad = OptionsFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("lukewarm"), std::string::npos);
}

// Cold weights: a measured run under it is neither flushed nor warm in its
// record, and gives the reference's numbers.
TEST(Metrics, ColdWeightsMeasuresAndIsNotRecordedAsFlushed) {
  graph::Graph g = testing::LoadTestModel("mlp");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  MeasureOptions o = QuickOptions();
  o.caches = target::CacheProtocol::kColdWeights;
  const MeasureResult r = MeasurePlanInProcess(g, space, space.Greedy(), o);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_FALSE(r.caches_flushed);
  EXPECT_LT(r.max_error, o.tolerance);
}

}  // namespace
}  // namespace fusetune::measure

namespace fusetune::measure {
namespace {

// A conv group in NCHW16c measured alone: the transforms its program places
// at the edges run and are verified either way, and are left out of the
// traffic (and time) only when time_layout_transforms is off.
TEST(MeasureLayouts, AGroupMeasuredAloneLeavesItsEdgeTransformsOut) {
  graph::Graph g = fusetune::testing::Parse(R"(graph one opset 17 {
    input x: f32[1, 16, 10, 10]
    const w: f32[32, 16, 3, 3]
    c = Conv(x, w) {pads=[1, 1, 1, 1]}
    y = Relu(c)
    output y
  })");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  fusion_space::Plan plan = space.Greedy();
  ASSERT_EQ(plan.groups.size(), 1u);
  auto& t = std::get<kernels::ConvTiling>(plan.groups[0].tiling);
  t.algorithm = kernels::ConvAlgorithm::kDirect;
  t.oc_block = 16;
  t.in_layout = t.out_layout = kernels::ActivationLayout::kNCHWc;
  MeasureOptions timed = QuickOptions(), untimed = QuickOptions();
  untimed.time_layout_transforms = false;
  const MeasureResult all = MeasurePlanInProcess(g, space, plan, timed);
  const MeasureResult group = MeasurePlanInProcess(g, space, plan, untimed);
  ASSERT_EQ(all.status, MeasureStatus::kOk) << all.error;
  ASSERT_EQ(group.status, MeasureStatus::kOk) << group.error;
  const int64_t x_bytes = 4 * 16 * 100, y_bytes = 4 * 32 * 100;  // one transform each
  EXPECT_EQ(all.bytes_in - group.bytes_in, x_bytes + y_bytes);
  EXPECT_EQ(all.bytes_out - group.bytes_out, x_bytes + y_bytes);
  auto back = OptionsFromJson(OptionsToJson(untimed));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->time_layout_transforms);
}

}  // namespace
}  // namespace fusetune::measure
