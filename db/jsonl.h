// Moving tuning records between databases: JSON Lines export and import, and
// merging a database into another (tuned on several machines). Written
// against the Database interface, so it works for any implementation.
//
// Each line is one object with a "type": "target" (fingerprint, description,
// calibration), "workload" (key, kind, description) or "record" (every
// Record field but the id and job). Targets and workloads come before the
// records that name them. Identical records are stored once, so importing
// the same file twice adds nothing.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "db/database.h"

namespace fusetune::db {

struct TransferSummary {
  int64_t targets = 0, workloads = 0;
  int64_t records_read = 0;
  int64_t records_added = 0;  // the rest were already there
};

Result<TransferSummary> ExportJsonl(Database& db, std::ostream& out);
// `origin` names the input in errors ("records.jsonl:12: ...").
Result<TransferSummary> ImportJsonl(Database& db, std::istream& in, const std::string& origin);
// Copies every target, workload and record of `from` into `into`, then
// recomputes the best plans of `into`.
Result<TransferSummary> MergeDatabase(Database& into, Database& from);

}  // namespace fusetune::db
