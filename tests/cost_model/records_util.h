// Test databases for cost_model/ tests: a test model's tasks as workloads
// and records of their tilings at chosen times.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/rng.h"
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

// A sampled tiling of `t` other than `other`.
inline fusion_space::Tiling AnotherTiling(const search::Task& t, const fusion_space::Tiling& other,
                                          uint64_t seed) {
  Rng rng(seed);
  fusion_space::Tiling tiling = t.tilings().Sample(rng);
  while (fusion_space::TilingToString(tiling) == fusion_space::TilingToString(other))
    tiling = t.tilings().Sample(rng);
  return tiling;
}

inline std::unique_ptr<db::Database> DatabaseWithTasks(const Groups& g) {
  auto db = db::MakeSqliteDatabase(":memory:");
  FT_CHECK(db.ok(), "in-memory database");
  FT_CHECK((*db)->PutTarget({"target", "{}", "{}"}).ok(), "target");
  for (const search::Task& t : g.tasks) FT_CHECK((*db)->PutWorkload(t.Workload()).ok(), "workload");
  return std::move(*db);
}

// The first task of encoder_postln_op13 in a database, with its default
// tiling and another one (drawn with `seed`). Built in place and never moved:
// the groups' space refers to their graph.
struct TwoTilings {
  explicit TwoTilings(uint64_t seed)
      : groups(LoadGroups("encoder_postln_op13")),
        db(DatabaseWithTasks(groups)),
        task(&groups.tasks.front()),
        first(task->tilings().Default()),
        second(AnotherTiling(*task, first, seed)) {}
  TwoTilings(const TwoTilings&) = delete;
  TwoTilings& operator=(const TwoTilings&) = delete;

  Groups groups;
  std::unique_ptr<db::Database> db;
  const search::Task* task;
  fusion_space::Tiling first, second;
};

}  // namespace fusetune::cost_model::test_records
