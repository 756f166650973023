// Measuring sampled tilings of tuning tasks: what collects a training set for
// the cost model (and what random search is). Search never writes the
// database: each task's records go to `sink`, which the caller commits.
#pragma once

#include <functional>
#include <vector>

#include "search/tasks.h"

namespace fusetune::search {

struct SampleOptions {
  int per_task = 64;  // tilings per task; the whole space when it is smaller
  uint64_t seed = 1;  // root seed, forked per task by its index
  measure::MeasureOptions measure;
};

// Up to `count` distinct legal tilings of `space`, drawn uniformly.
std::vector<fusion_space::Tiling> SampleTilings(const fusion_space::TilingSpace& space, int count,
                                                Rng& rng);

using RecordSink = std::function<Status(std::vector<db::Record>& records)>;
// (candidates measured, candidates in all, the task just measured).
using SampleProgress = std::function<void(int64_t, int64_t, const Task&)>;

// Measures each task's sampled tilings in `measurer` and hands its records to
// `sink` task by task. Stops at the first sink error. `should_stop` is polled
// between tasks (Ctrl-C).
Status SampleTasks(const std::vector<Task>& tasks, measure::Measurer& measurer,
                   const SampleOptions& options, const std::string& target, const RecordSink& sink,
                   const SampleProgress& progress = {},
                   const std::function<bool()>& should_stop = {});

}  // namespace fusetune::search
