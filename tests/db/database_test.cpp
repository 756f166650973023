// The Database conformance suite, run against every implementation (the
// SQLite file and the SQLite in-memory database so far), plus the
// SQLite-specific errors: a corrupt file, a file that is not a database, a
// newer schema.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "db/jsonl.h"
#include "tests/db/db_test_util.h"

namespace fusetune::db {
namespace {

using testing::MakeRecord;
using testing::Populate;
using testing::WorkloadKeyFor;
constexpr const char* kTarget = testing::kTarget;

using Factory =
    std::function<std::unique_ptr<Database>(const std::string& name, const OpenOptions& options)>;

struct Implementation {
  const char* name;
  Factory make;
};

std::unique_ptr<Database> MustOpen(Result<std::unique_ptr<Database>> db) {
  EXPECT_TRUE(db.ok()) << (db.ok() ? "" : db.error().ToString());
  return db.ok() ? std::move(*db) : nullptr;
}

class Conformance : public ::testing::TestWithParam<Implementation> {
 protected:
  std::unique_ptr<Database> Open(const OpenOptions& options = {}) {
    return GetParam().make(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                           options);
  }
};

// The suite is grouped by facet: RecordStore and BestPlanStore first, then
// JobStore and ModelStore, the transfers (over RecordStore and TargetStore),
// DatabaseAdmin and CompiledPlanStore.

// --- RecordStore, BestPlanStore ---

TEST_P(Conformance, BestIsTheFastestOkRecordAndTopKIsSorted) {
  auto db = Open();
  ASSERT_TRUE(Populate(*db, 3).ok());
  std::vector<Record> records{
      MakeRecord(0, 1, 3e-3), MakeRecord(0, 2, 1e-3), MakeRecord(0, 3, 2e-3),
      MakeRecord(0, 4, 0.5e-3, RecordStatus::kWrong), MakeRecord(1, 5, 4e-3)};
  auto ids = db->CommitRecords(records);
  ASSERT_TRUE(ids.ok()) << ids.error().ToString();
  ASSERT_EQ(ids->size(), 5u);
  auto best = db->Best(WorkloadKeyFor(0), kTarget);
  ASSERT_TRUE(best.ok());
  ASSERT_TRUE(best->has_value());
  EXPECT_EQ((*best)->record_id, (*ids)[1]);
  EXPECT_DOUBLE_EQ((*best)->seconds, 1e-3);
  EXPECT_EQ((*best)->plan, records[1].plan);
  EXPECT_FALSE(db->Best(WorkloadKeyFor(2), kTarget)->has_value());
  EXPECT_FALSE(db->Best(WorkloadKeyFor(0), "ffffffffffffffff")->has_value());
  // The bulk lookup agrees with the one-key lookup for every workload.
  auto all = db->BestPlans(kTarget);
  ASSERT_TRUE(all.ok());
  auto keys = db->WorkloadKeys();
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*db->WorkloadKeys(WorkloadKind::kGroup), *keys);  // Populate adds groups only
  EXPECT_TRUE(db->WorkloadKeys(WorkloadKind::kGraph)->empty());
  for (const std::string& key : *keys) {
    auto one = db->Best(key, kTarget);
    ASSERT_EQ(one->has_value(), all->count(key) == 1) << key;
    if (one->has_value()) {
      EXPECT_EQ((*one)->record_id, all->at(key).record_id);
    }
  }
  EXPECT_TRUE(db->BestPlans("ffffffffffffffff")->empty());
  auto top = db->TopK(WorkloadKeyFor(0), kTarget, 2);
  ASSERT_TRUE(top.ok());
  ASSERT_EQ(top->size(), 2u);
  EXPECT_DOUBLE_EQ((*top)[0].seconds, 1e-3);
  EXPECT_DOUBLE_EQ((*top)[1].seconds, 2e-3);

