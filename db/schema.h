// The tuning database's schema and its migrations; private to db/. The
// schema text lives in schema.cpp and docs/DATABASE.md describes it.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace SQLite {
class Database;
}

namespace fusetune::db::detail {

// PRAGMA application_id of a fusetune database ("FTDB").
inline constexpr int32_t kApplicationId = 0x46544442;

// Brings the file to kSchemaVersion: creates the schema in an empty file,
// migrates an older one step by step in one transaction. Errors: a file of
// another application, a schema newer than this build reads, or (read-only)
// a file older than kOldestReadableVersion. Returns the file's version then
// (older than kSchemaVersion only for a read-only handle).
Result<int> PrepareSchema(SQLite::Database& db, bool read_only);

// A read-only handle reads files from this version on as they are (what a
// later version added, such as remembered compiles, it does without).
inline constexpr int kOldestReadableVersion = 2;

}  // namespace fusetune::db::detail
