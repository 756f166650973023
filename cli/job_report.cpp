#include "cli/job_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "cli/roofline_plot.h"
#include "cli/svg_plot.h"
#include "cli/tune_summary.h"
#include "cost_model/cost_model.h"
#include "cost_model/dataset.h"

namespace fusetune::cli {

namespace {

Result<db::JobEntry> PickJob(db::JobStore& database, int64_t id) {
  if (id > 0) {
    FT_ASSIGN_OR_RETURN(auto job, database.GetJob(id));
    if (!job.has_value()) return Error(ErrorCode::kNotFound, fmt::format("no job {}", id));
    return *job;
  }
  FT_ASSIGN_OR_RETURN(auto jobs, database.ListJobs());
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it)
    if (nlohmann::json::parse(it->progress, nullptr, false).contains("summary")) return *it;
  return Error(ErrorCode::kNotFound, "no tuning job in this database (run fusetune tune)");
}

// A curve over trials and the same curve over the seconds since the job began.
struct TimedSeries {
  PlotSeries by_trial, by_time;
  void Add(double trial, double elapsed, double y) {
    by_trial.points.push_back({trial, y});
    by_time.points.push_back({elapsed, y});
  }
};

struct Curves {
  std::map<std::string, TimedSeries> tasks;  // best so far, by trial of the task
  TimedSeries model, unfused;
  std::map<std::string, PlotSeries> predicted;  // by model
  double elapsed = 0;                           // of the job's last record
};

Result<Curves> ReadCurves(db::Database& database, const db::JobEntry& job,
                          const std::string& graph_key, const std::set<std::string>& shown_tasks) {
  Curves c;
  std::map<std::string, double> best;
  std::map<std::string, int64_t> trials;
  int64_t job_trials = 0;
  double best_plan = 0;
  db::RecordFilter filter;
  filter.job_id = job.id;
  FT_RETURN_IF_ERROR(database.ForEachRecord(filter, [&](const db::Record& r) {
    const double t = std::max(0.0, r.created_at - job.created_at);
    c.elapsed = std::max(c.elapsed, t);
    const auto m = measure::MetricsFromText(r.metrics);
    const std::optional<measure::SearchNote> note = m.ok() ? m->search : std::nullopt;
    const bool ok = r.status == db::RecordStatus::kOk;
    if (r.workload_key == graph_key) {
      if (!ok) return true;
      if (note && note->plan_kind == measure::PlanKind::kUnfused)
        c.unfused.Add(double(job_trials), t, r.seconds * 1e3);
      best_plan = best_plan == 0 ? r.seconds : std::min(best_plan, r.seconds);
      c.model.Add(double(job_trials), t, best_plan * 1e3);
      return true;
    }
    ++job_trials;
    const int64_t n = ++trials[r.workload_key];
    if (!ok) return true;
    auto& b = best[r.workload_key];
    b = b == 0 ? r.seconds : std::min(b, r.seconds);
    if (shown_tasks.count(r.workload_key)) c.tasks[r.workload_key].Add(double(n), t, b * 1e3);
    if (note) {
      const double p = note->predicted_seconds;
      const std::string& model = note->model;
      // Predictions the model pulled in from beyond its training data's
      // range are a series of their own: there it does not know. Measured
      // as the model learns it (its label: the scaled fastest repeat).
      const double label = cost_model::DefaultLabelSeconds(r.seconds, m->measured.time);
      if (p > 0 && cost_model::PredictsSeconds(model))
        c.predicted[note->out_of_range ? model + " (beyond range)" : model].points.push_back(
            {p * 1e3, label * 1e3});
    }
    return true;
  }));
  if (!c.unfused.by_trial.points.empty())
    c.unfused.Add(double(job_trials), c.elapsed, c.unfused.by_trial.points[0].second);
  if (!c.model.by_trial.points.empty()) c.model.Add(double(job_trials), c.elapsed, best_plan * 1e3);
  return c;
}

// Two panels over one legend: the best so far against trials, then against
// time, held to the end of the job; y on a log axis when it spans more than
// a factor of ten.
std::string CurvesSvg(const std::string& title, const std::string& trials,
                      const std::string& y_label, double job_seconds,
                      const std::vector<TimedSeries>& curves) {
  double lo = 0, hi = 0;
  for (const TimedSeries& s : curves)
    for (auto [x, y] : s.by_trial.points)
      if (y > 0) lo = lo == 0 ? y : std::min(lo, y), hi = std::max(hi, y);
  const bool log_y = hi > 10 * lo;
  PlotPanel by_trial{{"against trials", trials, y_label, false, log_y, false, true}, {}};
  PlotPanel by_time{
      {"against time", "time since the job started (s)", y_label, false, log_y, false, true}, {}};
  for (TimedSeries s : curves) {
    s.by_trial.steps = s.by_time.steps = true;
    if (!s.by_time.points.empty() && s.by_time.points.back().first < job_seconds)
      s.by_time.points.push_back({job_seconds, s.by_time.points.back().second});
    by_trial.series.push_back(std::move(s.by_trial));
    by_time.series.push_back(std::move(s.by_time));
  }
  return SvgFigure(title, {by_trial, by_time});
}

// The heaviest tasks the job measured more than once (at most 8), named.
std::vector<const search::TaskReport*> ShownTasks(const search::TuneSummary& summary) {
  std::vector<const search::TaskReport*> tasks;
  for (const auto& t : summary.tasks)
    if (t.best_seconds && t.measured > 1) tasks.push_back(&t);
  std::stable_sort(tasks.begin(), tasks.end(), [](auto* a, auto* b) {
    return a->occurrences * *a->best_seconds > b->occurrences * *b->best_seconds;
  });
  if (tasks.size() > 8) tasks.resize(8);
  return tasks;
}

}  // namespace

