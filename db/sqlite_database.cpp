#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "db/record_text.h"
#include "db/schema.h"
#include "db/sqlite_impl.h"
#include "fusion_space/kernel_instance.h"

namespace fusetune::db {

const char* WorkloadKindName(WorkloadKind kind) {
  return kind == WorkloadKind::kGraph ? "graph" : "group";
}

namespace detail {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string VersionsToJson(const std::map<std::string, int>& versions) {
  std::string s = "{";
  for (const auto& [name, v] : versions)
    s += fmt::format("{}\"{}\":{}", s.size() > 1 ? "," : "", name, v);
  return s + "}";
}

std::map<std::string, int> VersionsFromJson(const std::string& json) {
  std::map<std::string, int> versions;
  const auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_object())
    for (const auto& [name, v] : j.items())
      if (v.is_number_integer()) versions[name] = v.get<int>();
  return versions;
}

Error Translate(const std::exception& e, const std::string& context) {
  const auto* sql = dynamic_cast<const SQLite::Exception*>(&e);
  const int code = sql ? (sql->getErrorCode() & 0xff) : -1;
  switch (code) {
    case SQLITE_NOTADB:
      return Error(ErrorCode::kCorrupt,
                   fmt::format("{}: not a database file ({})", context, e.what()));
    case SQLITE_CORRUPT:
      return Error(ErrorCode::kCorrupt,
                   fmt::format("{}: the database file is corrupt ({})", context, e.what()));
    case SQLITE_CANTOPEN:
      return Error(ErrorCode::kNotFound, fmt::format("{}: cannot open ({})", context, e.what()));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Error(ErrorCode::kIo, fmt::format("{}: the database stayed locked by another process "
                                               "past the busy timeout ({})",
                                               context, e.what()));
    case SQLITE_CONSTRAINT:
      return Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", context, e.what()));
    case SQLITE_READONLY:
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("{}: the database is open read-only ({})", context, e.what()));
    default:
      return Error(sql ? ErrorCode::kIo : ErrorCode::kInternal,
                   fmt::format("{}: {}", context, e.what()));
  }
}

namespace {

uint64_t RecordDigest(const Record& r, const std::string& versions) {
  Hasher h;
  const std::string status = StatusToText(r.status);  // the stored text: digests stay as they were
  for (const std::string* s : {&r.workload_key, &r.target, &r.plan, &status, &r.metrics, &r.error,
                               &r.fusetune_version, &versions})
    h.AddString(*s);
  h.AddDouble(r.created_at);
  h.AddDouble(r.seconds);
  // SQLite integers are signed: keep the digest's top bit clear.
  return h.digest() >> 1;
}

// Kernel versions as stored text, formatted once per distinct map: a batch's
// records almost always carry this build's versions.
class VersionsText {
 public:
  VersionsText(const std::map<std::string, int>& current, const std::string& current_text)
      : current_(current), current_text_(current_text) {}
  const std::string& Of(const std::map<std::string, int>& versions) {
    if (versions == current_) return current_text_;
    if (!last_ || *last_ != versions) {
      last_ = versions;
      last_text_ = VersionsToJson(versions);
    }
    return last_text_;
  }

 private:
  const std::map<std::string, int>& current_;
  const std::string& current_text_;
  std::optional<std::map<std::string, int>> last_;
  std::string last_text_;
};

// Text columns are bound without copying: they outlive the statement's exec().
void BindRecord(SQLite::Statement& q, const Record& r, int64_t workload, int64_t target,
                const std::string& versions, int64_t digest) {
  static const std::string kEmptyMetrics = "{}";
  q.reset();
  q.bind(1, workload);
  q.bind(2, target);
  q.bindNoCopy(3, r.plan);
  q.bindNoCopy(4, StatusToText(r.status));
  if (r.status == RecordStatus::kOk)
    q.bind(5, r.seconds);
  else
    q.bind(5);
  q.bindNoCopy(6, r.metrics.empty() ? kEmptyMetrics : r.metrics);
  q.bindNoCopy(7, r.error);
  if (r.job_id > 0)
    q.bind(8, r.job_id);
  else
    q.bind(8);
  q.bind(9, r.created_at);
  q.bindNoCopy(10, r.fusetune_version);
  q.bindNoCopy(11, versions);
  q.bind(12, digest);
}

}  // namespace

