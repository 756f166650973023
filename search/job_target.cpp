#include "search/job_target.h"

#include "measure/calibrate.h"
#include "target/calibration.h"

namespace fusetune::search {

namespace {

// The calibration stored under `key`, else under the flushed key both
// protocols share; "" when neither has one.
Result<std::string> StoredCalibration(db::TargetStore& database, const std::string& key) {
  for (const std::string& k : {key, target::FlushedKeyOf(key)}) {
    FT_ASSIGN_OR_RETURN(auto stored, database.GetTarget(k));
    if (stored.has_value() && stored->calibration != "{}") return stored->calibration;
  }
  return std::string();
}

}  // namespace

Result<JobTarget> EnsureTarget(db::TargetStore& database, int threads, target::CacheProtocol caches,
                               const target::PrecisionPolicy& precision,
                               const std::function<void()>& calibrating) {
  const std::string key = target::ThisMachineKey(caches, precision);
  FT_ASSIGN_OR_RETURN(auto own, database.GetTarget(key));
  const bool own_calibrated = own.has_value() && own->calibration != "{}";
  FT_ASSIGN_OR_RETURN(const std::string stored, StoredCalibration(database, key));
  nlohmann::json c;
  if (!stored.empty()) {
    c = nlohmann::json::parse(stored, nullptr, false);
    if (!c.is_object() || !c.contains("target"))
      return Error(ErrorCode::kCorrupt,
                   "the calibration stored for target " + key +
                       " is not a calibration record (`fusetune calibrate --db` stores it anew)");
  } else {
    if (calibrating) calibrating();
    c = target::CalibrationToJson(measure::Calibrate(threads));
  }
  if (!own_calibrated) {
    nlohmann::json description = c["target"];
    description["caches"] = target::CacheProtocolName(caches);
    if (precision.mixed) description["precision"] = precision.ToString();
    FT_RETURN_IF_ERROR(database.PutTarget({key, description.dump(), c.dump()}));
  }
  return JobTarget{key, std::move(c)};
}

}  // namespace fusetune::search
