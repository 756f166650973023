// The roofline plot of `fusetune report`: each kernel of a job's best plan at
// its arithmetic intensity (FLOPs per byte of counted traffic) and achieved
// GFLOP/s, log-log, under the roofs of the target's calibration (FMA peak,
// DRAM read and L2 read bandwidth).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "db/database.h"
#include "search/tuner.h"

namespace fusetune::cli {

struct KernelPoint {
  std::string name;  // what the kernel is: template and shapes
  double flops = 0, bytes = 0, seconds = 0;
};

struct Roofs {
  double fma_gflops = 0, dram_gbps = 0, l2_gbps = 0;  // 0: not calibrated
};
Roofs RoofsFromCalibration(const nlohmann::json& calibration);

// Kernels without FLOPs or traffic have no place on the plot and are counted
// in the subtitle instead.
std::string RooflineSvg(const std::string& title, const std::vector<KernelPoint>& kernels,
                        const Roofs& roofs);

// The kernels of the job's best whole-model plan, each from the fastest
// record of its group with the plan's tiling; without a whole-model plan, the
// best record of each group the job tuned: the SVG text.
Result<std::string> RooflinePlotSvg(db::Database& database, const db::JobEntry& job,
                                    const search::TuneSummary& summary);
// The same, written to `path`.
Status WriteRooflinePlot(db::Database& database, const db::JobEntry& job,
                         const search::TuneSummary& summary, const std::string& path);

}  // namespace fusetune::cli
