// The SQLite Database's jobs, cost models, statistics and maintenance.
#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "db/sqlite_impl.h"

namespace fusetune::db::detail {

namespace {

JobEntry JobFromRow(SQLite::Statement& q) {
  return JobEntry{q.getColumn(0).getInt64(),  q.getColumn(1).getString(),
                  q.getColumn(2).getString(), q.getColumn(3).getString(),
                  q.getColumn(4).getDouble(), q.getColumn(5).getDouble()};
}

constexpr const char* kJobColumns =
    "SELECT id, spec, state, progress, created_at, updated_at FROM jobs";

}  // namespace

Result<int64_t> SqliteDatabase::CreateJob(const JobEntry& job) {
  return Guarded("creating a job", [&]() -> Result<int64_t> {
    SQLite::Statement q(*db_,
                        "INSERT INTO jobs(spec, state, progress, created_at, updated_at) "
                        "VALUES(?, ?, ?, ?, ?)");
    const double now = NowSeconds();
    q.bind(1, job.spec);
    q.bind(2, job.state);
    q.bind(3, job.progress);
    q.bind(4, now);
    q.bind(5, now);
    q.exec();
    return db_->getLastInsertRowid();
  });
}

Status SqliteDatabase::UpdateJob(int64_t id, const std::string& state,
                                 const std::string& progress) {
  return Guarded(fmt::format("updating job {}", id), [&]() -> Status {
    SQLite::Statement q(*db_,
                        "UPDATE jobs SET state = ?, progress = ?, updated_at = ? WHERE id = ?");
    q.bind(1, state);
    q.bind(2, progress);
    q.bind(3, NowSeconds());
    q.bind(4, id);
    if (q.exec() == 0) return Error(ErrorCode::kNotFound, fmt::format("no job {}", id));
    return Status::Ok();
  });
}

Result<std::optional<JobEntry>> SqliteDatabase::GetJob(int64_t id) {
  return Guarded(fmt::format("reading job {}", id), [&]() -> Result<std::optional<JobEntry>> {
    SQLite::Statement q(*db_, std::string(kJobColumns) + " WHERE id = ?");
    q.bind(1, id);
    if (!q.executeStep()) return std::optional<JobEntry>();
    return std::optional<JobEntry>(JobFromRow(q));
  });
}

Result<std::vector<JobEntry>> SqliteDatabase::ListJobs() {
  return Guarded("listing jobs", [&]() -> Result<std::vector<JobEntry>> {
    std::vector<JobEntry> jobs;
    SQLite::Statement q(*db_, std::string(kJobColumns) + " ORDER BY id");
    while (q.executeStep()) jobs.push_back(JobFromRow(q));
    return jobs;
  });
}

Result<int64_t> SqliteDatabase::SaveModel(const ModelEntry& m) {
  return Guarded("saving cost model " + m.name, [&]() -> Result<int64_t> {
    SQLite::Statement q(*db_,
                        "INSERT INTO cost_models(name, target, feature_version, metrics, model, "
                        "active, created_at) VALUES(?, ?, ?, ?, ?, 0, ?)");
    q.bind(1, m.name);
    q.bind(2, m.target);
    q.bind(3, m.feature_version);
    q.bind(4, m.metrics);
    q.bind(5, m.blob.data(), static_cast<int>(m.blob.size()));
    q.bind(6, NowSeconds());
    q.exec();
    return db_->getLastInsertRowid();
  });
}

Status SqliteDatabase::ActivateModel(int64_t id) {
  return Guarded(fmt::format("activating cost model {}", id), [&]() -> Status {
    SQLite::Transaction transaction(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement name(*db_, "SELECT name FROM cost_models WHERE id = ?");
    name.bind(1, id);
    if (!name.executeStep())
      return Error(ErrorCode::kNotFound, fmt::format("no cost model {}", id));
    SQLite::Statement q(*db_, "UPDATE cost_models SET active = (id = ?) WHERE name = ?");
    q.bind(1, id);
    q.bind(2, name.getColumn(0).getString());
    q.exec();
    transaction.commit();
    return Status::Ok();
  });
}

Result<std::optional<ModelEntry>> SqliteDatabase::ActiveModel(const std::string& name) {
  return Guarded("reading the active cost model", [&]() -> Result<std::optional<ModelEntry>> {
    SQLite::Statement q(*db_,
                        "SELECT id, target, feature_version, metrics, model, created_at FROM "
                        "cost_models WHERE name = ? AND active = 1");
    q.bind(1, name);
    if (!q.executeStep()) return std::optional<ModelEntry>();
    const SQLite::Column blob = q.getColumn(4);
    ModelEntry m{q.getColumn(0).getInt64(),
                 name,
                 q.getColumn(1).getString(),
                 q.getColumn(2).getInt(),
                 q.getColumn(3).getString(),
                 std::string(static_cast<const char*>(blob.getBlob()), blob.getBytes()),
                 true,
                 q.getColumn(5).getDouble()};
    return std::optional<ModelEntry>(std::move(m));
  });
}

Result<std::vector<ModelEntry>> SqliteDatabase::ListModels() {
  return Guarded("listing cost models", [&]() -> Result<std::vector<ModelEntry>> {
    std::vector<ModelEntry> models;
    SQLite::Statement q(*db_,
                        "SELECT id, name, target, feature_version, metrics, active, created_at "
                        "FROM cost_models ORDER BY id");
    while (q.executeStep())
      models.push_back(ModelEntry{q.getColumn(0).getInt64(), q.getColumn(1).getString(),
                                  q.getColumn(2).getString(), q.getColumn(3).getInt(),
                                  q.getColumn(4).getString(), "", q.getColumn(5).getInt() != 0,
                                  q.getColumn(6).getDouble()});
    return models;
  });
}

Status SqliteDatabase::RecomputeBestLocked() {
  db_->exec("DELETE FROM best");
  SQLite::Statement q(*db_,
                      "SELECT id, workload_id, target_id, seconds, kernel_versions FROM records "
                      "WHERE status = 'ok' ORDER BY workload_id, target_id, seconds, id");
  SQLite::Statement insert(*db_,
                           "INSERT INTO best(workload_id, target_id, record_id, seconds) "
                           "VALUES(?, ?, ?, ?)");
  std::pair<int64_t, int64_t> last{-1, -1};
  while (q.executeStep()) {
    const std::pair<int64_t, int64_t> pair{q.getColumn(1).getInt64(), q.getColumn(2).getInt64()};
    if (pair == last || !IsFreshJson(q.getColumn(4).getString())) continue;
    last = pair;
    insert.reset();
    insert.bind(1, pair.first);
    insert.bind(2, pair.second);
    insert.bind(3, q.getColumn(0).getInt64());
    insert.bind(4, q.getColumn(3).getDouble());
    insert.exec();
  }
  SQLite::Statement meta(*db_,
                         "INSERT INTO meta(key, value) VALUES('best_kernel_versions', ?) "
                         "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  meta.bind(1, versions_json_);
  meta.exec();
  RaiseGeneration();
  best_cache_.clear();
  return Status::Ok();
}

Status SqliteDatabase::RecomputeBest() {
  return Guarded("recomputing best plans", [&]() -> Status {
    SQLite::Transaction transaction(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    FT_RETURN_IF_ERROR(RecomputeBestLocked());
    transaction.commit();
    return Status::Ok();
  });
}

Status SqliteDatabase::SyncBestWithVersions() {
  return Guarded("checking kernel versions", [&]() -> Status {
    SQLite::Statement q(*db_, "SELECT value FROM meta WHERE key = 'best_kernel_versions'");
    if (q.executeStep() && q.getColumn(0).getString() == versions_json_) return Status::Ok();
    q.reset();
    return RecomputeBest();
  });
}

Result<DbStats> SqliteDatabase::Stats(const std::string& this_target) {
  return Guarded("computing statistics", [&]() -> Result<DbStats> {
    DbStats s;
    auto count = [&](const char* sql) { return db_->execAndGet(sql).getInt64(); };
    s.schema_version = db_->execAndGet("PRAGMA user_version").getInt();
    s.targets = count("SELECT count(*) FROM targets");
    s.group_workloads = count("SELECT count(*) FROM workloads WHERE kind = 'group'");
    s.graph_workloads = count("SELECT count(*) FROM workloads WHERE kind = 'graph'");
    s.jobs = count("SELECT count(*) FROM jobs");
    s.models = count("SELECT count(*) FROM cost_models");
    s.best_entries = count("SELECT count(*) FROM best");
    if (HasCompiledPlans()) {
      s.generation = count("SELECT value FROM generation");
      s.compiled_plans = count("SELECT count(*) FROM compiled_plans");
      s.compiled_plans_current = count(
          "SELECT count(*) FROM compiled_plans WHERE generation = (SELECT value FROM generation)");
    }
    SQLite::Statement by_status(*db_, "SELECT status, count(*) FROM records GROUP BY status");
    while (by_status.executeStep()) {
      s.records_by_status[by_status.getColumn(0).getString()] = by_status.getColumn(1).getInt64();
      s.records += by_status.getColumn(1).getInt64();
    }
    // Stale: kernel versions (per distinct version set) and other targets.
    SQLite::Statement versions(
        *db_, "SELECT kernel_versions, count(*) FROM records GROUP BY kernel_versions");
    while (versions.executeStep()) {
      for (const auto& [name, v] : VersionsFromJson(versions.getColumn(0).getString())) {
        auto it = options_.kernel_versions.find(name);
        if (it != options_.kernel_versions.end() && it->second == v) continue;
        const std::string reason =
            it == options_.kernel_versions.end()
                ? fmt::format("kernel template '{}' unknown to this build", name)
                : fmt::format("kernel template '{}' v{} (this build: v{})", name, v, it->second);
        s.stale[reason] += versions.getColumn(1).getInt64();
      }
    }
    if (!this_target.empty()) {
      SQLite::Statement other(*db_,
                              "SELECT t.fingerprint, count(*) FROM records r JOIN targets t ON "
                              "t.id = r.target_id WHERE t.fingerprint != ? GROUP BY t.fingerprint");
      other.bind(1, this_target);
      while (other.executeStep())
        s.stale["measured on another target (" + other.getColumn(0).getString() + ")"] +=
            other.getColumn(1).getInt64();
    }
    const std::string file = db_->getFilename();
    std::error_code ec;
    if (!file.empty())
      for (const char* suffix : {"", "-wal"})
        if (auto size = std::filesystem::file_size(file + suffix, ec); !ec)
          s.file_bytes += static_cast<int64_t>(size);
    return s;
  });
}

Status SqliteDatabase::CheckIntegrity() {
  // The integrity check is what the damaged-file hint refers to: not its own.
  return detail::Guarded("checking integrity", [&]() -> Status {
    SQLite::Statement q(*db_, "PRAGMA integrity_check");
    std::string problems;
    while (q.executeStep()) {
      const std::string line = q.getColumn(0).getString();
      if (line != "ok") problems += (problems.empty() ? "" : "; ") + line;
    }
    if (!problems.empty())
      return Error(ErrorCode::kCorrupt, "integrity check failed: " + problems.substr(0, 2000));
    SQLite::Statement fk(*db_, "PRAGMA foreign_key_check");
    if (fk.executeStep())
      return Error(ErrorCode::kCorrupt,
                   fmt::format("foreign key check failed: table {} row {}",
                               fk.getColumn(0).getString(), fk.getColumn(1).getInt64()));
    return Status::Ok();
  });
}

Status SqliteDatabase::Vacuum() {
  return Guarded("vacuuming", [&]() -> Status {
    if (HasCompiledPlans())
      db_->exec("DELETE FROM compiled_plans WHERE generation < (SELECT value FROM generation)");
    db_->exec("VACUUM");
    db_->exec("PRAGMA wal_checkpoint(TRUNCATE)");
    return Status::Ok();
  });
}

}  // namespace fusetune::db::detail
