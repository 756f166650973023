#include "search/sampling.h"

#include <set>

namespace fusetune::search {

std::vector<fusion_space::Tiling> SampleTilings(const fusion_space::TilingSpace& space, int count,
                                                Rng& rng) {
  const std::vector<fusion_space::Tiling>& all = space.Enumerate();
  if (static_cast<int64_t>(all.size()) <= count) return all;
  std::set<size_t> picked;
  while (static_cast<int>(picked.size()) < count) picked.insert(rng.Below(all.size()));
  std::vector<fusion_space::Tiling> out;
  for (size_t i : picked) out.push_back(all[i]);
  return out;
}

Status SampleTasks(const std::vector<Task>& tasks, measure::Measurer& measurer,
                   const SampleOptions& options, const std::string& target, const RecordSink& sink,
                   const SampleProgress& progress, const std::function<bool()>& should_stop) {
  std::vector<std::vector<fusion_space::Tiling>> tilings(tasks.size());
  int64_t total = 0, done = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    Rng rng(ForkSeed(options.seed, t));
    tilings[t] = SampleTilings(tasks[t].tilings(), options.per_task, rng);
    total += static_cast<int64_t>(tilings[t].size());
  }
  for (size_t t = 0; t < tasks.size(); ++t) {
    if (should_stop && should_stop()) break;
    const Task& task = tasks[t];
    std::vector<measure::Candidate> candidates;
    for (const fusion_space::Tiling& tiling : tilings[t]) {
      auto c = measure::GroupCandidate(task.graph, *task.space, tiling, task.summary);
      if (c.ok()) candidates.push_back(std::move(*c));
    }
    const auto results = measurer.MeasureBatch(candidates, options.measure, {});
    std::vector<db::Record> records;
    for (size_t i = 0; i < results.size(); ++i)
      records.push_back(MakeRecord(task, candidates[i], results[i], target, 0));
    FT_RETURN_IF_ERROR(sink(records));
    done += static_cast<int64_t>(tilings[t].size());
    if (progress) progress(done, total, task);
  }
  return Status::Ok();
}

}  // namespace fusetune::search