  // A faster record committed later replaces the best (and the cache).
  std::vector<Record> faster{MakeRecord(0, 6, 0.2e-3)};
  ASSERT_TRUE(db->CommitRecords(faster).ok());
  EXPECT_DOUBLE_EQ((*db->Best(WorkloadKeyFor(0), kTarget))->seconds, 0.2e-3);
}

TEST_P(Conformance, RecordsRoundTripAndIdenticalRecordsAreStoredOnce) {
  auto db = Open();
  ASSERT_TRUE(Populate(*db, 2).ok());
  Record r = MakeRecord(1, 7, 2e-3, RecordStatus::kFailed);
  r.error = "worker crashed: killed by signal 11";
  std::vector<Record> twice{r, r};
  auto ids = db->CommitRecords(twice);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)[0], (*ids)[1]);
  std::vector<Record> seen;
  ASSERT_TRUE(db->ForEachRecord({}, [&](const Record& x) {
                  seen.push_back(x);
                  return true;
                }).ok());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].workload_key, r.workload_key);
  EXPECT_EQ(seen[0].target, r.target);
  EXPECT_EQ(seen[0].plan, r.plan);
  EXPECT_EQ(seen[0].status, RecordStatus::kFailed);
  EXPECT_EQ(seen[0].error, r.error);
  EXPECT_EQ(seen[0].metrics, r.metrics);
  EXPECT_EQ(seen[0].kernel_versions, r.kernel_versions);
  EXPECT_DOUBLE_EQ(seen[0].created_at, r.created_at);
  RecordFilter only_ok;
  only_ok.status = RecordStatus::kOk;
  int count = 0;
  ASSERT_TRUE(db->ForEachRecord(only_ok, [&](const Record&) { return ++count, true; }).ok());
  EXPECT_EQ(count, 0);
}

TEST_P(Conformance, UnknownWorkloadOrTargetFailsTheWholeBatch) {
  auto db = Open();
  ASSERT_TRUE(Populate(*db, 1).ok());
  std::vector<Record> batch{MakeRecord(0, 1, 1e-3), MakeRecord(5, 2, 1e-3)};
  auto ids = db->CommitRecords(batch);
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.error().message().find(WorkloadKeyFor(5)), std::string::npos);
  auto stats = db->Stats("");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->records, 0);  // the first record was rolled back too
}

TEST_P(Conformance, StaleKernelVersionsAreNeverBestAndAreCounted) {
  auto db = Open({.kernel_versions = {{"gemm", 2}, {"rowwise", 1}}});
  ASSERT_TRUE(Populate(*db, 1).ok());
  Record old_fast = MakeRecord(0, 1, 0.1e-3);
  old_fast.kernel_versions = {{"gemm", 1}};  // stale for this database's build
  Record fresh_slow = MakeRecord(0, 2, 5e-3);
  fresh_slow.kernel_versions = {{"gemm", 2}};
  std::vector<Record> batch{old_fast, fresh_slow};
  ASSERT_TRUE(db->CommitRecords(batch).ok());
  auto best = db->Best(WorkloadKeyFor(0), kTarget);
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_DOUBLE_EQ((*best)->seconds, 5e-3);
  EXPECT_DOUBLE_EQ(db->BestPlans(kTarget)->at(WorkloadKeyFor(0)).seconds, 5e-3);
  auto stats = db->Stats("00000000000000bb");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->records, 2);
  EXPECT_EQ(stats->stale.at("kernel template 'gemm' v1 (this build: v2)"), 1);
  EXPECT_EQ(stats->stale.at("measured on another target (" + std::string(kTarget) + ")"), 2);
  // ... but what it reached before the kernels changed is known.
  auto stale = db->FasterStaleSeconds(WorkloadKeyFor(0), kTarget);
  ASSERT_TRUE(stale.ok() && stale->has_value());
  EXPECT_DOUBLE_EQ(**stale, 0.1e-3);
  Record fresh_fast = MakeRecord(0, 3, 0.05e-3);
  fresh_fast.kernel_versions = {{"gemm", 2}};
  std::vector<Record> faster{fresh_fast};
  ASSERT_TRUE(db->CommitRecords(faster).ok());
  stale = db->FasterStaleSeconds(WorkloadKeyFor(0), kTarget);
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->has_value());  // the fresh best is the fastest now
}

