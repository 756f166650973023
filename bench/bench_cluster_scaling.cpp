// Scaling of a cluster job on paper (issue 41; cluster/scaling.h): the
// predicted wall time of N shards from a single-machine tuning job's
// per-task times and a cluster job's measured fixed costs.
//
//   bench_cluster_scaling --single single.db [--job ID] --report team.db.cluster/report.json
//                         [--waves W] [--nodes 1,4,16,64] [--json OUT.json]
// bench/cluster/run_scaling.sh measures both and runs it.
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cluster/scaling.h"

namespace {

using fusetune::cluster::ScalingPoint;

int Usage(const char* why) {
  fmt::print(stderr,
             "bench_cluster_scaling: {}\nusage: bench_cluster_scaling --single DB [--job ID] "
             "--report REPORT.json [--waves W] [--nodes 1,4,16,64] [--json OUT]\n",
             why);
  return 2;
}

std::vector<int> ParseNodes(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string n; std::getline(in, n, ',');) out.push_back(std::max(1, std::atoi(n.c_str())));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string single, report_path, json_out, nodes_text = "1,4,16,64";
  int64_t job = 0;
  int waves = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--single") single = value;
    else if (flag == "--job") job = std::atoll(value.c_str());
    else if (flag == "--report") report_path = value;
    else if (flag == "--waves") waves = std::max(1, std::atoi(value.c_str()));
    else if (flag == "--nodes") nodes_text = value;
    else if (flag == "--json") json_out = value;
    else return Usage(("unknown flag " + flag).c_str());
  }
  if (single.empty() || report_path.empty()) return Usage("--single and --report are required");
  fusetune::db::OpenOptions open;
  open.create = false;
  open.read_only = true;
  auto db = fusetune::db::MakeSqliteDatabase(single, open);
  if (!db.ok()) return Usage(db.error().message().c_str());
  auto times = fusetune::cluster::TimesOfJob(**db, job);
  if (!times.ok()) return Usage(times.error().message().c_str());
  std::ifstream in(report_path);
  const auto report = nlohmann::json::parse(in, nullptr, false);
  if (report.is_discarded()) return Usage(("cannot read " + report_path).c_str());
  auto costs = fusetune::cluster::CostsOfReport(report);
  if (!costs.ok()) return Usage(costs.error().message().c_str());
  const auto points = fusetune::cluster::PredictScaling(*times, *costs, waves, ParseNodes(nodes_text));

  fmt::print("single-machine job: {} tasks, {} records, {:.1f} s of wall time ({:.1f} s whole-model)\n",
             times->tasks.size(), times->records, times->wall_seconds, times->whole_model_seconds);
  fmt::print("cluster costs measured: shard start {:.2f} s, merge start {:.2f} s, merge {:.2e} s "
             "per record, retraining {:.2e} s per record, Slurm gap {:.2f} s\n",
             costs->shard_start_seconds, costs->merge_start_seconds,
             costs->merge_seconds_per_record, costs->retrain_seconds_per_record,
             costs->step_gap_seconds);
  fmt::print("{:>6} {:>12} {:>12} {:>12} {:>9} {:>11}\n", "nodes", "wall (s)", "measuring",
             "overhead", "speedup", "efficiency");
  nlohmann::json out = nlohmann::json::array();
  for (const ScalingPoint& p : points) {
    fmt::print("{:>6} {:>12.1f} {:>12.1f} {:>12.1f} {:>8.2f}x {:>10.0f}%\n", p.nodes,
               p.wall_seconds, p.measuring_seconds, p.overhead_seconds, p.speedup,
               100 * p.efficiency);
    out.push_back({{"nodes", p.nodes},
                   {"wall_seconds", p.wall_seconds},
                   {"measuring_seconds", p.measuring_seconds},
                   {"overhead_seconds", p.overhead_seconds},
                   {"speedup", p.speedup},
                   {"efficiency", p.efficiency}});
  }
  if (!json_out.empty()) {
    std::ofstream f(json_out);
    f << nlohmann::json{{"waves", waves},
                        {"tasks", times->tasks.size()},
                        {"single_wall_seconds", times->wall_seconds},
                        {"whole_model_seconds", times->whole_model_seconds},
                        {"costs",
                         {{"shard_start_seconds", costs->shard_start_seconds},
                          {"merge_start_seconds", costs->merge_start_seconds},
                          {"merge_seconds_per_record", costs->merge_seconds_per_record},
                          {"retrain_seconds_per_record", costs->retrain_seconds_per_record},
                          {"step_gap_seconds", costs->step_gap_seconds}}},
                        {"prediction", out}}
             .dump(2)
      << "\n";
  }
  return 0;
}
