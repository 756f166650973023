// fusetune db stats|best|export|import|merge|check|vacuum --db FILE: the
// tuning database's maintenance tools.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/db_json.h"
#include "db/jsonl.h"
#include "target/target.h"

namespace fusetune::cli {

namespace {

struct DbArgs {
  std::string db = "fusetune.db";
  std::string target;  // default: this machine
  std::string workload;
  std::string file;
  std::vector<std::string> others;
  bool json = false;
};

Result<std::unique_ptr<db::Database>> OpenExisting(const std::string& path, bool read_only) {
  db::OpenOptions options;
  options.create = false;
  options.read_only = read_only;
  return db::MakeSqliteDatabase(path, options);
}

std::string ThisTarget(const DbArgs& a) {
  return a.target.empty() ? target::ThisMachineKey(target::CacheProtocol::kFlushed) : a.target;
}

int Stats(const DbArgs& a) {
  auto database = OpenExisting(a.db, true);
  if (!database.ok()) return ReportError(database.error());
  const std::string target = ThisTarget(a);
  auto s = (*database)->Stats(target);
  if (!s.ok()) return ReportError(s.error());
  if (a.json) {
    PrintJson(DbStatsJson(a.db, target, *s));
    return kExitOk;
  }
  fmt::print("{}: schema v{}, {}", a.db, s->schema_version, HumanBytes(double(s->file_bytes)));
  if (s->records > 0) fmt::print(" ({:.0f} bytes per record)", double(s->file_bytes) / s->records);
  fmt::print("\n  targets     {} (this machine: {})\n", s->targets, target);
  fmt::print("  workloads   {} groups, {} whole graphs\n", s->group_workloads, s->graph_workloads);
  fmt::print("  records     {}", s->records);
  for (const auto& [status, n] : s->records_by_status) fmt::print(", {} {}", n, status);
  fmt::print("\n  best plans  {}\n  jobs        {}\n  cost models {}\n", s->best_entries, s->jobs,
             s->models);
  fmt::print("  compiles    {} remembered, {} of this generation ({}); vacuum drops the others\n",
             s->compiled_plans, s->compiled_plans_current, s->generation);
  if (s->stale.empty()) fmt::print("  stale       none\n");
  for (const auto& [reason, n] : s->stale) fmt::print("  stale       {} records: {}\n", n, reason);
  return kExitOk;
}

int Best(const DbArgs& a) {
  auto database = OpenExisting(a.db, true);
  if (!database.ok()) return ReportError(database.error());
  const std::string target = ThisTarget(a);
  auto j = BestPlansJson(**database, target, a.workload);
  if (!j.ok()) return ReportError(j.error());
  if (a.json || !a.workload.empty()) {
    PrintJson(*j);
    return kExitOk;
  }
  fmt::print("{} best plans for target {}\n", j->size(), target);
  for (const auto& e : *j)
    fmt::print("  {}  {:10.4f} ms  record {}\n", e["workload"].get<std::string>(),
               e["seconds"].get<double>() * 1e3, e["record"].get<int64_t>());
  return kExitOk;
}

void PrintTransfer(const char* what, const db::TransferSummary& s) {
  fmt::print(stderr, "{}: {} targets, {} workloads, {} records read, {} new\n", what, s.targets,
             s.workloads, s.records_read, s.records_added);
}

int Export(const DbArgs& a) {
  auto database = OpenExisting(a.db, true);
  if (!database.ok()) return ReportError(database.error());
  std::ofstream file;
  if (a.file != "-") {
    file.open(a.file);
    if (!file) return ReportError(Error(ErrorCode::kIo, fmt::format("cannot write '{}'", a.file)));
  }
  auto s = db::ExportJsonl(**database, a.file == "-" ? std::cout : file);
  if (!s.ok()) return ReportError(s.error());
  PrintTransfer("exported", *s);
  return kExitOk;
}

int Import(const DbArgs& a) {
  std::ifstream in(a.file);
  if (!in) return ReportError(Error(ErrorCode::kNotFound, fmt::format("cannot open '{}'", a.file)));
  auto database = db::MakeSqliteDatabase(a.db);
  if (!database.ok()) return ReportError(database.error());
  auto s = db::ImportJsonl(**database, in, a.file);
  if (!s.ok()) return ReportError(s.error());
  PrintTransfer("imported", *s);
  return kExitOk;
}

int Merge(const DbArgs& a) {
  auto into = db::MakeSqliteDatabase(a.db);
  if (!into.ok()) return ReportError(into.error());
  for (const std::string& other : a.others) {
    auto from = OpenExisting(other, true);
    if (!from.ok()) return ReportError(from.error());
    auto s = db::MergeDatabase(**into, **from);
    if (!s.ok()) return ReportError(s.error().WithContext("merging " + other));
    PrintTransfer(("merged " + other).c_str(), *s);
  }
  return kExitOk;
}

int Check(const DbArgs& a) {
  auto database = OpenExisting(a.db, true);
  if (!database.ok()) return ReportError(database.error());
  if (Status st = (*database)->CheckIntegrity(); !st.ok()) return ReportError(st.error());
  fmt::print("{}: integrity check passed\n", a.db);
  return kExitOk;
}

int Vacuum(const DbArgs& a) {
  auto database = OpenExisting(a.db, false);
  if (!database.ok()) return ReportError(database.error());
  if (Status st = (*database)->Vacuum(); !st.ok()) return ReportError(st.error());
  fmt::print("{}: vacuumed\n", a.db);
  return kExitOk;
}

}  // namespace

void AddDbCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<DbArgs>();
  CLI::App* db = app.add_subcommand("db", "Tuning database tools");
  db->require_subcommand(1);
  auto add = [&](const char* name, const char* help, int (*run)(const DbArgs&)) {
    CLI::App* cmd = db->add_subcommand(name, help);
    cmd->add_option("--db", args->db, "Tuning database")->capture_default_str();
    cmd->callback([args, run, set_result] { set_result(run(*args)); });
    return cmd;
  };
  CLI::App* stats =
      add("stats", "Counts of targets, workloads, records; stale records and why", Stats);
  stats->add_option("--target", args->target, "Target fingerprint (default: this machine)");
  stats->add_flag("--json", args->json, "Print as JSON");
  CLI::App* best = add("best", "Best plans for a target, or one workload's plan", Best);
  best->add_option("--workload", args->workload, "Workload key (16 hex digits)");
  best->add_option("--target", args->target, "Target fingerprint (default: this machine)");
  best->add_flag("--json", args->json, "Print as JSON");
  add("export", "Write every target, workload and record as JSON Lines", Export)
      ->add_option("-o,--output", args->file, "Output file, or - for stdout")
      ->required();
  add("import", "Add the records of a JSON Lines file (duplicates skipped)", Import)
      ->add_option("input", args->file, "JSON Lines file")
      ->required();
  add("merge", "Add the records of other databases and recompute best plans", Merge)
      ->add_option("others", args->others, "Databases to merge in")
      ->required();
  add("check", "Run SQLite's integrity and foreign-key checks", Check);
  add("vacuum", "Rebuild the file compactly", Vacuum);
}

}  // namespace fusetune::cli
