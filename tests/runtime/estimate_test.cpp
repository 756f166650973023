// The analytical traffic of a tiling (kernels/estimate.h, through
// EstimateTiling) against the bytes the kernels count when they run: random
// plans of every test model, each fused step compared.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "fusion_space/space.h"
#include "graph/reference_executor.h"
#include "runtime/executor.h"
#include "tests/fusion_space/model_util.h"

namespace fusetune::runtime {
namespace {

TEST(Estimate, AnalyticalTrafficMatchesCountedTraffic) {
  std::map<std::string, double> worst;  // per template: the largest relative error
  for (const std::string& model : testing::AllTestModels()) {
    SCOPED_TRACE(model);
    graph::Graph g = testing::LoadTestModel(model);
    kernels::KernelConfig config;
    config.local_buffer_bytes = 256 * 1024;
    fusion_space::FusionSpace space(g, config);
    const graph::TensorMap feeds = graph::RandomFeeds(g, 1);
    Rng rng(ForkSeed(7, std::hash<std::string>()(model) % 1000));
    for (int i = 0; i < 20; ++i) {
      const fusion_space::Plan plan = space.Random(rng);
      auto exe = KernelProgram::Compile(space, plan);
      ASSERT_TRUE(exe.ok()) << exe.error().message();
      RunReport report;
      ASSERT_TRUE((*exe)->Run(feeds, &report).ok());
      ASSERT_EQ(report.steps.size(), plan.groups.size());
      for (size_t s = 0; s < plan.groups.size(); ++s) {
        const fusion_space::KernelInstance& instance = space.Match(plan.groups[s].nodes).instance;
        if (instance.kind == fusion_space::KernelTemplate::kReference) continue;
        const auto e =
            fusion_space::EstimateTiling(instance, plan.groups[s].tiling, config.threads);
        const kernels::KernelStats& got = report.steps[s].stats;
        const double in = static_cast<double>(got.bytes_global_to_local),
                     out = static_cast<double>(got.bytes_local_to_global);
        const double error = std::max(std::abs(e.bytes_in - in) / std::max(in, 1.0),
                                      std::abs(e.bytes_out - out) / std::max(out, 1.0));
        double& w = worst[fusion_space::KernelTemplateName(instance.kind)];
        w = std::max(w, error);
        EXPECT_EQ(e.tiles, got.tiles) << instance.summary << " " << report.steps[s].tiling;
        EXPECT_LE(error, 0.02) << instance.summary << " " << report.steps[s].tiling << ": in "
                               << e.bytes_in << " vs " << in << ", out " << e.bytes_out << " vs "
                               << out;
        EXPECT_GT(e.lane_utilisation, 0);
        EXPECT_LE(e.lane_utilisation, 1 + 1e-12);
        EXPECT_GE(e.max_thread_work, 1.0 / config.threads - 1e-12);
        EXPECT_LE(e.max_thread_work, 1 + 1e-12);
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
  for (const auto& [name, error] : worst)
    std::printf("  %s: largest relative traffic error %.2g\n", name.c_str(), error);
}

}  // namespace
}  // namespace fusetune::runtime