SqliteDatabase::SqliteDatabase(std::unique_ptr<SQLite::Database> db, OpenOptions options,
                               int schema_version)
    : db_(std::move(db)), options_(std::move(options)), schema_version_(schema_version) {
  if (options_.kernel_versions.empty())
    options_.kernel_versions = fusion_space::KernelTemplateVersions();
  versions_json_ = VersionsToJson(options_.kernel_versions);
}

bool SqliteDatabase::IsFresh(const std::map<std::string, int>& versions) const {
  for (const auto& [name, v] : versions) {
    auto it = options_.kernel_versions.find(name);
    if (it == options_.kernel_versions.end() || it->second != v) return false;
  }
  return true;
}

bool SqliteDatabase::IsFreshJson(const std::string& versions_json) const {
  // Records of this build store exactly this text: no JSON to parse (a
  // compile asks for the best record of each of a model's groups).
  if (versions_json == versions_json_) return true;
  return IsFresh(VersionsFromJson(versions_json));
}

std::optional<int64_t> SqliteDatabase::TargetId(const std::string& fingerprint) {
  if (auto it = target_ids_.find(fingerprint); it != target_ids_.end()) return it->second;
  SQLite::Statement q(*db_, "SELECT id FROM targets WHERE fingerprint = ?");
  q.bind(1, fingerprint);
  if (!q.executeStep()) return std::nullopt;
  return target_ids_[fingerprint] = q.getColumn(0).getInt64();
}

std::optional<int64_t> SqliteDatabase::WorkloadId(const std::string& key) {
  if (auto it = workload_ids_.find(key); it != workload_ids_.end()) return it->second;
  SQLite::Statement q(*db_, "SELECT id FROM workloads WHERE key = ?");
  q.bind(1, key);
  if (!q.executeStep()) return std::nullopt;
  return workload_ids_[key] = q.getColumn(0).getInt64();
}

Status SqliteDatabase::PutTarget(const TargetEntry& t) {
  return Guarded("storing target " + t.fingerprint, [&]() -> Status {
    SQLite::Statement q(*db_,
                        "INSERT INTO targets(fingerprint, description, calibration, created_at) "
                        "VALUES(?, ?, ?, ?) ON CONFLICT(fingerprint) DO UPDATE SET "
                        "description = excluded.description, calibration = "
                        "CASE WHEN excluded.calibration = '{}' THEN targets.calibration "
                        "ELSE excluded.calibration END");
    q.bind(1, t.fingerprint);
    q.bind(2, t.description.empty() ? "{}" : t.description);
    q.bind(3, t.calibration.empty() ? "{}" : t.calibration);
    q.bind(4, NowSeconds());
    q.exec();
    return Status::Ok();
  });
}

Result<std::optional<TargetEntry>> SqliteDatabase::GetTarget(const std::string& fingerprint) {
  return Guarded("reading target " + fingerprint, [&]() -> Result<std::optional<TargetEntry>> {
    SQLite::Statement q(*db_, "SELECT description, calibration FROM targets WHERE fingerprint = ?");
    q.bind(1, fingerprint);
    if (!q.executeStep()) return std::optional<TargetEntry>();
    return std::optional<TargetEntry>(
        TargetEntry{fingerprint, q.getColumn(0).getString(), q.getColumn(1).getString()});
  });
}

Result<std::vector<TargetEntry>> SqliteDatabase::ListTargets() {
  return Guarded("listing targets", [&]() -> Result<std::vector<TargetEntry>> {
    std::vector<TargetEntry> out;
    SQLite::Statement q(*db_,
                        "SELECT fingerprint, description, calibration FROM targets ORDER BY id");
    while (q.executeStep())
      out.push_back(
          {q.getColumn(0).getString(), q.getColumn(1).getString(), q.getColumn(2).getString()});
    return out;
  });
}

Status SqliteDatabase::PutWorkload(const WorkloadEntry& w) {
  return Guarded("storing workload " + w.key, [&]() -> Status {
    SQLite::Statement q(
        *db_,
        "INSERT INTO workloads(key, kind, description, created_at) VALUES(?, ?, ?, ?) "
        "ON CONFLICT(key) DO NOTHING");
    q.bind(1, w.key);
    q.bind(2, WorkloadKindName(w.kind));
    q.bind(3, w.description.empty() ? "{}" : w.description);
    q.bind(4, NowSeconds());
    q.exec();
    return Status::Ok();
  });
}

