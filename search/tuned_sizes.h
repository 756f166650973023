// The sizes a model with symbolic dimensions was tuned at, as its tuning
// jobs recorded them.
//
// `tune --dim seq=16..256` runs one job per size, each on a graph of its own
// (its own graph key). Each job's spec also records the model file's key
// (graph/model_file.h) and the values it bound, so that `compile` of the same
// file without `--dim` can serve every size the database was tuned at, as
// the check runs it:
//
//   fusetune tune decoder.onnx --dim seq=1,16,64,256 --db llm.db
//   fusetune compile decoder.onnx --db llm.db --explain
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "db/database.h"

namespace fusetune::search {

// The spec fields a tuning job writes (tuning_job.cpp) and TunedSizes reads.
inline constexpr const char* kSpecModelKey = "model_key";
inline constexpr const char* kSpecDims = "dims";

// Each dimension's values over the jobs that recorded `model_key` and did
// not fail (done, interrupted or still running: their records count), in
// ascending order; `compile` takes every combination of them, and one that
// no job tuned compiles from the records of its nearest. Jobs of `fusetune
// tune` and of the library's Tune record their sizes; a cluster's shards
// do not yet. Empty: no job of the model recorded its sizes. Jobs whose
// spec does not parse are skipped (a database written by an older version).
Result<std::map<std::string, std::vector<int64_t>>> TunedSizes(db::JobStore& jobs,
                                                               const std::string& model_key);

}  // namespace fusetune::search
