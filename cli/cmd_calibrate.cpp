// fusetune calibrate: measures this machine (peak FMA, DRAM and L2
// bandwidth, the executor's launch cost, the local buffer) and prints it with
// the target fingerprint that measurements are stored under.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "db/database.h"
#include "measure/calibrate.h"
#include "target/calibration.h"
#include "target/target.h"

namespace fusetune::cli {

namespace {

struct CalibrateArgs {
  int threads = 2;
  bool json = false;
  std::string db;  // store the calibration with this machine's target
};

int StoreCalibration(const std::string& path, const nlohmann::json& c) {
  auto database = db::MakeSqliteDatabase(path);
  if (!database.ok()) return ReportError(database.error());
  Status st = (*database)->PutTarget(
      {c["target"]["hash"].get<std::string>(), c["target"].dump(), c.dump()});
  if (!st.ok()) return ReportError(st.error());
  return kExitOk;
}

void PrintCalibration(const nlohmann::json& c) {
  const auto& t = c["target"];
  std::string isa;
  for (const auto& f : t["isa"]) isa += (isa.empty() ? "" : " ") + f.get<std::string>();
  fmt::print("target      {}\n", t["cpu_model"].get<std::string>());
  fmt::print("            {} logical CPUs; L1d {}, L2 {} per core, L3 {}\n",
             t["logical_cpus"].get<int>(), HumanBytes(t["l1d_bytes"].get<double>()),
             HumanBytes(t["l2_bytes"].get<double>()), HumanBytes(t["l3_bytes"].get<double>()));
  fmt::print("            ISA: {}\n", isa);
  fmt::print("fingerprint {} (fusetune {})\n\n", t["hash"].get<std::string>(),
             t["fusetune_version"].get<std::string>());
  const int threads = c["threads"].get<int>();
  fmt::print("{:<34} {:>12}\n", "measurement", "value");
  fmt::print("{:<34} {:>8.1f} GFLOP/s\n", "FP32 FMA peak, 1 thread",
             c["fma_gflops_1_thread"].get<double>());
  fmt::print("{:<34} {:>8.1f} GFLOP/s\n", fmt::format("FP32 FMA peak, {} threads", threads),
             c["fma_gflops"].get<double>());
  const double bf16 = c.value("bf16_dot_gflops", 0.0);  // absent from calibrations before 0.1
  if (bf16 > 0)
    fmt::print("{:<34} {:>8.1f} GFLOP/s\n", fmt::format("BF16 dot peak, {} threads", threads), bf16);
  else
    fmt::print("{:<34} {:>12}\n", "BF16 dot peak", "no avx512_bf16");
  fmt::print("{:<34} {:>8.1f} GB/s\n", "DRAM read", c["dram_read_gbps"].get<double>());
  fmt::print("{:<34} {:>8.1f} GB/s\n", "DRAM copy (read + write)",
             c["dram_copy_gbps"].get<double>());
  fmt::print("{:<34} {:>8.1f} GB/s\n", "DRAM triad (read + write)",
             c["dram_triad_gbps"].get<double>());
  fmt::print("{:<34} {:>8.1f} GB/s\n", "L2 read", c["l2_read_gbps"].get<double>());
  fmt::print("{:<34} {:>8.1f} us\n", "kernel launch through the executor",
             c["launch_overhead_us"].get<double>());
  fmt::print("{:<34} {:>12}\n", "local buffer per thread",
             HumanBytes(c["local_buffer_bytes"].get<double>()));
  const double ridge = c["fma_gflops"].get<double>() / c["dram_read_gbps"].get<double>();
  fmt::print("{:<34} {:>8.1f} FLOP/byte\n", "ridge point (peak / DRAM read)", ridge);
}

}  // namespace

void AddCalibrateCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Measure this machine: peak FMA, DRAM/L2 bandwidth, launch cost, fingerprint");
  cmd->add_option("--threads", args->threads, "Threads (as kernels will use)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--json", args->json, "Print the calibration as JSON");
  cmd->add_option("--db", args->db, "Store the calibration in this tuning database");
  cmd->callback([args, set_result] {
    const nlohmann::json c = target::CalibrationToJson(measure::Calibrate(args->threads));
    if (args->json)
      PrintJson(c);
    else
      PrintCalibration(c);
    if (!args->db.empty()) {
      if (const int rc = StoreCalibration(args->db, c); rc != kExitOk) return set_result(rc);
      if (!args->json) fmt::print("stored in {}\n", args->db);
    }
    set_result(kExitOk);
  });
}

}  // namespace fusetune::cli
