// Mixed precision's end-to-end check (compiler/precision_check.h): a plan
// within its budget keeps its bf16 groups and reports the error; a budget
// bf16 cannot meet puts groups back to f32, after which the plan computes
// what the f32 plan computes; a plan without bf16 is not run.
#include <gtest/gtest.h>

#include "compiler/precision_check.h"
#include "graph/reference_executor.h"
#include "tests/compiler/compile_fixture.h"

namespace fusetune::compiler {
namespace {

using testing_util::Fixture;
using testing_util::Mlp;

// The MLP's plan as two GEMM groups (the second MatMul alone), every GEMM tiling in `precision`.
CompiledPlan TwoGemms(Fixture& f, kernels::Precision precision) {
  CompiledPlan compiled;
  for (std::vector<int32_t> nodes : {std::vector<int32_t>{0, 1, 2}, std::vector<int32_t>{3}}) {
    auto tiling = std::get<kernels::GemmTiling>(f.space->Tilings(nodes).Default());
    tiling.precision = precision;
    compiled.plan.groups.push_back({nodes, tiling});
    GroupDecision d;
    d.nodes = nodes;
    d.choice.tiling = tiling;
    d.choice.cost = 1e-6 * static_cast<double>(nodes.size());
    compiled.groups.push_back(d);
  }
  return compiled;
}

LowerFn Lowering(Fixture& f) {
  return [&f](const fusion_space::Plan& plan) {
    return runtime::KernelProgram::Compile(*f.space, plan);
  };
}

graph::TensorMap RunPlan(Fixture& f, const fusion_space::Plan& plan) {
  auto program = runtime::KernelProgram::Compile(*f.space, plan);
  EXPECT_TRUE(program.ok()) << program.error().ToString();
  auto out = (*program)->Run(graph::RandomFeeds(f.graph, 7));
  EXPECT_TRUE(out.ok()) << out.error().ToString();
  return *out;
}

TEST(PrecisionCheck, APlanWithinItsBudgetKeepsItsBf16Groups) {
  Fixture f(Mlp(32));
  CompiledPlan compiled = TwoGemms(f, kernels::Precision::kBf16);
  auto report = EnforceErrorBudget(*f.space, compiled, 0.05, Lowering(f));
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(report->demoted, 0);
  EXPECT_EQ(report->bf16_groups, 2);
  ASSERT_TRUE(report->end_to_end_error.has_value());
  EXPECT_GT(*report->end_to_end_error, 1e-5) << "bf16 rounds: some error is expected";
  EXPECT_LE(*report->end_to_end_error, 0.05);
}

TEST(PrecisionCheck, ATightBudgetPutsGroupsBackToF32) {
  Fixture f(Mlp(32));
  CompiledPlan compiled = TwoGemms(f, kernels::Precision::kBf16);
  auto report = EnforceErrorBudget(*f.space, compiled, 1e-5, Lowering(f));
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(report->demoted, 2);
  EXPECT_EQ(report->bf16_groups, 0);
  ASSERT_TRUE(report->end_to_end_error.has_value());
  EXPECT_LE(*report->end_to_end_error, 1e-5);
  for (size_t i = 0; i < compiled.plan.groups.size(); ++i) {
    EXPECT_EQ(fusion_space::TilingPrecision(compiled.plan.groups[i].tiling),
              kernels::Precision::kF32);
    EXPECT_EQ(compiled.groups[i].choice.tiling, compiled.plan.groups[i].tiling);
  }
  // Put back to f32, the plan is the f32 plan: the same numbers.
  const graph::TensorMap demoted = RunPlan(f, compiled.plan);
  const graph::TensorMap f32 = RunPlan(f, TwoGemms(f, kernels::Precision::kF32).plan);
  const graph::Tensor& a = demoted.at("z");
  const graph::Tensor& b = f32.at("z");
  ASSERT_EQ(a.numel(), b.numel());
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << i;
}

TEST(PrecisionCheck, AnF32PlanIsNotRun) {
  Fixture f(Mlp(32));
  CompiledPlan compiled = TwoGemms(f, kernels::Precision::kF32);
  int lowered = 0;
  auto report = EnforceErrorBudget(*f.space, compiled, 0.01, [&](const fusion_space::Plan& plan) {
    ++lowered;
    return runtime::KernelProgram::Compile(*f.space, plan);
  });
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(lowered, 0);
  EXPECT_FALSE(report->end_to_end_error.has_value());
  EXPECT_EQ(report->bf16_groups, 0);
}

}  // namespace
}  // namespace fusetune::compiler
