#include "search/job_target.h"

#include "measure/calibrate.h"
#include "target/calibration.h"

namespace fusetune::search {

Result<JobTarget> EnsureTarget(db::Database& database, int threads, target::CacheProtocol caches,
                               const std::function<void()>& calibrating) {
  const std::string key = target::ThisMachineKey(caches);
  FT_ASSIGN_OR_RETURN(auto stored, database.GetTarget(key));
  if (!stored.has_value() || stored->calibration == "{}") {
    FT_ASSIGN_OR_RETURN(stored, database.GetTarget(target::FlushedKeyOf(key)));
  }
  nlohmann::json c;
  if (stored.has_value() && stored->calibration != "{}") {
    c = nlohmann::json::parse(stored->calibration, nullptr, false);
  } else {
    if (calibrating) calibrating();
    c = target::CalibrationToJson(measure::Calibrate(threads));
  }
  if (!stored.has_value() || stored->fingerprint != key || stored->calibration == "{}") {
    nlohmann::json description = c["target"];
    description["caches"] = target::CacheProtocolName(caches);
    FT_RETURN_IF_ERROR(database.PutTarget({key, description.dump(), c.dump()}));
  }
  return JobTarget{key, std::move(c)};
}

}  // namespace fusetune::search