// A whole model's faster stale record (read along with its best), before
// and after commits that change the answer.
TEST_P(Conformance, FasterStaleOfAWholeModelFollowsCommits) {
  auto db = Open({.kernel_versions = {{"gemm", 2}, {"rowwise", 1}}});
  ASSERT_TRUE(db->PutTarget({kTarget, "{}", "{}"}).ok());
  const std::string graph = WorkloadKeyFor(7);
  ASSERT_TRUE(db->PutWorkload({graph, WorkloadKind::kGraph, "{}"}).ok());
  auto commit = [&](int64_t serial, double seconds, int gemm) {
    std::vector<Record> batch{MakeRecord(7, serial, seconds)};
    batch[0].kernel_versions = {{"gemm", gemm}};
    return db->CommitRecords(batch).ok();
  };
  auto faster_stale = [&](bool best_first) {
    if (best_first) {
      EXPECT_TRUE(db->Best(graph, kTarget).ok());
    }
    auto stale = db->FasterStaleSeconds(graph, kTarget);
    EXPECT_TRUE(stale.ok());
    return stale.ok() ? *stale : std::optional<double>(-1);
  };
  ASSERT_TRUE(commit(1, 5e-3, 2));
  EXPECT_EQ(faster_stale(true), std::nullopt) << "one fresh record";
  ASSERT_TRUE(commit(2, 9e-3, 1));
  EXPECT_EQ(faster_stale(false), std::nullopt) << "a slower stale record";
  ASSERT_TRUE(commit(3, 2e-3, 1));
  ASSERT_TRUE(commit(4, 1e-3, 1));
  EXPECT_EQ(faster_stale(false), 1e-3) << "two faster stale records";
  EXPECT_EQ(faster_stale(true), 1e-3) << "asked again";
  ASSERT_TRUE(commit(5, 0.5e-3, 2));
  EXPECT_EQ(faster_stale(true), std::nullopt) << "a fresh record faster than every stale one";
}

// --- JobStore, ModelStore ---

TEST_P(Conformance, JobsAndModels) {
  auto db = Open();
  auto job = db->CreateJob({0, R"({"model":"m.onnx"})", "running", "{}", 0, 0});
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(db->UpdateJob(*job, "interrupted", R"({"trials":12})").ok());
  auto read = db->GetJob(*job);
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->state, "interrupted");
  EXPECT_EQ((*read)->progress, R"({"trials":12})");
  EXPECT_FALSE(db->UpdateJob(*job, "exploded", "{}").ok());
  EXPECT_FALSE(db->UpdateJob(999, "done", "{}").ok());

  std::string blob("\0\1\2model", 8);
  auto first = db->SaveModel({0, "xgboost", "", 1, R"({"spearman":0.8})", blob, false, 0});
  auto second = db->SaveModel({0, "xgboost", "", 1, R"({"spearman":0.9})", "other", false, 0});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_FALSE(db->ActiveModel("xgboost")->has_value());
  ASSERT_TRUE(db->ActivateModel(*first).ok());
  auto active = db->ActiveModel("xgboost");
  ASSERT_TRUE(active.ok() && active->has_value());
  EXPECT_EQ((*active)->blob, blob);
  ASSERT_TRUE(db->ActivateModel(*second).ok());
  EXPECT_EQ((*db->ActiveModel("xgboost"))->id, *second);
  EXPECT_EQ(db->ListModels()->size(), 2u);
}

// --- Transfers: RecordStore and TargetStore ---

