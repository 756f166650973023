// Test databases for cost_model/ tests: a test model's tasks as workloads
// and records of their tilings at chosen times.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/check.h"
#include "db/database.h"
#include "measure/measurer.h"
#include "search/tasks.h"
#include "tests/fusion_space/model_util.h"

namespace fusetune::cost_model::test_records {

// Every task of a test model with a handful of its tilings.
struct Groups {
  graph::Graph graph;
  std::unique_ptr<fusion_space::FusionSpace> space;
  std::vector<search::Task> tasks;
};

inline Groups LoadGroups(const std::string& model) {
  Groups g;
  g.graph = fusetune::testing::LoadTestModel(model);
  kernels::KernelConfig config;
  g.space = std::make_unique<fusion_space::FusionSpace>(g.graph, config);
  g.tasks = search::ExtractTasks(g.graph, *g.space);
  return g;
}

// One ok record of `tiling` for task `t`, measured at `seconds` (its
// repeats' median), its fastest repeat at `fastest` (0: not known).
inline db::Record RecordOf(const search::Task& t, const fusion_space::Tiling& tiling,
                           double seconds, double fastest = 0) {
  auto candidate = measure::GroupCandidate(t.graph, *t.space, tiling);
  FT_CHECK(candidate.ok(), "tiling does not fit its task");
  measure::MeasureResult result;
  result.status = measure::MeasureStatus::kOk;
  result.time.median = seconds;
  result.time.min = fastest;
  result.bytes_in = 1000;
  return search::MakeRecord(t, *candidate, result, "target", 0);
}

inline std::unique_ptr<db::Database> DatabaseWithTasks(const Groups& g) {
  auto db = db::MakeSqliteDatabase(":memory:");
  FT_CHECK(db.ok(), "in-memory database");
  FT_CHECK((*db)->PutTarget({"target", "{}", "{}"}).ok(), "target");
  for (const search::Task& t : g.tasks) FT_CHECK((*db)->PutWorkload(t.Workload()).ok(), "workload");
  return std::move(*db);
}

}  // namespace fusetune::cost_model::test_records