Result<std::optional<WorkloadEntry>> SqliteDatabase::GetWorkload(const std::string& key) {
  return Guarded("reading workload " + key, [&]() -> Result<std::optional<WorkloadEntry>> {
    SQLite::Statement q(*db_, "SELECT kind, description FROM workloads WHERE key = ?");
    q.bind(1, key);
    if (!q.executeStep()) return std::optional<WorkloadEntry>();
    const WorkloadKind kind =
        q.getColumn(0).getString() == "graph" ? WorkloadKind::kGraph : WorkloadKind::kGroup;
    return std::optional<WorkloadEntry>(WorkloadEntry{key, kind, q.getColumn(1).getString()});
  });
}

Result<std::vector<int64_t>> SqliteDatabase::CommitRecords(std::span<Record> records) {
  return Guarded("committing records", [&]() -> Result<std::vector<int64_t>> {
    std::vector<int64_t> ids;
    ids.reserve(records.size());
    SQLite::Transaction transaction(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    if (!insert_record_)
      insert_record_ = std::make_unique<SQLite::Statement>(
          *db_,
          "INSERT INTO records(workload_id, target_id, plan, status, seconds, metrics, error, "
          "job_id, created_at, fusetune_version, kernel_versions, digest) "
          "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(workload_id, digest) DO NOTHING");
    if (!update_best_)
      update_best_ = std::make_unique<SQLite::Statement>(
          *db_,
          "INSERT INTO best(workload_id, target_id, record_id, seconds) VALUES(?, ?, ?, ?) "
          "ON CONFLICT(workload_id, target_id) DO UPDATE SET record_id = excluded.record_id, "
          "seconds = excluded.seconds WHERE excluded.seconds < best.seconds");
    struct BatchBest {
      int64_t record_id;
      double seconds;
      std::string cache_key;
    };
    std::map<std::pair<int64_t, int64_t>, BatchBest> fastest;
    VersionsText versions_text(options_.kernel_versions, versions_json_);
    for (Record& r : records) {
      const auto workload = WorkloadId(r.workload_key);
      const auto target = TargetId(r.target);
      if (!workload || !target)
        return Error(
            ErrorCode::kInvalidArgument,
            fmt::format("record for {} '{}' that the database does not have (PutWorkload "
                        "and PutTarget first)",
                        workload ? "target" : "workload", workload ? r.target : r.workload_key));
      if (r.created_at == 0) r.created_at = NowSeconds();
      const std::string& versions = versions_text.Of(r.kernel_versions);
      const bool ok = r.status == RecordStatus::kOk;
      const int64_t digest = static_cast<int64_t>(RecordDigest(r, versions));
      BindRecord(*insert_record_, r, *workload, *target, versions, digest);
      if (insert_record_->exec() == 0) {  // an identical record is already stored
        SQLite::Statement same(*db_, "SELECT id FROM records WHERE workload_id = ? AND digest = ?");
        same.bind(1, *workload);
        same.bind(2, digest);
        same.executeStep();
        r.id = same.getColumn(0).getInt64();
      } else {
        r.id = db_->getLastInsertRowid();
      }
      ids.push_back(r.id);
      if (ok && IsFresh(r.kernel_versions)) {  // the batch's fastest per pair, upserted once
        auto [it, added] = fastest.try_emplace({*workload, *target});
        if (added) it->second = {r.id, r.seconds, r.workload_key + "/" + r.target};
        if (r.seconds < it->second.seconds) {
          it->second.record_id = r.id;
          it->second.seconds = r.seconds;
        }
      }
    }
    for (const auto& [pair, best] : fastest) {
      SQLite::Statement& b = *update_best_;
      b.reset();
      b.bind(1, pair.first);
      b.bind(2, pair.second);
      b.bind(3, best.record_id);
      b.bind(4, best.seconds);
      b.exec();
    }
    RaiseGeneration();
    transaction.commit();
    for (const auto& [pair, best] : fastest) best_cache_.erase(best.cache_key);
    return ids;
  });
}

std::optional<BestPlan> SqliteDatabase::ScanBest(int64_t workload_id, int64_t target_id) {
  SQLite::Statement q(
      *db_,
      "SELECT id, plan, seconds, kernel_versions FROM records WHERE workload_id = ? "
      "AND target_id = ? AND status = 'ok' ORDER BY seconds, id");
  q.bind(1, workload_id);
  q.bind(2, target_id);
  while (q.executeStep())
    if (IsFreshJson(q.getColumn(3).getString()))
      return BestPlan{q.getColumn(0).getInt64(), q.getColumn(1).getString(),
                      q.getColumn(2).getDouble()};
  return std::nullopt;
}

SQLite::Statement& SqliteDatabase::Prepared(std::unique_ptr<SQLite::Statement>& slot,
                                            const char* sql) {
  if (!slot) slot = std::make_unique<SQLite::Statement>(*db_, sql);
  return *slot;
}

SQLite::Statement& SqliteDatabase::BestQuery() {
  // Scalar subqueries rather than joins: SQLite prepares this in about
  // 25 us, a four-table join in 40.
  return Prepared(best_query_,
                  "SELECT r.id, r.plan, r.seconds, r.kernel_versions, r.workload_id, r.target_id "
                  "FROM records r WHERE r.id = (SELECT record_id FROM best WHERE workload_id = "
                  "(SELECT id FROM workloads WHERE key = ?) AND target_id = "
                  "(SELECT id FROM targets WHERE fingerprint = ?))");
}

SQLite::Statement& SqliteDatabase::StaleByKeyQuery() {
  return Prepared(stale_query_,
                  "SELECT r.seconds, r.kernel_versions FROM records r "
                  "JOIN workloads w ON w.id = r.workload_id JOIN targets t ON t.id = r.target_id "
                  "WHERE w.key = ? AND t.fingerprint = ? AND r.status = 'ok' AND r.seconds < ? "
                  "ORDER BY r.seconds");
}

SQLite::Statement& SqliteDatabase::StaleByIdsQuery() {
  return Prepared(stale_by_ids_query_,
                  "SELECT seconds, kernel_versions FROM records WHERE workload_id = ? "
                  "AND target_id = ? AND status = 'ok' AND seconds < ? ORDER BY seconds");
}

Result<std::optional<BestPlan>> SqliteDatabase::Best(const std::string& workload_key,
                                                     const std::string& target) {
  const std::string cache_key = workload_key + "/" + target;
  if (auto it = best_cache_.find(cache_key); it != best_cache_.end()) return it->second;
  return Guarded("looking up " + cache_key, [&]() -> Result<std::optional<BestPlan>> {
    SQLite::Statement& q = BestQuery();
    q.reset();
    q.bind(1, workload_key);
    q.bind(2, target);
    std::optional<BestPlan> best;
    if (q.executeStep()) {
      best_row_ids_[cache_key] = {q.getColumn(4).getInt64(), q.getColumn(5).getInt64()};
      if (IsFreshJson(q.getColumn(3).getString()))
        best = BestPlan{q.getColumn(0).getInt64(), q.getColumn(1).getString(),
                        q.getColumn(2).getDouble()};
      else  // stored by a build with other kernel versions
        best = ScanBest(q.getColumn(4).getInt64(), q.getColumn(5).getInt64());
    }
    q.reset();  // ends the statement's read transaction
    return best_cache_[cache_key] = best;
  });
}

Result<std::optional<double>> SqliteDatabase::FasterStaleSeconds(const std::string& workload_key,
                                                                 const std::string& target) {
  FT_ASSIGN_OR_RETURN(const auto best, Best(workload_key, target));
  const auto ids = best_row_ids_.find(workload_key + "/" + target);
  return Guarded(
      "looking up older records of " + workload_key, [&]() -> Result<std::optional<double>> {
        // Records faster than the fresh best are stale by definition; the
        // index on (workload, target, status, seconds) makes this one probe.
        // By the ids Best() read when it found a best row (a statement
        // quicker to prepare), else by key and fingerprint.
        SQLite::Statement& q = ids != best_row_ids_.end() ? StaleByIdsQuery() : StaleByKeyQuery();
        q.reset();
        if (ids != best_row_ids_.end()) {
          q.bind(1, ids->second.first);
          q.bind(2, ids->second.second);
        } else {
          q.bind(1, workload_key);
          q.bind(2, target);
        }
        q.bind(3, best ? best->seconds : std::numeric_limits<double>::infinity());
        std::optional<double> stale;
        while (!stale && q.executeStep())
          if (!IsFreshJson(q.getColumn(1).getString())) stale = q.getColumn(0).getDouble();
        q.reset();  // ends the statement's read transaction
        return stale;
      });
}

Result<std::map<std::string, BestPlan>> SqliteDatabase::BestPlans(const std::string& target) {
  return Guarded(
      "looking up the best plans of " + target, [&]() -> Result<std::map<std::string, BestPlan>> {
        std::map<std::string, BestPlan> bests;
        const auto target_id = TargetId(target);
        if (!target_id) return bests;
        SQLite::Statement q(*db_,
                            "SELECT w.key, r.id, r.plan, r.seconds, r.kernel_versions, w.id "
                            "FROM best b JOIN workloads w ON w.id = b.workload_id "
                            "JOIN records r ON r.id = b.record_id WHERE b.target_id = ?");
        q.bind(1, *target_id);
        while (q.executeStep()) {
          std::optional<BestPlan> best;
          if (IsFreshJson(q.getColumn(4).getString()))
            best = BestPlan{q.getColumn(1).getInt64(), q.getColumn(2).getString(),
                            q.getColumn(3).getDouble()};
          else  // stored by a build with other kernel versions
            best = ScanBest(q.getColumn(5).getInt64(), *target_id);
          if (best) bests.emplace(q.getColumn(0).getString(), std::move(*best));
        }
        return bests;
      });
}

namespace {

Result<Record> RecordFromRow(SQLite::Statement& q) {
  Record r;
  r.id = q.getColumn(0).getInt64();
  auto status = StatusFromText(q.getColumn(4).getText());
  if (!status.ok()) return status.error().WithContext(fmt::format("record {}", r.id));
  r.status = *status;
  r.workload_key = q.getColumn(1).getString();
  r.target = q.getColumn(2).getString();
  r.plan = q.getColumn(3).getString();
  r.seconds = q.getColumn(5).isNull() ? 0 : q.getColumn(5).getDouble();
  r.metrics = q.getColumn(6).getString();
  r.error = q.getColumn(7).getString();
  r.job_id = q.getColumn(8).isNull() ? 0 : q.getColumn(8).getInt64();
  r.created_at = q.getColumn(9).getDouble();
  r.fusetune_version = q.getColumn(10).getString();
  r.kernel_versions = VersionsFromJson(q.getColumn(11).getString());
  return r;
}

constexpr const char* kRecordColumns =
    "SELECT r.id, w.key, t.fingerprint, r.plan, r.status, r.seconds, r.metrics, r.error, r.job_id, "
    "r.created_at, r.fusetune_version, r.kernel_versions FROM records r "
    "JOIN workloads w ON w.id = r.workload_id JOIN targets t ON t.id = r.target_id";

}  // namespace

Result<std::vector<Record>> SqliteDatabase::TopK(const std::string& workload_key,
                                                 const std::string& target, int k) {
  std::vector<Record> top;
  RecordFilter filter{workload_key, target, RecordStatus::kOk, std::nullopt, true};
  FT_RETURN_IF_ERROR(ForEachRecord(filter, [&](const Record& r) {
    top.push_back(r);
    return true;
  }));
  const auto faster = [](const Record& a, const Record& b) { return a.seconds < b.seconds; };
  const size_t keep = std::min(top.size(), static_cast<size_t>(std::max(k, 0)));
  std::partial_sort(top.begin(), top.begin() + keep, top.end(), faster);
  top.resize(keep);
  return top;
}

Status SqliteDatabase::ForEachRecord(const RecordFilter& f,
                                     const std::function<bool(const Record&)>& visit) {
  return Guarded("reading records", [&]() -> Status {
    std::string sql = kRecordColumns;
    std::vector<std::string> where;
    if (f.workload_key) where.push_back("w.key = :workload");
    if (f.target) where.push_back("t.fingerprint = :target");
    if (f.status) where.push_back("r.status = :status");
    if (f.job_id) where.push_back("r.job_id = :job");
    for (size_t i = 0; i < where.size(); ++i) sql += (i ? " AND " : " WHERE ") + where[i];
    sql += " ORDER BY r.id";
    SQLite::Statement q(*db_, sql);
    if (f.workload_key) q.bind(":workload", *f.workload_key);
    if (f.target) q.bind(":target", *f.target);
    if (f.status) q.bind(":status", StatusToText(*f.status));
    if (f.job_id) q.bind(":job", *f.job_id);
    while (q.executeStep()) {
      FT_ASSIGN_OR_RETURN(Record r, RecordFromRow(q));
      if (f.fresh_only && !IsFresh(r.kernel_versions)) continue;
      if (!visit(r)) break;
    }
    return Status::Ok();
  });
}

Error SqliteDatabase::NameDamagedFile(const Error& error) const {
  const std::string file = db_->getFilename();
  return Error(error.code(),
               fmt::format("tuning database '{}' is damaged: {} (`fusetune db check --db {}` "
                           "reports the damage)",
                           file, error.message(), file));
}

Result<std::vector<std::string>> SqliteDatabase::WorkloadKeys(std::optional<WorkloadKind> kind) {
  return Guarded("listing workloads", [&]() -> Result<std::vector<std::string>> {
    std::vector<std::string> keys;
    SQLite::Statement q(*db_, kind ? "SELECT key FROM workloads WHERE kind = ? ORDER BY id"
                                   : "SELECT key FROM workloads ORDER BY id");
    if (kind) q.bind(1, WorkloadKindName(*kind));
    while (q.executeStep()) keys.push_back(q.getColumn(0).getString());
    return keys;
  });
}

}  // namespace detail