TEST_P(Conformance, ExportImportAndMergeDeduplicate) {
  auto source = Open();
  ASSERT_TRUE(Populate(*source, 4).ok());
  std::vector<Record> batch;
  for (int i = 0; i < 40; ++i) batch.push_back(MakeRecord(i % 4, i, 1e-3 * (1 + i % 7)));
  ASSERT_TRUE(source->CommitRecords(batch).ok());
  std::stringstream jsonl;
  auto exported = ExportJsonl(*source, jsonl);
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ(exported->records_read, 40);

  auto copy = GetParam().make("import_copy", {});
  std::stringstream in(jsonl.str());
  auto imported = ImportJsonl(*copy, in, "records.jsonl");
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  EXPECT_EQ(imported->records_added, 40);
  std::stringstream again(jsonl.str());
  EXPECT_EQ(ImportJsonl(*copy, again, "records.jsonl")->records_added, 0);
  for (int w = 0; w < 4; ++w)
    EXPECT_DOUBLE_EQ((*copy->Best(WorkloadKeyFor(w), kTarget))->seconds,
                     (*source->Best(WorkloadKeyFor(w), kTarget))->seconds);

  // Merge: a second machine's database with one faster record and the 40 shared ones.
  auto other = GetParam().make("merge_other", {});
  ASSERT_TRUE(Populate(*other, 4).ok());
  batch.push_back(MakeRecord(2, 1000, 1e-6));
  ASSERT_TRUE(other->CommitRecords(batch).ok());
  auto merged = MergeDatabase(*copy, *other);
  ASSERT_TRUE(merged.ok()) << merged.error().ToString();
  EXPECT_EQ(merged->records_added, 1);
  EXPECT_DOUBLE_EQ((*copy->Best(WorkloadKeyFor(2), kTarget))->seconds, 1e-6);

  std::stringstream bad(R"({"type":"record","workload":"x"})"
                        "\n");
  auto error = ImportJsonl(*copy, bad, "bad.jsonl");
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.error().message().find("bad.jsonl:1"), std::string::npos);
}

TEST_P(Conformance, ExportedStatusIsTheStoredTextAndAnUnknownOneIsRefused) {
  auto db = Open();
  ASSERT_TRUE(Populate(*db, 1).ok());
  std::vector<Record> batch{MakeRecord(0, 1, 1e-3), MakeRecord(0, 2, 1e-3, RecordStatus::kTimeout)};
  ASSERT_TRUE(db->CommitRecords(batch).ok());
  std::stringstream jsonl;
  ASSERT_TRUE(ExportJsonl(*db, jsonl).ok());
  const std::string text = jsonl.str();
  EXPECT_NE(text.find(R"("status":"ok")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("status":"timeout")"), std::string::npos) << text;

  // The second record line with a status this build does not know.
  std::string changed = text;
  const size_t at = changed.find(R"("status":"timeout")");
  changed.replace(at, std::string(R"("status":"timeout")").size(), R"("status":"crashed")");
  const int line = static_cast<int>(std::count(changed.begin(), changed.begin() + at, '\n')) + 1;
  auto copy = GetParam().make("unknown_status", {});
  std::stringstream in(changed);
  auto imported = ImportJsonl(*copy, in, "records.jsonl");
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.error().code(), ErrorCode::kParse);
  EXPECT_NE(imported.error().message().find(fmt::format("records.jsonl:{}", line)),
            std::string::npos)
      << imported.error().message();
  EXPECT_NE(imported.error().message().find("'crashed'"), std::string::npos)
      << imported.error().message();
}

// --- DatabaseAdmin ---

TEST_P(Conformance, IntegrityCheckAndVacuumPass) {
  auto db = Open();
  ASSERT_TRUE(Populate(*db, 2).ok());
  std::vector<Record> batch{MakeRecord(0, 1, 1e-3)};
  ASSERT_TRUE(db->CommitRecords(batch).ok());
  EXPECT_TRUE(db->CheckIntegrity().ok());
  EXPECT_TRUE(db->Vacuum().ok());
  EXPECT_TRUE(db->RecomputeBest().ok());
  EXPECT_TRUE((*db->Best(WorkloadKeyFor(0), kTarget)).has_value());
}

CompiledPlanEntry Remembered(int64_t generation, const std::string& graph = "00000000000000ff",
                             const std::string& context = "options a") {
  return {graph, kTarget, context, generation, R"({"groups":[]})", R"({"groups":[]})", 0};
}

