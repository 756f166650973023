// fusetune measure MODEL.onnx --plan PLAN.json: measures a plan (and with
// --groups each of its fused groups alone) in the measurement worker: status,
// time statistics, traffic, schedule overhead, overlap and roofline fraction.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "db/database.h"
#include "measure/measurer.h"
#include "measure/roofline.h"
#include "target/target.h"

namespace fusetune::cli {

namespace {

struct MeasureArgs {
  std::string model;
  ModelOptions model_options;
  std::string plan;
  measure::MeasureOptions options;
  CachesArgs caches;
  bool no_verify = false, no_overlap = false, no_roofline = false;
  bool groups = false, json = false;
  std::string db;  // read this machine's calibration from here when stored
};

const char* CachesDescription(target::CacheProtocol caches) {
  switch (caches) {
    case target::CacheProtocol::kFlushed: return "flushed before each run";
    case target::CacheProtocol::kWarm: return "kept warm";
    case target::CacheProtocol::kColdWeights: return "weights flushed before each run";
  }
  return "";
}

// The roofline from this machine's stored calibration, when there is one.
bool RooflineFromDb(const std::string& path, measure::MeasureOptions* o) {
  db::OpenOptions options;
  options.create = false;
  options.read_only = true;
  auto database = db::MakeSqliteDatabase(path, options);
  if (!database.ok()) return false;
  auto target = (*database)->GetTarget(target::ThisMachineKey(target::CacheProtocol::kFlushed));
  if (!target.ok() || !target->has_value()) return false;
  const auto c = nlohmann::json::parse((*target)->calibration, nullptr, false);
  if (!c.is_object() || c.value("threads", 0) != o->threads) return false;
  o->peak_gflops = c.value("fma_gflops", 0.0);
  o->dram_gbps = c.value("dram_read_gbps", 0.0);
  return o->peak_gflops > 0 && o->dram_gbps > 0;
}

void PrintResult(const measure::MeasureResult& r) {
  if (!r.ok()) {
    fmt::print("  status     {}: {}\n", measure::StatusName(r.status), r.error);
    return;
  }
  fmt::print("  status     ok (max error {:.2g} of the output scale)\n", r.max_error);
  fmt::print("  time       {:.3f} ms median (min {:.3f}, max {:.3f}, spread {:.1f}%, {} runs)\n",
             r.time.median * 1e3, r.time.min * 1e3, r.time.max * 1e3, r.time.spread * 100,
             r.time.count);
  fmt::print("  traffic    {} in + {} out = {:.1f} GB/s\n",
             HumanBytes(static_cast<double>(r.bytes_in)),
             HumanBytes(static_cast<double>(r.bytes_out)), r.bandwidth_gbps);
  fmt::print("  overhead   {:.3f} ms outside kernels ({:.1f} us per launch, {} launches)\n",
             r.overhead_seconds * 1e3, r.overhead_per_launch_seconds * 1e6, r.launches);
  if (r.overlap >= 0)
    fmt::print(
        "  overlap    eta {:.2f} (inside kernels: full {:.3f} ms, copy-only {:.3f}, "
        "compute-only {:.3f})\n",
        r.overlap, r.busy.median * 1e3, r.copy_busy.median * 1e3, r.compute_busy.median * 1e3);
  if (r.roofline_fraction > 0)
    fmt::print("  roofline   {:.0f}% ({} FLOP, {} compulsory traffic)\n", r.roofline_fraction * 100,
               HumanCount(r.flops), HumanBytes(r.compulsory_bytes));
}

int Measure(MeasureArgs& args) {
  auto loaded = LoadModel(args.model, args.model_options);
  if (!loaded.ok()) return ReportError(loaded.error());
  auto graph = std::make_shared<const graph::Graph>(std::move(*loaded));
  kernels::KernelConfig config;
  config.threads = args.options.threads;
  if (args.options.local_buffer_bytes > 0)
    config.local_buffer_bytes = static_cast<size_t>(args.options.local_buffer_bytes);
  fusion_space::FusionSpace space(*graph, config);
  auto plan = LoadPlanArg(space, args.plan);
  if (!plan.ok()) return ReportError(plan.error());
  auto measurer = measure::Measurer::Create();
  if (!measurer.ok()) return ReportError(measurer.error());

  measure::MeasureOptions& o = args.options;
  o.caches = args.caches.caches;
  o.verify = !args.no_verify;
  o.measure_overlap = !args.no_overlap;
  if (!args.no_roofline && !(!args.db.empty() && RooflineFromDb(args.db, &o))) {
    o.peak_gflops = measure::MeasureFmaPeak(o.threads);
    o.dram_gbps = measure::MeasureBandwidth(measure::StreamKind::kRead, o.threads);
  }
  std::vector<measure::Candidate> candidates{
      measure::PlanCandidate(graph, space, *plan, "whole plan")};
  std::vector<std::unique_ptr<fusion_space::FusionSpace>> group_spaces;
  if (args.groups)
    for (const fusion_space::PlanGroup& g : plan->groups) {
      if (g.nodes.size() < 2) continue;
      auto sub = measure::GroupGraph(*graph, g.nodes);
      group_spaces.push_back(std::make_unique<fusion_space::FusionSpace>(*sub, config));
      auto c = measure::GroupCandidate(sub, *group_spaces.back(), g.tiling,
                                       space.Match(g.nodes).instance.summary);
      if (!c.ok()) return ReportError(c.error());
      candidates.push_back(std::move(*c));
    }
  auto results = (*measurer)->MeasureBatch(candidates, o, [&](size_t i, const auto& r) {
    if (!args.json)
      std::cerr << fmt::format("[{}/{}] {}: {}\n", i + 1, candidates.size(), candidates[i].label,
                               measure::ResultSummary(r));
  });

  nlohmann::json j{{"model", args.model},
                   {"plan", args.plan},
                   {"options", measure::OptionsToJson(o)},
                   {"result", measure::ResultToJson(results[0])}};
  for (size_t i = 1; i < results.size(); ++i)
    j["groups"].push_back(
        {{"kernel", candidates[i].label}, {"result", measure::ResultToJson(results[i])}});
  const int exit_code = results[0].ok() ? kExitOk : kExitInternal;
  if (args.json) {
    PrintJson(j);
    return exit_code;
  }
  fmt::print("measured {} with plan {}: {} threads, caches {}\n", args.model, args.plan, o.threads,
             CachesDescription(o.caches));
  PrintResult(results[0]);
  for (size_t i = 1; i < results.size(); ++i) {
    fmt::print("group {}: {}\n", i, candidates[i].label);
    PrintResult(results[i]);
  }
  return exit_code;
}

}  // namespace

void AddMeasureCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<MeasureArgs>();
  CLI::App* cmd = app.add_subcommand(
      "measure", "Measure a plan in the worker process: time, traffic, overhead, overlap");
  cmd->add_option("model", args->model, "ONNX model")->required()->check(CLI::ExistingFile);
  cmd->add_option("--dim", args->model_options.dims, "Bind a symbolic dimension: NAME=VALUE");
  AddValueOption(cmd, &args->model_options);
  cmd->add_option("--plan", args->plan, "Plan JSON file, or 'unfused' or 'greedy'")->required();
  measure::MeasureOptions& o = args->options;
  cmd->add_option("--threads", o.threads, "Threads per kernel")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--min-repeats", o.min_repeats, "Timed runs per mode, at least")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--min-time", o.min_seconds, "Seconds of timed runs per mode, at least")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--timeout", o.timeout_seconds, "Seconds before a candidate counts as hung")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  cmd->add_option("--seed", o.input_seed, "Seed of the generated inputs")->capture_default_str();
  AddCachesOptions(cmd, &args->caches, /*measures=*/true);
  cmd->add_flag("--no-verify", args->no_verify, "Skip the comparison with the reference executor");
  cmd->add_flag("--no-overlap", args->no_overlap, "Skip the copy-only and compute-only runs");
  cmd->add_flag("--no-roofline", args->no_roofline, "Skip measuring peak FMA and DRAM bandwidth");
  cmd->add_flag("--groups", args->groups, "Also measure each fused group of the plan alone");
  cmd->add_option("--db", args->db,
                  "Take the roofline from this machine's calibration stored here (fusetune "
                  "calibrate --db) instead of measuring it");
  cmd->add_flag("--json", args->json, "Print the results as JSON");
  cmd->callback([args, set_result] { set_result(Measure(*args)); });
}

}  // namespace fusetune::cli