Result<JobReport> ReadJobReport(db::Database& database, int64_t id) {
  FT_ASSIGN_OR_RETURN(db::JobEntry job, PickJob(database, id));
  const auto progress = nlohmann::json::parse(job.progress, nullptr, false);
  if (!progress.is_object() || !progress.contains("summary"))
    return Error(ErrorCode::kNotFound, fmt::format("job {} has no summary yet", job.id));
  FT_ASSIGN_OR_RETURN(search::TuneSummary summary, search::SummaryFromJson(progress["summary"]));
  return JobReport{std::move(job), std::move(summary)};
}

std::string FormatJobReport(const JobReport& report) {
  return fmt::format("job {} ({}): {}\n{}", report.job.id, report.job.state, report.job.spec,
                     FormatTuneSummary(report.summary));
}

nlohmann::json JobReportJson(const JobReport& report) {
  nlohmann::json j = search::SummaryToJson(report.summary);
  j["job"] = report.job.id;
  j["state"] = report.job.state;
  j["spec"] = nlohmann::json::parse(report.job.spec, nullptr, false);
  return j;
}

Result<std::vector<ReportPlot>> ReportPlots(db::Database& database, const JobReport& report) {
  const auto spec = nlohmann::json::parse(report.job.spec, nullptr, false);
  const std::string graph_key = spec.value("graph_key", "");
  const std::vector<const search::TaskReport*> tasks = ShownTasks(report.summary);
  std::set<std::string> shown;
  for (auto* t : tasks) shown.insert(t->key);
  FT_ASSIGN_OR_RETURN(Curves c, ReadCurves(database, report.job, graph_key, shown));
  std::vector<TimedSeries> task_series;
  for (auto* t : tasks) {
    task_series.push_back(c.tasks[t->key]);
    task_series.back().by_trial.name = task_series.back().by_time.name =
        fmt::format("{}x {}", t->occurrences, t->summary);
  }
  std::vector<ReportPlot> plots;
  plots.push_back({"tuning_curves.svg",
                   CurvesSvg("Best time found per task (heaviest tasks)", "trials of the task",
                             "best time (ms)", c.elapsed, task_series)});
  c.model.by_trial.name = c.model.by_time.name = "best whole plan";
  c.unfused.by_trial.name = c.unfused.by_time.name = "unfused";
  plots.push_back({"whole_model.svg",
                   CurvesSvg("Whole model: best measured plan over the job", "group trials so far",
                             "latency (ms)", c.elapsed, {c.model, c.unfused})});
  std::vector<PlotSeries> scatter;
  for (auto& [model, s] : c.predicted) {
    s.name = model;
    s.line = false;
    scatter.push_back(s);
  }
  plots.push_back(
      {"predicted_vs_measured.svg", SvgPlot({"Predicted against measured time (group candidates)",
                                             "predicted (ms)", "measured (ms)", true, true, true},
                                            scatter)});
  FT_ASSIGN_OR_RETURN(std::string roofline, RooflinePlotSvg(database, report.job, report.summary));
  plots.push_back({"roofline.svg", std::move(roofline)});
  return plots;
}

Status WriteReportPlots(const std::string& dir, const std::vector<ReportPlot>& plots) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error(ErrorCode::kIo, "cannot create " + dir + ": " + ec.message());
  for (const ReportPlot& plot : plots)
    FT_RETURN_IF_ERROR(WriteSvgFile(dir + "/" + plot.file, plot.svg));
  return Status::Ok();
}

}  // namespace fusetune::cli