// --- CompiledPlanStore ---

TEST_P(Conformance, EveryChangeThatCanChangeACompileMovesTheGeneration) {
  auto db = Open();
  auto generation = [&] {
    auto g = db->Generation();
    EXPECT_TRUE(g.ok()) << g.error().ToString();
    return g.ok() ? *g : -1;
  };
  int64_t last = generation();
  auto moved = [&] {
    const int64_t now = generation();
    const bool changed = now > last;
    last = now;
    return changed;
  };
  ASSERT_TRUE(Populate(*db, 2).ok());
  EXPECT_TRUE(moved()) << "a target";
  std::vector<Record> batch{MakeRecord(0, 1, 1e-3)};
  ASSERT_TRUE(db->CommitRecords(batch).ok());
  EXPECT_TRUE(moved()) << "a record";
  auto model = db->SaveModel({0, "xgboost", "", 1, "{}", "blob", false, 0});
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE(moved()) << "a cost model";
  ASSERT_TRUE(db->ActivateModel(*model).ok());
  EXPECT_TRUE(moved()) << "an activation";
  ASSERT_TRUE(db->PutTarget({kTarget, R"({"cpu_model":"test"})", R"({"peak":1})"}).ok());
  EXPECT_TRUE(moved()) << "a calibration";
  ASSERT_TRUE(db->RecomputeBest().ok());
  EXPECT_TRUE(moved()) << "best plans recomputed";
  ASSERT_TRUE(db->CreateJob({0, "{}", "running", "{}", 0, 0}).ok());
  ASSERT_TRUE(db->PutWorkload({WorkloadKeyFor(9), WorkloadKind::kGroup, "{}"}).ok());
  ASSERT_TRUE(*db->PutCompiledPlan(Remembered(last)));
  EXPECT_FALSE(moved()) << "jobs, workloads without records and remembered plans choose nothing";
}

TEST_P(Conformance, ARememberedPlanIsFoundOnlyAtItsGeneration) {
  auto db = Open();
  ASSERT_TRUE(Populate(*db, 1).ok());
  const int64_t g = *db->Generation();
  EXPECT_FALSE(db->FindCompiledPlan("00000000000000ff", kTarget, "options a")->has_value());
  ASSERT_TRUE(*db->PutCompiledPlan(Remembered(g)));
  ASSERT_TRUE(*db->PutCompiledPlan(Remembered(g, "00000000000000ff", "options b")));
  auto found = db->FindCompiledPlan("00000000000000ff", kTarget, "options a");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->generation, g);
  EXPECT_EQ((*found)->plan, R"({"groups":[]})");
  EXPECT_GT((*found)->created_at, 0);
  EXPECT_FALSE(db->FindCompiledPlan("00000000000000ff", kTarget, "options c")->has_value());
  EXPECT_FALSE(
      db->FindCompiledPlan("00000000000000ff", "00000000000000bb", "options a")->has_value());
  EXPECT_FALSE(*db->PutCompiledPlan(Remembered(g - 1))) << "an older generation is refused";
  EXPECT_EQ(db->Stats(kTarget)->compiled_plans_current, 2);
  EXPECT_EQ(db->CompiledPlans(kTarget)->size(), 2u);
  EXPECT_TRUE(db->CompiledPlans("00000000000000bb")->empty());

  std::vector<Record> batch{MakeRecord(0, 1, 1e-3)};
  ASSERT_TRUE(db->CommitRecords(batch).ok());
  EXPECT_FALSE(db->FindCompiledPlan("00000000000000ff", kTarget, "options a")->has_value())
      << "a commit made it out of date";
  EXPECT_TRUE(db->CompiledPlans(kTarget)->empty());
  auto stats = db->Stats(kTarget);
  EXPECT_EQ(stats->compiled_plans, 2);
  EXPECT_EQ(stats->compiled_plans_current, 0);
  ASSERT_TRUE(db->Vacuum().ok());
  EXPECT_EQ(db->Stats(kTarget)->compiled_plans, 0) << "vacuum drops out-of-date plans";
  const int64_t now = *db->Generation();
  ASSERT_TRUE(*db->PutCompiledPlan(Remembered(now, "00000000000000ee")));
  ASSERT_TRUE(*db->PutCompiledPlan(Remembered(now)));
  EXPECT_EQ(db->Stats(kTarget)->compiled_plans, 2);
}