Result<std::unique_ptr<Database>> MakeSqliteDatabase(const std::string& path,
                                                     const OpenOptions& options) {
  return detail::Guarded(
      "opening tuning database '" + path + "'", [&]() -> Result<std::unique_ptr<Database>> {
        int flags = options.read_only ? SQLite::OPEN_READONLY : SQLite::OPEN_READWRITE;
        if (options.create && !options.read_only) flags |= SQLite::OPEN_CREATE;
        auto db = std::make_unique<SQLite::Database>(path, flags, /*busy_timeout_ms=*/10000);
        db->exec("PRAGMA foreign_keys = ON");
        // Takes effect only when the file is created: 16 KiB pages halve the
        // page headers and cell pointers that records of about 1 KiB pay for.
        if (!options.read_only) db->exec("PRAGMA page_size = 16384");
        if (!options.read_only && path != ":memory:") db->exec("PRAGMA journal_mode = WAL");
        db->exec(options.sync_full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
        // 64 MiB of page cache: batched commits then touch each index page
        // once per batch instead of reading it back per record.
        db->exec("PRAGMA cache_size = -65536");
        // Checkpoint every 64 MiB of WAL rather than 16: index pages that
        // several batches touch are copied into the file once, not per batch.
        if (!options.read_only) db->exec("PRAGMA wal_autocheckpoint = 4096");
        // Readers (a compiler's lookups) map the file instead of copying each
        // 16 KiB page out of the OS cache: a cold lookup's p99 fell from
        // 34-123 us to 18-33 us here.
        if (options.read_only) db->exec("PRAGMA mmap_size = 2147418112");
        FT_ASSIGN_OR_RETURN(const int version, detail::PrepareSchema(*db, options.read_only));
        auto impl = std::make_unique<detail::SqliteDatabase>(std::move(db), options, version);
        if (options.integrity_check) FT_RETURN_IF_ERROR(impl->CheckIntegrity());
        if (!options.read_only) FT_RETURN_IF_ERROR(impl->SyncBestWithVersions());
        // A read-only handle is a compiler's, opened before its model is
        // imported: its lookups are prepared now, while SQLite's parser is
        // warm, not after an import has pushed that code out of the caches
        // (the first lookup of a compile took 0.25 ms then, 0.07 here).
        if (options.read_only) impl->PrepareLookups();
        return std::unique_ptr<Database>(std::move(impl));
      });
}

}  // namespace fusetune::db
