// The SQLite Database's generation counter and remembered compiles
// (database.h): commits of records and best plans raise the counter here
// (RaiseGeneration), the schema's triggers raise it for the rarer changes
// (schema.cpp), and an entry is stored only while it holds.
#include <fmt/format.h>

#include "db/sqlite_impl.h"

namespace fusetune::db::detail {

namespace {

Error NoCompiledPlans(const std::string& file, int version) {
  return Error(ErrorCode::kUnsupported,
               fmt::format("'{}' has schema version {}, which has no generation counter: open it "
                           "writable once to migrate it",
                           file, version));
}

// The columns after graph_key, target and context, in CompiledPlanQuery's order.
void ReadEntry(SQLite::Statement& q, int first, CompiledPlanEntry* e) {
  e->generation = q.getColumn(first).getInt64();
  e->plan = q.getColumn(first + 1).getString();
  e->decisions = q.getColumn(first + 2).getString();
  e->created_at = q.getColumn(first + 3).getDouble();
}

}  // namespace

Result<int64_t> SqliteDatabase::Generation() {
  if (!HasCompiledPlans()) return NoCompiledPlans(db_->getFilename(), schema_version_);
  return Guarded("reading the database generation", [&]() -> Result<int64_t> {
    return db_->execAndGet("SELECT value FROM generation").getInt64();
  });
}

void SqliteDatabase::RaiseGeneration() {
  // A migration's handle may hold an older file only read-only, which never writes.
  if (HasCompiledPlans()) db_->exec("UPDATE generation SET value = value + 1");
}

SQLite::Statement& SqliteDatabase::CompiledPlanQuery() {
  return Prepared(compiled_plan_query_,
                  "SELECT generation, plan, decisions, created_at FROM compiled_plans "
                  "WHERE graph_key = ? AND target = ? AND context = ? "
                  "AND generation = (SELECT value FROM generation)");
}

Result<std::vector<CompiledPlanEntry>> SqliteDatabase::CompiledPlans(const std::string& target) {
  if (!HasCompiledPlans()) return std::vector<CompiledPlanEntry>();
  return Guarded("reading remembered plans", [&]() -> Result<std::vector<CompiledPlanEntry>> {
    SQLite::Statement q(*db_,
                        "SELECT graph_key, context, generation, plan, decisions, created_at "
                        "FROM compiled_plans WHERE target = ? "
                        "AND generation = (SELECT value FROM generation)");
    q.bindNoCopy(1, target);
    std::vector<CompiledPlanEntry> out;
    while (q.executeStep()) {
      CompiledPlanEntry& e = out.emplace_back();
      e.graph_key = q.getColumn(0).getString();
      e.target = target;
      e.context = q.getColumn(1).getString();
      ReadEntry(q, 2, &e);
    }
    return out;
  });
}

Result<std::optional<CompiledPlanEntry>> SqliteDatabase::FindCompiledPlan(
    const std::string& graph_key, const std::string& target, const std::string& context) {
  if (!HasCompiledPlans()) return std::optional<CompiledPlanEntry>();
  return Guarded("looking up a remembered plan", [&]() -> Result<std::optional<CompiledPlanEntry>> {
    SQLite::Statement& q = CompiledPlanQuery();
    q.reset();
    q.bindNoCopy(1, graph_key);
    q.bindNoCopy(2, target);
    q.bindNoCopy(3, context);
    if (!q.executeStep()) return std::optional<CompiledPlanEntry>();
    CompiledPlanEntry e;
    e.graph_key = graph_key;
    e.target = target;
    e.context = context;
    ReadEntry(q, 0, &e);
    q.reset();
    return std::optional<CompiledPlanEntry>(std::move(e));
  });
}

Result<bool> SqliteDatabase::PutCompiledPlan(const CompiledPlanEntry& entry) {
  if (!HasCompiledPlans()) return NoCompiledPlans(db_->getFilename(), schema_version_);
  return Guarded("remembering a compiled plan", [&]() -> Result<bool> {
    // IMMEDIATE: no commit can slip between reading the generation and the insert.
    SQLite::Transaction transaction(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    const int64_t current = db_->execAndGet("SELECT value FROM generation").getInt64();
    if (current != entry.generation) return false;
    SQLite::Statement drop(*db_, "DELETE FROM compiled_plans WHERE generation < ?");
    drop.bind(1, current);
    drop.exec();
    SQLite::Statement put(*db_,
                          "INSERT OR REPLACE INTO compiled_plans(graph_key, target, context, "
                          "generation, plan, decisions, created_at) VALUES(?, ?, ?, ?, ?, ?, ?)");
    put.bindNoCopy(1, entry.graph_key);
    put.bindNoCopy(2, entry.target);
    put.bindNoCopy(3, entry.context);
    put.bind(4, entry.generation);
    put.bindNoCopy(5, entry.plan);
    put.bindNoCopy(6, entry.decisions);
    put.bind(7, entry.created_at > 0 ? entry.created_at : NowSeconds());
    put.exec();
    transaction.commit();
    return true;
  });
}

}  // namespace fusetune::db::detail