INSTANTIATE_TEST_SUITE_P(
    Implementations, Conformance,
    ::testing::Values(Implementation{"sqlite_file",
                                     [](const std::string& name, const OpenOptions& o) {
                                       return MustOpen(
                                           MakeSqliteDatabase(testing::FreshDbPath(name), o));
                                     }},
                      Implementation{"sqlite_memory",
                                     [](const std::string&, const OpenOptions& o) {
                                       return MustOpen(MakeSqliteDatabase(":memory:", o));
                                     }}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(SqliteFile, ReopenKeepsEverything) {
  const std::string path = testing::FreshDbPath("reopen");
  {
    auto db = MustOpen(MakeSqliteDatabase(path));
    ASSERT_TRUE(Populate(*db, 1).ok());
    std::vector<Record> batch{MakeRecord(0, 1, 2e-3)};
    ASSERT_TRUE(db->CommitRecords(batch).ok());
  }
  auto db = MustOpen(
      MakeSqliteDatabase(path, {.create = false, .read_only = true, .integrity_check = true}));
  ASSERT_TRUE(db);
  EXPECT_DOUBLE_EQ((*db->Best(WorkloadKeyFor(0), kTarget))->seconds, 2e-3);
  EXPECT_FALSE(db->PutWorkload({"abc", WorkloadKind::kGraph, "{}"}).ok());  // read-only
}

// A file written at schema version 1 (tests/db/data/schema_v1.sql, frozen) is
// refused read-only, migrated when opened writable, and then behaves as a new
// file: records deduplicated per workload, bests looked up.
TEST(SqliteFile, VersionOneFileIsMigrated) {
  const std::string path = testing::FreshDbPath("v1");
  {
    std::ifstream in(std::string(FUSETUNE_SOURCE_DIR) + "/tests/db/data/schema_v1.sql");
    std::stringstream sql;
    sql << in.rdbuf();
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, sql.str().c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_exec(raw, "PRAGMA application_id = 1179927618; PRAGMA user_version = 1", nullptr,
                 nullptr, nullptr);
    sqlite3_close(raw);
  }
  auto read_only = MakeSqliteDatabase(path, {.create = false, .read_only = true});
  ASSERT_FALSE(read_only.ok());
  EXPECT_NE(read_only.error().message().find("needs migrating"), std::string::npos);

  auto db = MustOpen(MakeSqliteDatabase(path));
  ASSERT_TRUE(Populate(*db, 3).ok());
  std::vector<Record> batch = {MakeRecord(0, 1, 2e-3), MakeRecord(0, 2, 1e-3),
                               MakeRecord(1, 3, 4e-3)};
  auto first = db->CommitRecords(batch);
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  std::vector<Record> again = {MakeRecord(0, 2, 1e-3)};
  auto second = db->CommitRecords(again);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)[0], (*first)[1]);
  auto stats = db->Stats(testing::kTarget);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->schema_version, kSchemaVersion);
  EXPECT_EQ(stats->records, 3);
  auto best = db->Best(WorkloadKeyFor(0), testing::kTarget);
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_EQ((*best)->record_id, (*first)[1]);
  EXPECT_TRUE(db->CheckIntegrity().ok());
}

