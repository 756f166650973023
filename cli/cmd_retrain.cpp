// fusetune retrain --db FILE: trains the cost model on the database's
// measured groups, reports its ranking on unseen workloads and activates it
// when it beats the active model. fusetune evaluate-model --db FILE: the same
// split, every model form against the active, analytical and random models.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cost_model/training.h"

namespace fusetune::cli {

namespace {

struct RetrainArgs {
  std::string db = "fusetune.db";
  cost_model::RetrainOptions options;
  std::string form = "auto";
  bool json = false;
};

// The figures on the validation rows tuning jobs measured, with the regret
// of trusting each model's top 1 and top 8 (what the search pays).
void PrintTuningScores(const cost_model::RetrainReport& r) {
  const bool any =
      std::any_of(r.scores.begin(), r.scores.end(),
                  [](const cost_model::ModelScore& s) { return s.tuning.has_value(); });
  if (!any) {
    fmt::print("\nno validation sample was measured by a tuning job (all from `collect`)\n");
    return;
  }
  fmt::print("\non the {} validation samples tuning jobs measured{}:\n", r.valid_tuning_samples,
             r.splits > 1 ? fmt::format(" (per split; the mean over the {} of {} splits that had "
                                        "them)",
                                        r.tuning_splits, r.splits)
                          : "");
  fmt::print("{:<22} {:>9} {:>9} {:>7} {:>7} {:>9} {:>9} {:>9}\n", "model", "spearman", "pairwise",
             "top-1", "top-5", "regret@1", "regret@8", "workloads");
  for (const auto& s : r.scores) {
    if (!s.tuning) continue;
    const auto& m = *s.tuning;
    const std::string regret8 =
        m.regret8_workloads > 0 ? fmt::format("{:.1f}%", m.regret8 * 100) : "-";
    fmt::print("{:<22} {:>9.3f} {:>9.3f} {:>7.3f} {:>7.3f} {:>8.1f}% {:>9} {:>9}\n", s.model,
               m.spearman, m.pairwise, m.top1, m.top5, m.regret1 * 100, regret8,
               fmt::format("{} ({})", m.workloads, m.regret8_workloads));
  }
  fmt::print(
      "(regret@k: the best measured time among a model's k best-predicted candidates over "
      "the workload's best; regret@8 over the workloads in parentheses, those with more "
      "than 8 candidates)\n");
}

void PrintScores(const cost_model::RetrainReport& r) {
  fmt::print(
      "{} records -> {} samples ({} skipped; labels: each record's {}); training on {} workloads "
      "({} samples), validating on {} unseen workloads ({} samples){}\n",
      r.data.records, r.data.samples, r.data.skipped_unreadable + r.data.skipped_graph_workloads,
      r.data.label == cost_model::TimeLabel::kMedian ? "median" : "fastest repeat, scaled",
      r.train_workloads, r.train_samples, r.valid_workloads, r.valid_samples,
      r.splits > 1 ? fmt::format("; the mean over {} splits", r.splits) : "");
  if (r.data.merged_repeats > 0)
    fmt::print("{} repeated measurements of a candidate merged (the fastest kept)\n",
               r.data.merged_repeats);
  fmt::print("\n");
  fmt::print("{:<22} {:>9} {:>9} {:>7} {:>7} {:>9} {:>9} {:>7} {:>9}\n", "model", "spearman",
             "pairwise", "top-1", "top-5", "traffic", "overhead", "eta", "time");
  fmt::print("{:<22} {:>9} {:>9} {:>7} {:>7} {:>9} {:>9} {:>7} {:>9}\n", "", "", "", "", "", "err",
             "err", "err", "err");
  for (const auto& s : r.scores) {
    const auto& m = s.metrics;
    const bool random = s.model == "random";
    fmt::print("{:<22} {:>9.3f} {:>9.3f} {:>7.3f} {:>7.3f} {:>9} {:>9} {:>7} {:>9}\n", s.model,
               m.spearman, m.pairwise, m.top1, m.top5,
               random ? "" : fmt::format("{:.1f}%", m.traffic_error * 100),
               random ? "" : fmt::format("{:.0f}%", m.overhead_error * 100),
               random ? "" : fmt::format("{:.2f}", m.eta_error),
               random                     ? ""
               : std::isnan(m.time_error) ? "-"
                                          : fmt::format("{:.0f}%", m.time_error * 100));
    if (s.split_spearman.size() > 1)
      fmt::print("{:<22} Spearman per split: {:.3f}\n", "", fmt::join(s.split_spearman, " "));
  }
  PrintTuningScores(r);
  fmt::print("\nchosen form: {} (top-1 {:.3f}, Spearman {:.3f}); {:.1f} s\n", r.chosen_form,
             r.chosen.top1, r.chosen.spearman, r.seconds);
}

int Run(RetrainArgs& args, bool store) {
  db::OpenOptions open;
  open.create = false;
  auto opened = db::MakeSqliteDatabase(args.db, open);
  if (!opened.ok()) return ReportError(opened.error());
  if (args.form != "auto") args.options.forms = {args.form};
  ProgressLine bar("training", !args.json);
  std::string stage;
  args.options.progress = [&](const std::string& s, int64_t done, int64_t total) {
    if (s != stage) bar.Restart();
    stage = s;
    bar.Update(done, total, s);
  };
  auto report = store ? cost_model::Retrain(**opened, args.options)
                      : cost_model::EvaluateModels(**opened, args.options);
  bar.Finish();
  if (!report.ok()) return ReportError(report.error());
  if (args.json) {
    PrintJson(cost_model::RetrainReportToJson(*report));
    return kExitOk;
  }
  PrintScores(*report);
  if (store)
    fmt::print("stored as model #{}: {}\n", report->model_id,
               report->promoted ? (report->active ? "active (better than the previous active model)"
                                                  : "active (no model was active)")
                                : "not activated: the active model ranks these workloads better "
                                  "(--force activates it anyway)");
  return kExitOk;
}

void AddCommonOptions(CLI::App* cmd, RetrainArgs* args) {
  cmd->add_option("--db", args->db, "Tuning database")->capture_default_str();
  cmd->add_option("--target", args->options.target, "Only this target fingerprint's records");
  cmd->add_option("--valid-fraction", args->options.valid_fraction,
                  "Share of workloads held out for validation")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 0.9));
  cmd->add_option("--seed", args->options.seed, "Seed of the split and the boosters")
      ->capture_default_str();
  cmd->add_option("--rounds", args->options.xgboost.rounds, "Boosting rounds per head")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--max-depth", args->options.xgboost.max_depth, "Depth of each tree")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  cmd->add_option("--pair-samples", args->options.xgboost.pair_samples,
                  "Pairwise form: partners drawn per candidate and round")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--tie-resolution", args->options.xgboost.tie_resolution,
                  "Pairwise form: candidates of a workload measured closer than this (relative) "
                  "count as tied")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--form", args->form, "Model form: auto, composed, corrected, direct, pairwise")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "composed", "corrected", "direct", "pairwise"}));
  AddTimeLabelOption(cmd, &args->options.label);
  cmd->add_flag("--json", args->json, "Print the report as JSON");
}

}  // namespace

void AddRetrainCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<RetrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "retrain", "Train the cost model from the database; activate it if it ranks better");
  AddCommonOptions(cmd, args.get());
  cmd->add_flag("--force", args->options.force, "Activate the new model even if not better");
  cmd->callback([args, set_result] { set_result(Run(*args, true)); });
}

void AddEvaluateModelCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<RetrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "evaluate-model",
      "Rank unseen workloads with every model form, the active, analytical and random models");
  AddCommonOptions(cmd, args.get());
  cmd->add_option("--splits", args->options.splits,
                  "Average over this many workload splits (seeds seed, seed+1, ...)")
      ->capture_default_str()
      ->check(CLI::Range(1, 50));
  cmd->callback([args, set_result] { set_result(Run(*args, false)); });
}

}  // namespace fusetune::cli
