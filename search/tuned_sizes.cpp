#include "search/tuned_sizes.h"

#include <nlohmann/json.hpp>

#include <set>

namespace fusetune::search {

Result<std::map<std::string, std::vector<int64_t>>> TunedSizes(db::JobStore& jobs,
                                                               const std::string& model_key) {
  FT_ASSIGN_OR_RETURN(std::vector<db::JobEntry> entries, jobs.ListJobs());
  std::map<std::string, std::set<int64_t>> values;
  for (const db::JobEntry& job : entries) {
    if (job.state == "failed") continue;
    const auto spec = nlohmann::json::parse(job.spec, nullptr, false);
    if (!spec.is_object() || spec.value(kSpecModelKey, std::string()) != model_key) continue;
    const auto dims = spec.find(kSpecDims);
    if (dims == spec.end() || !dims->is_object()) continue;
    for (const auto& [name, value] : dims->items())
      if (value.is_number_integer() && value.get<int64_t>() >= 0)
        values[name].insert(value.get<int64_t>());
  }
  std::map<std::string, std::vector<int64_t>> sizes;
  for (const auto& [name, set] : values) sizes[name].assign(set.begin(), set.end());
  return sizes;
}

}  // namespace fusetune::search
