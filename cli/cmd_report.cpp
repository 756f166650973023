// fusetune report --db FILE [--job ID] [--out DIR]: a tuning job's tables,
// from the summary the job stored, and its plots from its records: the
// tuning curve of the heaviest tasks and the whole model's best latency over
// the job (against trials and against time), predicted against measured
// time, and the roofline of the best plan's kernels (cli/job_report.h, which
// the Python module's report() shares).
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/job_report.h"

namespace fusetune::cli {

namespace {

struct ReportArgs {
  std::string db = "fusetune.db";
  int64_t job = 0;
  std::string out;
  bool json = false;
};

int Report(const ReportArgs& args) {
  db::OpenOptions o;
  o.create = false;
  o.read_only = true;
  auto opened = db::MakeSqliteDatabase(args.db, o);
  if (!opened.ok()) return ReportError(opened.error());
  auto report = ReadJobReport(**opened, args.job);
  if (!report.ok()) return ReportError(report.error());
  std::vector<ReportPlot> plots;
  if (!args.out.empty()) {
    auto made = ReportPlots(**opened, *report);
    if (!made.ok()) return ReportError(made.error());
    if (Status st = WriteReportPlots(args.out, *made); !st.ok()) return ReportError(st.error());
    plots = std::move(*made);
  }
  if (args.json) {
    PrintJson(JobReportJson(*report));
    return kExitOk;
  }
  fmt::print("{}", FormatJobReport(*report));
  if (!plots.empty()) {
    fmt::print("plots:");
    for (const ReportPlot& plot : plots) fmt::print(" {}/{}", args.out, plot.file);
    fmt::print("\n");
  }
  return kExitOk;
}

}  // namespace

void AddReportCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand("report", "A tuning job's tables and plots");
  cmd->add_option("--db", args->db, "Tuning database")->capture_default_str();
  cmd->add_option("--job", args->job, "Job id (default: the latest)");
  cmd->add_option("--out", args->out, "Write SVG plots into this folder");
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->callback([args, set_result] { set_result(Report(*args)); });
}

}  // namespace fusetune::cli
