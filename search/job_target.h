// This machine's target row in the tuning database, which a tuning job (and
// `fusetune collect`) measures under: the target key for a cache protocol and
// the machine's calibration, measured once per database and stored.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "db/database.h"
#include "target/calibration.h"
#include "target/target.h"

namespace fusetune::search {

struct JobTarget {
  std::string key;             // target::TargetKey of this machine and the protocol
  nlohmann::json calibration;  // target::CalibrationToJson
};

// Reads this machine's calibration from the database (under the protocol's
// key, else the flushed key both protocols share), or calibrates with
// `threads` and stores it when the database has none; stores the target row
// under the protocol's key when it is missing. `calibrating` is called before
// a calibration, which takes a few seconds.
Result<JobTarget> EnsureTarget(db::TargetStore& database, int threads, target::CacheProtocol caches,
                               const target::PrecisionPolicy& precision,
                               const std::function<void()>& calibrating = {});

}  // namespace fusetune::search
