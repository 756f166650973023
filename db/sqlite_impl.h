// The SQLite Database: private to db/. Split over sqlite_database.cpp
// (opening, records, best plans, lookups), sqlite_compiled.cpp (the
// generation and remembered compiles) and sqlite_admin.cpp (jobs, cost
// models, statistics, integrity, vacuum).
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "db/database.h"

namespace fusetune::db::detail {

double NowSeconds();
// Canonical JSON of kernel versions: {"attention":1,"gemm":2} (sorted, no spaces).
std::string VersionsToJson(const std::map<std::string, int>& versions);
std::map<std::string, int> VersionsFromJson(const std::string& json);
Error Translate(const std::exception& e, const std::string& context);

// Runs `body`, turning SQLite's exceptions into Error values: no exception
// leaves db/.
template <typename Body>
auto Guarded(const std::string& context, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& e) {
    return Translate(e, context);
  }
}

class SqliteDatabase final : public Database {
 public:
  // `schema_version`: the file's, older than kSchemaVersion only read-only.
  SqliteDatabase(std::unique_ptr<SQLite::Database> db, OpenOptions options, int schema_version);

  Status PutTarget(const TargetEntry& target) override;
  Result<std::optional<TargetEntry>> GetTarget(const std::string& fingerprint) override;
  Result<std::vector<TargetEntry>> ListTargets() override;
  Status PutWorkload(const WorkloadEntry& workload) override;
  Result<std::optional<WorkloadEntry>> GetWorkload(const std::string& key) override;
  Result<std::vector<int64_t>> CommitRecords(std::span<Record> records) override;
  Result<std::optional<BestPlan>> Best(const std::string& workload_key,
                                       const std::string& target) override;
  Result<std::optional<double>> FasterStaleSeconds(const std::string& workload_key,
                                                   const std::string& target) override;
  Result<std::map<std::string, BestPlan>> BestPlans(const std::string& target) override;
  Result<std::vector<Record>> TopK(const std::string& workload_key, const std::string& target,
                                   int k) override;
  Status ForEachRecord(const RecordFilter& filter,
                       const std::function<bool(const Record&)>& visit) override;
  Result<std::vector<std::string>> WorkloadKeys(std::optional<WorkloadKind> kind) override;
  Result<int64_t> CreateJob(const JobEntry& job) override;
  Status UpdateJob(int64_t id, const std::string& state, const std::string& progress) override;
  Result<std::optional<JobEntry>> GetJob(int64_t id) override;
  Result<std::vector<JobEntry>> ListJobs() override;
  Result<int64_t> SaveModel(const ModelEntry& model) override;
  Status ActivateModel(int64_t id) override;
  Result<std::optional<ModelEntry>> ActiveModel(const std::string& name) override;
  Result<std::vector<ModelEntry>> ListModels() override;
  Result<int64_t> Generation() override;
  Result<std::optional<CompiledPlanEntry>> FindCompiledPlan(const std::string& graph_key,
                                                            const std::string& target,
                                                            const std::string& context) override;
  Result<std::vector<CompiledPlanEntry>> CompiledPlans(const std::string& target) override;
  Result<bool> PutCompiledPlan(const CompiledPlanEntry& entry) override;
  Status RecomputeBest() override;
  Result<DbStats> Stats(const std::string& this_target) override;
  Status CheckIntegrity() override;
  Status Vacuum() override;

  // At open: when the file's bests were computed for other kernel versions
  // than this build's, recompute them (writable files only).
  Status SyncBestWithVersions();
  // Prepares the statements a compile's lookups run (Best, FasterStaleSeconds).
  void PrepareLookups() {
    BestQuery();
    StaleByIdsQuery();
    if (HasCompiledPlans()) CompiledPlanQuery();
  }

 private:
  // detail::Guarded, and a file that fails SQLite's checks is named in the
  // error with the command that reports its damage: a reader (a compile)
  // touches a few pages and would otherwise say only which lookup failed.
  template <typename Body>
  auto Guarded(const std::string& context, Body&& body) -> decltype(body()) {
    auto result = detail::Guarded(context, std::forward<Body>(body));
    if (!result.ok() && result.error().code() == ErrorCode::kCorrupt)
      return NameDamagedFile(result.error());
    return result;
  }
  Error NameDamagedFile(const Error& error) const;
  bool IsFresh(const std::map<std::string, int>& versions) const;
  bool IsFreshJson(const std::string& versions_json) const;
  std::optional<int64_t> TargetId(const std::string& fingerprint);
  std::optional<int64_t> WorkloadId(const std::string& key);
  // The fastest fresh ok record by scanning (when the stored best is stale).
  std::optional<BestPlan> ScanBest(int64_t workload_id, int64_t target_id);
  // `slot`'s statement, prepared from `sql` on first use.
  SQLite::Statement& Prepared(std::unique_ptr<SQLite::Statement>& slot, const char* sql);
  // Prepared on first use (or by PrepareLookups).
  SQLite::Statement& BestQuery();
  SQLite::Statement& StaleByIdsQuery();  // faster records of a (workload, target) id pair
  SQLite::Statement& StaleByKeyQuery();  // the same by workload key and target fingerprint
  SQLite::Statement& CompiledPlanQuery();
  // In a write transaction that adds records or changes best plans (the
  // schema's triggers cover the rarer changes).
  void RaiseGeneration();
  Status RecomputeBestLocked();
  bool HasCompiledPlans() const { return schema_version_ >= 3; }

  std::unique_ptr<SQLite::Database> db_;
  OpenOptions options_;
  int schema_version_ = kSchemaVersion;
  std::string versions_json_;
  std::unordered_map<std::string, int64_t> target_ids_, workload_ids_;
  // Lookups answered so far (negative answers too); this handle's commits
  // keep it current. Another process's later commits are seen by a new
  // handle, as compilers open the database per compilation.
  std::unordered_map<std::string, std::optional<BestPlan>> best_cache_;
  // The (workload, target) ids of the best rows Best() read, for FasterStaleSeconds.
  std::unordered_map<std::string, std::pair<int64_t, int64_t>> best_row_ids_;
  std::unique_ptr<SQLite::Statement> best_query_, stale_query_, stale_by_ids_query_, insert_record_,
      update_best_, compiled_plan_query_;
};

}  // namespace fusetune::db::detail