// A version-2 file (no generation counter, no remembered compiles) reads
// as it is read-only, with nothing remembered, and is migrated writable.
TEST(SqliteFile, VersionTwoFileReadsWithoutRememberedCompilesUntilMigrated) {
  const std::string path = testing::FreshDbPath("v2");
  {
    auto db = MustOpen(MakeSqliteDatabase(path));
    ASSERT_TRUE(Populate(*db, 1).ok());
    std::vector<Record> batch{MakeRecord(0, 1, 2e-3)};
    ASSERT_TRUE(db->CommitRecords(batch).ok());
  }
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    std::string sql = "DROP TABLE compiled_plans; DROP TABLE generation; PRAGMA user_version = 2;";
    for (const char* trigger :
         {"records_update", "records_delete", "models_insert", "models_update", "models_delete",
          "targets_insert", "targets_update", "targets_delete"})
      sql = fmt::format("DROP TRIGGER generation_{}; ", trigger) + sql;
    ASSERT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
  auto read_only = MustOpen(MakeSqliteDatabase(path, {.create = false, .read_only = true}));
  ASSERT_TRUE(read_only);
  EXPECT_DOUBLE_EQ((*read_only->Best(WorkloadKeyFor(0), kTarget))->seconds, 2e-3);
  auto generation = read_only->Generation();
  ASSERT_FALSE(generation.ok());
  EXPECT_NE(generation.error().message().find("open it writable once"), std::string::npos);
  EXPECT_FALSE(read_only->FindCompiledPlan("00000000000000ff", kTarget, "a")->has_value());
  read_only.reset();

  auto db = MustOpen(MakeSqliteDatabase(path));
  EXPECT_EQ(db->Stats(kTarget)->schema_version, kSchemaVersion);
  const int64_t g = *db->Generation();
  std::vector<Record> batch{MakeRecord(0, 2, 1e-3)};
  ASSERT_TRUE(db->CommitRecords(batch).ok());
  EXPECT_GT(*db->Generation(), g);
  EXPECT_TRUE(db->CheckIntegrity().ok());
}

// A status column holding text this build does not know (the schema's CHECK
// refuses it, so only a file edited without checks, or damaged, has one)
// stops reading with the record named, not a crash nor a guess.
TEST(SqliteFile, AnUnknownStoredStatusIsAnErrorNamingTheRecord) {
  const std::string path = testing::FreshDbPath("unknown_status");
  int64_t id = 0;
  {
    auto db = MustOpen(MakeSqliteDatabase(path));
    ASSERT_TRUE(Populate(*db, 1).ok());
    std::vector<Record> batch{MakeRecord(0, 1, 2e-3), MakeRecord(0, 2, 3e-3)};
    ASSERT_TRUE(db->CommitRecords(batch).ok());
    id = batch[1].id;
  }
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    const std::string sql = fmt::format(
        "PRAGMA ignore_check_constraints = ON; UPDATE records SET status = 'crashed' WHERE id = {}",
        id);
    ASSERT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  auto db = MustOpen(MakeSqliteDatabase(path));
  int seen = 0;
  Status st = db->ForEachRecord({}, [&](const Record&) { return ++seen, true; });
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(seen, 1);  // the records before it were read
  EXPECT_EQ(st.error().code(), ErrorCode::kParse);
  EXPECT_NE(st.error().message().find(fmt::format("record {}", id)), std::string::npos)
      << st.error().message();
  EXPECT_NE(st.error().message().find("'crashed'"), std::string::npos) << st.error().message();
  // Counting by status still shows what is stored.
  EXPECT_EQ(db->Stats("")->records_by_status.at("crashed"), 1);
}

// A facet is an interface of its own: a store of jobs alone (a test double
// here) serves code that needs only jobs, as the full database does.
class MemoryJobs final : public JobStore {
 public:
  Result<int64_t> CreateJob(const JobEntry& job) override {
    jobs_.push_back(job);
    jobs_.back().id = static_cast<int64_t>(jobs_.size());
    return jobs_.back().id;
  }
  Status UpdateJob(int64_t id, const std::string& state, const std::string& progress) override {
    if (id < 1 || id > static_cast<int64_t>(jobs_.size()))
      return Error(ErrorCode::kNotFound, fmt::format("no job {}", id));
    jobs_[id - 1].state = state;
    jobs_[id - 1].progress = progress;
    return Status::Ok();
  }
  Result<std::optional<JobEntry>> GetJob(int64_t id) override {
    if (id < 1 || id > static_cast<int64_t>(jobs_.size())) return std::optional<JobEntry>();
    return std::optional<JobEntry>(jobs_[id - 1]);
  }
  Result<std::vector<JobEntry>> ListJobs() override { return jobs_; }

