#include "cli/db_json.h"

#include <fmt/format.h>

namespace fusetune::cli {

nlohmann::json DbStatsJson(const std::string& path, const std::string& target,
                           const db::DbStats& s) {
  return {{"db", path},
          {"schema_version", s.schema_version},
          {"file_bytes", s.file_bytes},
          {"this_target", target},
          {"targets", s.targets},
          {"group_workloads", s.group_workloads},
          {"graph_workloads", s.graph_workloads},
          {"records", s.records},
          {"records_by_status", s.records_by_status},
          {"best_entries", s.best_entries},
          {"stale", s.stale},
          {"jobs", s.jobs},
          {"cost_models", s.models},
          {"generation", s.generation},
          {"compiled_plans", s.compiled_plans},
          {"compiled_plans_current", s.compiled_plans_current}};
}

Result<nlohmann::json> BestPlansJson(db::Database& database, const std::string& target,
                                     const std::string& workload) {
  std::vector<std::string> keys{workload};
  if (workload.empty()) {
    FT_ASSIGN_OR_RETURN(keys, database.WorkloadKeys());
  }
  nlohmann::json j = nlohmann::json::array();
  for (const std::string& key : keys) {
    FT_ASSIGN_OR_RETURN(std::optional<db::BestPlan> best, database.Best(key, target));
    if (!best.has_value()) {
      if (!workload.empty())
        return Error(ErrorCode::kNotFound,
                     fmt::format("no fresh best plan for workload {} on target {}", key, target));
      continue;
    }
    j.push_back({{"workload", key},
                 {"record", best->record_id},
                 {"seconds", best->seconds},
                 {"plan", nlohmann::json::parse(best->plan, nullptr, false)}});
  }
  return workload.empty() ? j : j[0];
}

}  // namespace fusetune::cli
