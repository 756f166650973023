// What the compiler tests share: a graph with its fusion space and an
// in-memory database, and records stored in it (a measurement double: times
// are stated, not measured).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "compiler/model.h"
#include "search/tasks.h"
#include "tests/graph/test_util.h"

namespace fusetune::compiler::testing_util {

inline constexpr const char* kTarget = "00000000000000aa";

inline std::string Mlp(int rows) {
  return fmt::format(R"(graph g {{ input x: f32[{}, 64]  const w: f32[64, 128]  const b: f32[128]
    const w2: f32[128, 64]
    h = MatMul(x, w)  y = Add(h, b)  r = Relu(y)  z = MatMul(r, w2)  output z }})",
                     rows);
}

struct Fixture {
  graph::Graph graph;
  std::unique_ptr<fusion_space::FusionSpace> space;
  std::unique_ptr<db::Database> db;
  explicit Fixture(const std::string& text) : graph(testing::Parse(text)) {
    space = std::make_unique<fusion_space::FusionSpace>(graph, kernels::KernelConfig{});
    db = std::move(db::MakeSqliteDatabase(":memory:").value());
    EXPECT_TRUE(db->PutTarget({kTarget, "{}", "{}"}).ok());
  }
  std::unique_ptr<TuningIndex> Index() {
    return std::move(TuningIndex::Load(*db, kTarget, {}).value());
  }
};

inline measure::MeasureResult Timed(double seconds) {
  measure::MeasureResult r;
  r.status = measure::MeasureStatus::kOk;
  r.time.median = seconds;
  return r;
}

// Stores a measured record of `task` with `tiling`.
// `older`: the workload's description without the structure key and shape
// signature, as databases written before they were stored hold it.
inline void AddGroupRecord(db::Database& db, const search::Task& task,
                           const fusion_space::Tiling& tiling, double seconds, bool older = false) {
  db::WorkloadEntry workload = task.Workload();
  if (older) {
    auto description = nlohmann::json::parse(workload.description);
    ASSERT_TRUE(description.contains("structure") && description.contains("signature"));
    description.erase("structure");
    description.erase("signature");
    workload.description = description.dump();
  }
  ASSERT_TRUE(db.PutWorkload(workload).ok());
  auto candidate = measure::GroupCandidate(task.graph, *task.space, tiling);
  ASSERT_TRUE(candidate.ok());
  db::Record r = search::MakeRecord(task, *candidate, Timed(seconds), kTarget, 0);
  ASSERT_TRUE(db.CommitRecords(std::span(&r, 1)).ok());
}

// Stores `plan` as the measured whole-model plan of the fixture's graph;
// `stale`: measured by a build with another GEMM kernel version.
// `into`: another fixture's database (a model tuned at several sizes).
inline void AddWholeModelRecord(Fixture& f, const fusion_space::Plan& plan, double seconds,
                                bool stale = false, db::Database* into = nullptr) {
  db::Database& db = into != nullptr ? *into : *f.db;
  ASSERT_TRUE(db.PutWorkload(search::GraphWorkload(f.graph, "mlp.onnx")).ok());
  auto candidate =
      measure::PlanCandidate(std::make_shared<const graph::Graph>(f.graph), *f.space, plan);
  db::Record r = search::MakeRecord(
      search::GraphWorkloadKey(f.graph), candidate, Timed(seconds), kTarget, 0,
      {fusion_space::KernelTemplate::kGemm, fusion_space::KernelTemplate::kElementwise});
  if (stale) r.kernel_versions["gemm"] = -1;
  ASSERT_TRUE(db.CommitRecords(std::span(&r, 1)).ok());
}

inline const search::Task& GemmTask(const std::vector<search::Task>& tasks, size_t nodes) {
  for (const search::Task& t : tasks)
    if (t.kind == fusion_space::KernelTemplate::kGemm && t.nodes.size() == nodes) return t;
  ADD_FAILURE() << "no gemm task of " << nodes << " nodes";
  return tasks.front();
}

// A legal tiling other than the default.
inline fusion_space::Tiling OtherTiling(const fusion_space::TilingSpace& tilings) {
  const std::string d = fusion_space::TilingToString(tilings.Default());
  for (const fusion_space::Tiling& t : tilings.Enumerate())
    if (fusion_space::TilingToString(t) != d) return t;
  return tilings.Default();
}

}  // namespace fusetune::compiler::testing_util
