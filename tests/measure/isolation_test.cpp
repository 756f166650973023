// The measurement worker process: faults injected into a worker (crash, hang,
// exception, wrong numbers) each give a failed result with its reason; the
// parent goes on, restarting the worker after a failure and reusing it
// otherwise.
#include <gtest/gtest.h>

#include <numeric>

#include "measure/measurer.h"
#include "measure/worker.h"
#include "tests/fusion_space/model_util.h"

namespace fusetune::measure {
namespace {

struct Job {
  std::shared_ptr<const graph::Graph> graph;
  std::unique_ptr<fusion_space::FusionSpace> space;
  Candidate candidate;
};

Job MakeJob(const std::string& name) {
  Job job;
  job.graph = std::make_shared<const graph::Graph>(
      testing::Parse("graph " + name + " opset 17 { input x: f32[16, 64]\n" +
                     "a = Relu(x)  b = Exp(a)  c = Sigmoid(b)  output c }"));
  job.space = std::make_unique<fusion_space::FusionSpace>(*job.graph, kernels::KernelConfig{});
  job.candidate = PlanCandidate(job.graph, *job.space, job.space->Greedy(), name);
  return job;
}

MeasureOptions Quick() {
  MeasureOptions o;
  o.min_repeats = 2;
  o.min_seconds = 0;
  o.timeout_seconds = 2;
  return o;
}

std::unique_ptr<Measurer> FaultMeasurer() {
  auto m = Measurer::Create(FUSETUNE_FAULT_WORKER);
  EXPECT_TRUE(m.ok());
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(Isolation, HealthyCandidatesReuseOneWorker) {
  auto m = FaultMeasurer();
  Job a = MakeJob("fine_a"), b = MakeJob("fine_b");
  const std::vector<Candidate> batch{a.candidate, b.candidate, a.candidate};
  std::vector<size_t> seen;
  auto results =
      m->MeasureBatch(batch, Quick(), [&](size_t i, const MeasureResult&) { seen.push_back(i); });
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(m->worker_starts(), 1);
}

// The worker keeps kWorkerMaxGraphs graphs; the parent must resend one the
// worker dropped (a tuner measures a whole model again after many groups).
TEST(Isolation, AGraphTheWorkerDroppedIsSentAgain) {
  auto m = FaultMeasurer();
  std::vector<Job> jobs;
  for (size_t i = 0; i < kWorkerMaxGraphs + 2; ++i)
    jobs.push_back(MakeJob("fine_" + std::to_string(i)));
  std::vector<Candidate> batch;
  for (const Job& j : jobs) batch.push_back(j.candidate);
  batch.push_back(jobs[0].candidate);
  batch.push_back(jobs[1].candidate);
  for (const MeasureResult& r : m->MeasureBatch(batch, Quick())) EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(m->worker_starts(), 1);
}

TEST(Isolation, CrashIsAFailedResultAndTheWorkerRestarts) {
  auto m = FaultMeasurer();
  Job crash = MakeJob("crash"), fine = MakeJob("fine");
  auto results = m->MeasureBatch(std::vector<Candidate>{crash.candidate, fine.candidate}, Quick());
  EXPECT_EQ(results[0].status, MeasureStatus::kFailed);
  EXPECT_NE(results[0].error.find("signal 11"), std::string::npos) << results[0].error;
  EXPECT_TRUE(results[1].ok()) << results[1].error;
  EXPECT_EQ(m->worker_starts(), 2);
}

TEST(Isolation, HangTimesOutAndTheWorkerIsKilled) {
  auto m = FaultMeasurer();
  Job hang = MakeJob("hang"), fine = MakeJob("fine");
  MeasureOptions o = Quick();
  o.timeout_seconds = 0.5;
  auto results = m->MeasureBatch(std::vector<Candidate>{hang.candidate, fine.candidate}, o);
  EXPECT_EQ(results[0].status, MeasureStatus::kTimeout);
  EXPECT_LT(results[0].measure_seconds, 5.0);
  EXPECT_NE(results[0].error.find("timeout"), std::string::npos) << results[0].error;
  EXPECT_TRUE(results[1].ok()) << results[1].error;
  EXPECT_EQ(m->worker_starts(), 2);
}

TEST(Isolation, ExceptionIsAFailedResultAndTheWorkerRestarts) {
  auto m = FaultMeasurer();
  Job thrower = MakeJob("throw"), fine = MakeJob("fine");
  auto results =
      m->MeasureBatch(std::vector<Candidate>{thrower.candidate, fine.candidate}, Quick());
  EXPECT_EQ(results[0].status, MeasureStatus::kFailed);
  EXPECT_NE(results[0].error.find("injected fault"), std::string::npos) << results[0].error;
  EXPECT_TRUE(results[1].ok());
  EXPECT_EQ(m->worker_starts(), 2);
}

TEST(Isolation, WrongNumbersAreNeverAValidResult) {
  auto m = FaultMeasurer();
  Job wrong = MakeJob("wrong");
  const MeasureResult r = m->Measure(wrong.candidate, Quick());
  EXPECT_EQ(r.status, MeasureStatus::kWrong);
  ASSERT_TRUE(r.worst.has_value());
  EXPECT_EQ(r.worst->position, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(m->worker_starts(), 1);  // wrong numbers are data, not a broken worker
}

TEST(Isolation, GroupCandidatesOfARealModelMatchTheReference) {
  auto m = Measurer::Create(FUSETUNE_WORKER);
  ASSERT_TRUE(m.ok());
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  fusion_space::FusionSpace space(g, kernels::KernelConfig{});
  std::vector<Candidate> batch;
  std::vector<std::unique_ptr<fusion_space::FusionSpace>> spaces;
  for (const fusion_space::PlanGroup& group : space.Greedy().groups) {
    if (group.nodes.size() < 2) continue;
    auto sub = GroupGraph(g, group.nodes);
    spaces.push_back(std::make_unique<fusion_space::FusionSpace>(*sub, kernels::KernelConfig{}));
    // Every sampled tiling of the group, not only the default one.
    std::vector<int32_t> all(sub->nodes.size());
    std::iota(all.begin(), all.end(), 0);
    Rng rng(3);
    for (int i = 0; i < 3; ++i) {
      auto c = GroupCandidate(sub, *spaces.back(), spaces.back()->Tilings(all).Sample(rng));
      ASSERT_TRUE(c.ok()) << c.error().ToString();
      batch.push_back(std::move(*c));
    }
  }
  ASSERT_GE(batch.size(), 12u);
  for (const MeasureResult& r : (*m)->MeasureBatch(batch, Quick())) EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_EQ((*m)->worker_starts(), 1);
}

TEST(Isolation, MissingWorkerExecutableIsAClearError) {
  auto m = Measurer::Create("/nonexistent/fusetune-worker");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("FUSETUNE_WORKER"), std::string::npos);
}

}  // namespace
}  // namespace fusetune::measure
