// The tuning database's statistics and best plans as JSON: what `fusetune db
// stats --json` and `db best --json` print, and what the Python module's
// Database.stats() and best_plans() return (python/).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "db/database.h"

namespace fusetune::cli {

// The counts of `stats` for the database at `path`, seen from `target`.
nlohmann::json DbStatsJson(const std::string& path, const std::string& target,
                           const db::DbStats& stats);

// With an empty `workload`: an array of every workload's fresh best plan on
// `target` (workload, record, seconds, plan), those without one left out;
// else that workload's plan as one object, or an error when it has none.
Result<nlohmann::json> BestPlansJson(db::Database& database, const std::string& target,
                                     const std::string& workload);

}  // namespace fusetune::cli
