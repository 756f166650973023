#include "cluster/scaling.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "search/shard_plan.h"

namespace fusetune::cluster {

namespace {

using Json = nlohmann::json;

Result<int64_t> LatestJobWithRecords(db::Database& database) {
  FT_ASSIGN_OR_RETURN(auto jobs, database.ListJobs());
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
    bool any = false;
    db::RecordFilter f;
    f.job_id = it->id;
    FT_RETURN_IF_ERROR(database.ForEachRecord(f, [&](const db::Record&) { return !(any = true); }));
    if (any) return it->id;
  }
  return Error(ErrorCode::kNotFound, "the database has no tuning job with records");
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace

Result<SingleJobTimes> TimesOfJob(db::Database& database, int64_t job_id) {
  if (job_id == 0) {
    FT_ASSIGN_OR_RETURN(job_id, LatestJobWithRecords(database));
  }
  FT_ASSIGN_OR_RETURN(auto job, database.GetJob(job_id));
  if (!job) return Error(ErrorCode::kNotFound, fmt::format("no job {} in the database", job_id));
  FT_ASSIGN_OR_RETURN(auto graphs, database.WorkloadKeys(db::WorkloadKind::kGraph));
  const std::set<std::string> graph_keys(graphs.begin(), graphs.end());
  SingleJobTimes times;
  std::map<std::string, MeasuredTask> by_key;
  double last = job->created_at, first = 0;
  db::RecordFilter f;
  f.job_id = job_id;
  FT_RETURN_IF_ERROR(database.ForEachRecord(f, [&](const db::Record& r) {
    const double gap = std::max(0.0, r.created_at - last);
    last = std::max(last, r.created_at);
    if (first == 0) first = r.created_at;
    ++times.records;
    if (graph_keys.count(r.workload_key) > 0) {
      times.whole_model_seconds += gap;
      return true;
    }
    MeasuredTask& t = by_key[r.workload_key];
    t.key = r.workload_key;
    t.seconds += gap;
    ++t.trials;
    return true;
  }));
  if (times.records == 0) return Error(ErrorCode::kNotFound, fmt::format("job {} has no records", job_id));
  for (auto& [key, t] : by_key) times.tasks.push_back(std::move(t));
  times.wall_seconds = last - job->created_at;
  return times;
}

Result<ClusterCosts> CostsOfReport(const Json& report) {
  try {
    ClusterCosts c;
    std::vector<double> starts, merge_starts, gaps, per_record, retrain;
    double records_so_far = 0, previous_end = 0;
    for (const Json& w : report.at("waves")) {
      double first_start = 0, last_end = 0;
      for (const Json& s : w.at("shards")) {
        const double run = s.at("progress").value("seconds", 0.0);
        starts.push_back(s.at("ended_at").get<double>() - s.at("started_at").get<double>() - run);
        const double st = s.at("started_at").get<double>();
        first_start = first_start == 0 ? st : std::min(first_start, st);
        last_end = std::max(last_end, s.at("ended_at").get<double>());
      }
      if (previous_end > 0) gaps.push_back(first_start - previous_end);
      const Json& m = w.at("merge");
      const Json& p = m.at("progress");
      double added = 0;
      for (const Json& s : p.at("shards")) added += s.value("records_added", 0.0);
      records_so_far += added;
      const double merging = p.value("merge_seconds", 0.0);
      const double training = p.at("model").value("seconds", 0.0);
      if (added > 0) per_record.push_back(merging / added);
      if (records_so_far > 0) retrain.push_back(training / records_so_far);
      merge_starts.push_back(m.at("ended_at").get<double>() - m.at("started_at").get<double>() -
                             merging - training);
      gaps.push_back(m.at("started_at").get<double>() - last_end);
      previous_end = m.at("ended_at").get<double>();
    }
    const Json& f = report.at("finish");
    gaps.push_back(f.at("started_at").get<double>() - previous_end);
    c.shard_start_seconds = std::max(0.0, Mean(starts));
    c.merge_start_seconds = std::max(0.0, Mean(merge_starts));
    c.merge_seconds_per_record = Mean(per_record);
    c.retrain_seconds_per_record = Mean(retrain);
    c.step_gap_seconds = std::max(0.0, Mean(gaps));
    c.finish_start_seconds = c.shard_start_seconds;  // it loads the models as a shard does
    return c;
  } catch (const Json::exception& e) {
    return Error(ErrorCode::kCorrupt, fmt::format("not a cluster job's report: {}", e.what()));
  }
}

std::vector<ScalingPoint> PredictScaling(const SingleJobTimes& job, const ClusterCosts& costs,
                                         int waves, const std::vector<int>& nodes) {
  std::vector<std::string> keys, units;
  std::vector<double> load;
  double records = 0;
  for (const MeasuredTask& t : job.tasks) {
    keys.push_back(t.key);
    units.push_back(t.unit);
    load.push_back(t.seconds / waves);
    records += static_cast<double>(t.trials);
  }
  std::vector<ScalingPoint> points;
  for (int n : nodes) {
    const search::LoadBalance b = search::BalanceUnits(keys, units, load, n);
    const double slowest = *std::max_element(b.load.begin(), b.load.end());
    ScalingPoint p;
    p.nodes = n;
    p.measuring_seconds = waves * slowest;
    for (int w = 1; w <= waves; ++w) {
      const double so_far = records * w / waves;
      p.overhead_seconds += costs.shard_start_seconds + 2 * costs.step_gap_seconds +
                            costs.merge_start_seconds +
                            costs.merge_seconds_per_record * records / waves +
                            costs.retrain_seconds_per_record * so_far;
    }
    p.overhead_seconds += costs.step_gap_seconds + costs.finish_start_seconds;
    p.wall_seconds = p.measuring_seconds + p.overhead_seconds + job.whole_model_seconds;
    points.push_back(p);
  }
  for (ScalingPoint& p : points) {
    p.speedup = points.front().nodes == 1 ? points.front().wall_seconds / p.wall_seconds : 0;
    p.efficiency = p.speedup / p.nodes;
  }
  return points;
}

}  // namespace fusetune::cluster
