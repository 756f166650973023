// fusetune evaluate-transfer --db FILE --from KEY --to KEY: how well a model
// trained on one target's records ranks another target's unseen workloads
// with a small share of the new target's records (cost_model/transfer.h).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cost_model/transfer.h"

namespace fusetune::cli {

namespace {

struct TransferArgs {
  std::string db = "fusetune.db";
  cost_model::TransferOptions options;
  bool json = false;
};

void PrintArm(const cost_model::TransferReport& r, const cost_model::TransferArm& a) {
  const std::string gap = &a == &r.arms.front() ? "" : fmt::format("{:+.3f}", r.SpearmanGap(a));
  fmt::print("{:<44} {:>8} {:>9.3f} {:>7} {:>7.3f} {:>7.3f} {:>8.1f}%", a.name, a.train_samples,
             a.metrics.spearman, gap, a.metrics.top1, a.metrics.top5, a.metrics.regret1 * 100);
  if (a.tuning)
    fmt::print("   {:>9.3f} {:>7.3f} {:>7.3f}", a.tuning->spearman, a.tuning->top1, a.tuning->top5);
  fmt::print("\n");
}

void PrintReport(const cost_model::TransferReport& r) {
  fmt::print(
      "from {} ({} samples) to {} ({} samples); {} training and {} unseen workloads of {}{}; "
      "model xgboost/{}\n\n",
      r.from, r.from_samples, r.to, r.to_samples, r.train_workloads, r.valid_workloads, r.to,
      r.splits > 1 ? fmt::format(", the mean over {} splits", r.splits) : "", r.form);
  fmt::print("{:<44} {:>8} {:>9} {:>7} {:>7} {:>7} {:>9}   {:>9} {:>7} {:>7}\n", "trained on",
             "samples", "spearman", "gap", "top-1", "top-5", "regret@1", "tuning:sp", "top-1",
             "top-5");
  for (const cost_model::TransferArm& a : r.arms) PrintArm(r, a);
  fmt::print(
      "(gap: Spearman minus that of the first row; 'tuning': the validation rows tuning jobs "
      "measured)\n");
  for (const cost_model::TransferArm& a : r.arms) {
    if (!a.uses_from || a.fraction <= 0) continue;
    const double gap = r.SpearmanGap(a);
    fmt::print("with {:g}% of {}'s records: Spearman {:.3f} against {:.3f} with all of them ({})\n",
               a.fraction * 100, r.to, a.metrics.spearman, r.arms.front().metrics.spearman,
               gap >= -0.05 ? "within 0.05" : fmt::format("{:.3f} short", -gap));
  }
  fmt::print("{:.1f} s\n", r.seconds);
}

int Run(TransferArgs& args) {
  db::OpenOptions open;
  open.create = false;
  open.read_only = true;
  auto opened = db::MakeSqliteDatabase(args.db, open);
  if (!opened.ok()) return ReportError(opened.error());
  ProgressLine bar("evaluating", !args.json);
  std::string stage;
  args.options.progress = [&](const std::string& s, int64_t done, int64_t total) {
    if (s != stage) bar.Restart();
    stage = s;
    bar.Update(done, total, s);
  };
  auto report = cost_model::EvaluateTransfer(**opened, args.options);
  bar.Finish();
  if (!report.ok()) return ReportError(report.error());
  if (args.json) {
    PrintJson(cost_model::TransferReportToJson(*report));
  } else {
    PrintReport(*report);
  }
  return kExitOk;
}

}  // namespace

void AddEvaluateTransferCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<TransferArgs>();
  args->options.xgboost.form = "direct";
  CLI::App* cmd = app.add_subcommand(
      "evaluate-transfer",
      "Rank one target's unseen workloads with a model trained on another target's records");
  cmd->add_option("--db", args->db, "Tuning database")->capture_default_str();
  cmd->add_option("--from", args->options.from, "The target key trained on (db stats lists them)")
      ->required();
  cmd->add_option("--to", args->options.to, "The new target's key, ranked")->required();
  cmd->add_option("--fraction", args->options.fractions,
                  "Shares of the new target's training records added (repeatable)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 0.999));
  cmd->add_option("--valid-fraction", args->options.valid_fraction,
                  "Share of the new target's workloads held out")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 0.9));
  cmd->add_option("--splits", args->options.splits,
                  "Average over this many workload splits (seeds seed, seed+1, ...)")
      ->capture_default_str()
      ->check(CLI::Range(1, 50));
  cmd->add_option("--seed", args->options.seed, "Seed of the splits, shares and boosters")
      ->capture_default_str();
  cmd->add_option("--form", args->options.xgboost.form, "Model form")
      ->capture_default_str()
      ->check(CLI::IsMember({"composed", "corrected", "direct", "pairwise"}));
  cmd->add_option("--rounds", args->options.xgboost.rounds, "Boosting rounds per head")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmd->add_flag("--balance", args->options.balance,
                "Weight the new target's share to count as much as the old target's records");
  AddTimeLabelOption(cmd, &args->options.label);
  cmd->add_flag("--json", args->json, "Print the report as JSON");
  cmd->callback([args, set_result] { set_result(Run(*args)); });
}

}  // namespace fusetune::cli
