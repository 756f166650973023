// A tuning job's report, read from the database: the tables `fusetune
// report` prints and the plots it writes, as text and SVG in memory so that
// the Python module's report() returns the same (python/).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "db/database.h"
#include "search/tuner.h"

namespace fusetune::cli {

struct JobReport {
  db::JobEntry job;
  search::TuneSummary summary;  // as the job stored it
};

// Job `id`, or with 0 the latest job that stored a summary; an error names
// what is missing ("no job 99", "no tuning job in this database").
Result<JobReport> ReadJobReport(db::Database& database, int64_t id);

// "job 3 (done): {spec}" and the per-task and whole-model tables.
std::string FormatJobReport(const JobReport& report);
// The summary with the job's id, state and spec (`report --json`).
nlohmann::json JobReportJson(const JobReport& report);

struct ReportPlot {
  std::string file;  // "tuning_curves.svg"
  std::string svg;
};
// The tuning curves of the heaviest tasks, the whole model's best latency
// over the job (against trials and time), predicted against measured time,
// and the roofline of the best plan's kernels, in that order.
Result<std::vector<ReportPlot>> ReportPlots(db::Database& database, const JobReport& report);
// Writes each plot into `dir`, created when missing.
Status WriteReportPlots(const std::string& dir, const std::vector<ReportPlot>& plots);

}  // namespace fusetune::cli
