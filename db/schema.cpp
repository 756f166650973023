#include "db/schema.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "db/database.h"

namespace fusetune::db::detail {

namespace {

// The version-2 schema; an empty file gets it and kCompiledPlansSchema
// (below), the current schema. An older file reaches the same
// tables and indexes through kMigrations (a v1 file also keeps its original
// unique index on the digest alone, which SQLite cannot drop in place).
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE targets(
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE,
  description TEXT NOT NULL DEFAULT '{}',
  calibration TEXT NOT NULL DEFAULT '{}',
  created_at REAL NOT NULL);
CREATE TABLE workloads(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL CHECK(kind IN ('group', 'graph')),
  description TEXT NOT NULL DEFAULT '{}',
  created_at REAL NOT NULL);
CREATE TABLE jobs(
  id INTEGER PRIMARY KEY,
  spec TEXT NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('running', 'interrupted', 'done', 'failed')),
  progress TEXT NOT NULL DEFAULT '{}',
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL);
CREATE TABLE records(
  id INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  target_id INTEGER NOT NULL REFERENCES targets(id),
  plan TEXT NOT NULL,
  status TEXT NOT NULL CHECK(status IN ('ok', 'failed', 'timeout', 'wrong')),
  seconds REAL,
  metrics TEXT NOT NULL DEFAULT '{}',
  error TEXT NOT NULL DEFAULT '',
  job_id INTEGER REFERENCES jobs(id),
  created_at REAL NOT NULL,
  fusetune_version TEXT NOT NULL,
  kernel_versions TEXT NOT NULL,
  digest INTEGER NOT NULL);
CREATE INDEX records_by_workload ON records(workload_id, target_id, status, seconds);
CREATE INDEX records_by_job ON records(job_id) WHERE job_id IS NOT NULL;
-- Keyed by workload first: a batch of the tuner's records touches a few index
-- pages per workload instead of random pages across the whole file.
CREATE UNIQUE INDEX records_by_digest ON records(workload_id, digest);
CREATE TABLE best(
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  target_id INTEGER NOT NULL REFERENCES targets(id),
  record_id INTEGER NOT NULL REFERENCES records(id),
  seconds REAL NOT NULL,
  PRIMARY KEY(workload_id, target_id)) WITHOUT ROWID;
CREATE TABLE cost_models(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  target TEXT NOT NULL DEFAULT '',
  feature_version INTEGER NOT NULL,
  metrics TEXT NOT NULL DEFAULT '{}',
  model BLOB NOT NULL,
  active INTEGER NOT NULL DEFAULT 0,
  created_at REAL NOT NULL);
CREATE TABLE meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL);
)sql";

// Version 3, in a new file and as the v2 -> v3 step: remembered compiles.
// `generation` counts the changes that can change what a compile chooses
// (records, best plans, cost models, targets and their calibrations). A
// compiled plan is remembered with the generation its compile read, and is
// used only while the generation has not moved. Record commits and best-plan
// recomputations raise it once per transaction in code (a trigger per record
// halved the commit rate: 126,000 -> 53,000 records/s); triggers raise it for
// the rarer changes, whoever makes them (a record edited or deleted by hand).
constexpr const char* kCompiledPlansSchema = R"sql(
CREATE TABLE generation(
  id INTEGER PRIMARY KEY CHECK(id = 1),
  value INTEGER NOT NULL);
INSERT INTO generation VALUES(1, 0);
CREATE TRIGGER generation_records_update AFTER UPDATE ON records
  BEGIN UPDATE generation SET value = value + 1; END;
CREATE TRIGGER generation_records_delete AFTER DELETE ON records
  BEGIN UPDATE generation SET value = value + 1; END;
CREATE TRIGGER generation_models_insert AFTER INSERT ON cost_models
  BEGIN UPDATE generation SET value = value + 1; END;
CREATE TRIGGER generation_models_update AFTER UPDATE ON cost_models
  BEGIN UPDATE generation SET value = value + 1; END;
CREATE TRIGGER generation_models_delete AFTER DELETE ON cost_models
  BEGIN UPDATE generation SET value = value + 1; END;
CREATE TRIGGER generation_targets_insert AFTER INSERT ON targets
  BEGIN UPDATE generation SET value = value + 1; END;
CREATE TRIGGER generation_targets_update AFTER UPDATE ON targets
  BEGIN UPDATE generation SET value = value + 1; END;
CREATE TRIGGER generation_targets_delete AFTER DELETE ON targets
  BEGIN UPDATE generation SET value = value + 1; END;
CREATE TABLE compiled_plans(
  graph_key TEXT NOT NULL,
  target TEXT NOT NULL,
  context TEXT NOT NULL,
  generation INTEGER NOT NULL,
  plan TEXT NOT NULL,
  decisions TEXT NOT NULL,
  created_at REAL NOT NULL,
  PRIMARY KEY(graph_key, target, context)) WITHOUT ROWID;
)sql";

// Version 2: records are deduplicated per workload (see kSchemaV2).
constexpr const char* kMigrateV1ToV2 = R"sql(
CREATE UNIQUE INDEX records_by_digest ON records(workload_id, digest);
)sql";

// kMigrations[v - 1] takes a version-v file to version v + 1. Steps never change.
constexpr const char* kMigrations[] = {kMigrateV1ToV2, kCompiledPlansSchema};
static_assert(std::size(kMigrations) == kSchemaVersion - 1);

int PragmaInt(SQLite::Database& db, const char* pragma) {
  return db.execAndGet(fmt::format("PRAGMA {}", pragma)).getInt();
}

}  // namespace

Result<int> PrepareSchema(SQLite::Database& db, bool read_only) {
  const int app = PragmaInt(db, "application_id");
  const int version = PragmaInt(db, "user_version");
  const bool empty = db.execAndGet("SELECT count(*) FROM sqlite_master").getInt() == 0;
  if (app != kApplicationId && !(app == 0 && empty))
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("'{}' is an SQLite file of another application, not a fusetune "
                             "tuning database",
                             db.getFilename()));
  if (version > kSchemaVersion)
    return Error(ErrorCode::kUnsupported,
                 fmt::format("'{}' was written by a newer fusetune (schema version {}; this build "
                             "reads up to version {}): upgrade fusetune to use it",
                             db.getFilename(), version, kSchemaVersion));
  if (version == kSchemaVersion) return version;
  // Version 3 only added remembered compiles: a reader does without them.
  if (read_only && version >= kOldestReadableVersion) return version;
  if (read_only)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("'{}' has schema version {} and needs migrating to {}: open it "
                             "writable once",
                             db.getFilename(), version, kSchemaVersion));
  // Another process may have migrated while this one waited for the lock.
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  const bool fresh = db.execAndGet("SELECT count(*) FROM sqlite_master").getInt() == 0;
  if (fresh) {
    db.exec(kSchemaV2);
    db.exec(kCompiledPlansSchema);
  } else if (PragmaInt(db, "user_version") == 0)
    return Error(ErrorCode::kCorrupt,
                 fmt::format("'{}' has fusetune tables but no schema version", db.getFilename()));
  else
    for (int v = PragmaInt(db, "user_version"); v < kSchemaVersion; ++v)
      db.exec(kMigrations[v - 1]);
  db.exec(fmt::format("PRAGMA application_id = {}", kApplicationId));
  db.exec(fmt::format("PRAGMA user_version = {}", kSchemaVersion));
  transaction.commit();
  return kSchemaVersion;
}

}  // namespace fusetune::db::detail