 private:
  std::vector<JobEntry> jobs_;
};

// Code that depends on the JobStore facet only.
Result<std::string> RunAndFinish(JobStore& jobs) {
  FT_ASSIGN_OR_RETURN(const int64_t id, jobs.CreateJob({}));
  FT_RETURN_IF_ERROR(jobs.UpdateJob(id, "done", R"({"trials":3})"));
  FT_ASSIGN_OR_RETURN(std::optional<JobEntry> job, jobs.GetJob(id));
  return job ? job->state + " " + job->progress : "missing";
}

TEST(Facets, CodeOfOneFacetRunsOnADoubleAndOnTheDatabase) {
  MemoryJobs double_jobs;
  auto on_double = RunAndFinish(double_jobs);
  ASSERT_TRUE(on_double.ok());
  auto db = MustOpen(MakeSqliteDatabase(":memory:"));
  auto on_database = RunAndFinish(*db);
  ASSERT_TRUE(on_database.ok()) << on_database.error().ToString();
  EXPECT_EQ(*on_double, *on_database);
  EXPECT_EQ(*on_double, R"(done {"trials":3})");
}

TEST(SqliteFile, NotADatabaseCorruptNewerAndForeignFilesAreClearErrors) {
  const std::string text = testing::FreshDbPath("text");
  std::ofstream(text) << "this is not a database, it is a text file with enough bytes to "
                         "look like a header............................................";
  auto not_db = MakeSqliteDatabase(text);
  ASSERT_FALSE(not_db.ok());
  EXPECT_NE(not_db.error().message().find("not a database"), std::string::npos)
      << not_db.error().message();

  EXPECT_FALSE(MakeSqliteDatabase("/nonexistent/dir/x.db").ok());
  EXPECT_FALSE(MakeSqliteDatabase(testing::FreshDbPath("missing"), {.create = false}).ok());

  const std::string newer = testing::FreshDbPath("newer");
  { ASSERT_TRUE(MakeSqliteDatabase(newer).ok()); }
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(newer.c_str(), &raw), SQLITE_OK);
    sqlite3_exec(raw, "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
  }
  auto too_new = MakeSqliteDatabase(newer);
  ASSERT_FALSE(too_new.ok());
  EXPECT_NE(too_new.error().message().find("newer fusetune"), std::string::npos);

  const std::string foreign = testing::FreshDbPath("foreign");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(foreign.c_str(), &raw), SQLITE_OK);
    sqlite3_exec(raw, "CREATE TABLE songs(title TEXT)", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
  }
  auto other_app = MakeSqliteDatabase(foreign);
  ASSERT_FALSE(other_app.ok());
  EXPECT_NE(other_app.error().message().find("another application"), std::string::npos);

  // Overwrite pages in the middle of a real database.
  const std::string corrupt = testing::FreshDbPath("corrupt");
  {
    auto db = MustOpen(MakeSqliteDatabase(corrupt, {.sync_full = false}));
    ASSERT_TRUE(Populate(*db, 50).ok());
    std::vector<Record> batch;
    for (int i = 0; i < 2000; ++i) batch.push_back(MakeRecord(i % 50, i, 1e-3));
    ASSERT_TRUE(db->CommitRecords(batch).ok());
    ASSERT_TRUE(db->Vacuum().ok());
  }
  {
    std::fstream f(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 * 3);
    const std::string garbage(4096 * 4, '\x5a');
    f.write(garbage.data(), garbage.size());
  }
  auto broken = MakeSqliteDatabase(corrupt, {.integrity_check = true});
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().code(), ErrorCode::kCorrupt) << broken.error().ToString();
}

}  // namespace
}  // namespace fusetune::db
