#include "cli/roofline_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "cli/svg_plot.h"
#include "measure/measurement.h"

namespace fusetune::cli {

namespace {

// The roof of bandwidth `gbps` under the peak: min(peak, gbps * intensity),
// as a line over [lo, hi] with its corner where the two meet.
PlotSeries Roof(const std::string& name, double peak, double gbps, double lo, double hi,
                bool dashed) {
  PlotSeries s{name, {}, true, dashed, {}};
  auto at = [&](double x) { return peak > 0 ? std::min(peak, gbps * x) : gbps * x; };
  s.points.push_back({lo, at(lo)});
  if (peak > 0 && peak / gbps > lo && peak / gbps < hi) s.points.push_back({peak / gbps, peak});
  s.points.push_back({hi, at(hi)});
  return s;
}

// The best ok record of `key` (on `target` when given) whose one-group plan
// has `tiling` (any tiling when null).
Result<std::optional<db::Record>> FastestRecord(db::Database& database, const std::string& key,
                                                const std::string& target,
                                                const nlohmann::json& tiling, int64_t job_id) {
  std::optional<db::Record> best;
  db::RecordFilter filter;
  filter.workload_key = key;
  filter.status = "ok";
  if (!target.empty()) filter.target = target;
  if (job_id > 0) filter.job_id = job_id;
  FT_RETURN_IF_ERROR(database.ForEachRecord(filter, [&](const db::Record& r) {
    if (best && best->seconds <= r.seconds) return true;
    if (!tiling.is_null()) {
      const auto plan = nlohmann::json::parse(r.plan, nullptr, false);
      const auto& groups = plan.is_object() ? plan.value("groups", nlohmann::json()) : plan;
      if (!groups.is_array() || groups.size() != 1 ||
          groups[0].value("tiling", nlohmann::json()) != tiling)
        return true;
    }
    best = r;
    return true;
  }));
  return best;
}

std::optional<KernelPoint> PointOf(const db::Record& r, std::string name) {
  auto metrics = measure::ResultFromJson(nlohmann::json::parse(r.metrics, nullptr, false));
  if (!metrics.ok()) return std::nullopt;
  return KernelPoint{std::move(name), metrics->flops,
                     static_cast<double>(metrics->bytes_in + metrics->bytes_out), r.seconds};
}

// The target the job's best whole plan was measured on ("" when unknown).
Result<std::string> PlanTarget(db::Database& database, const db::JobEntry& job,
                               const search::PlanReport& best) {
  std::string target;
  db::RecordFilter filter;
  filter.job_id = job.id;
  FT_RETURN_IF_ERROR(database.ForEachRecord(filter, [&](const db::Record& r) {
    if (r.id != best.record_id) return true;
    target = r.target;
    return false;
  }));
  return target;
}

struct PlanKernels {
  std::vector<KernelPoint> kernels;
  std::string target, source;
};

Result<PlanKernels> WholePlanKernels(db::Database& database, const db::JobEntry& job,
                                     const search::TuneSummary& summary) {
  PlanKernels out{{}, {}, "kernels of the best whole-model plan"};
  FT_ASSIGN_OR_RETURN(out.target, PlanTarget(database, job, *summary.best));
  for (const auto& g : summary.best_plan.value("groups", nlohmann::json::array())) {
    const std::string key = g.value("workload_key", "");
    if (key.empty()) continue;
    FT_ASSIGN_OR_RETURN(auto record, FastestRecord(database, key, out.target,
                                                   g.value("tiling", nlohmann::json()), 0));
    if (!record) continue;
    const std::string name = g.value("kernel", g.value("template", key));
    if (auto p = PointOf(*record, name)) out.kernels.push_back(*p);
  }
  return out;
}

Result<PlanKernels> GroupBestKernels(db::Database& database, const db::JobEntry& job,
                                     const search::TuneSummary& summary) {
  PlanKernels out{{}, {}, "best tiling of each group"};
  for (const auto& t : summary.tasks) {
    FT_ASSIGN_OR_RETURN(auto record, FastestRecord(database, t.key, "", nullptr, job.id));
    if (!record) continue;
    if (out.target.empty()) out.target = record->target;
    if (auto p = PointOf(*record, t.summary)) out.kernels.push_back(*p);
  }
  return out;
}

}  // namespace

Roofs RoofsFromCalibration(const nlohmann::json& c) {
  if (!c.is_object()) return {};
  auto number = [&](const char* key) {
    return c.contains(key) && c[key].is_number() ? c[key].get<double>() : 0.0;
  };
  return {number("fma_gflops"), number("dram_read_gbps"), number("l2_read_gbps")};
}

std::string RooflineSvg(const std::string& title, const std::vector<KernelPoint>& kernels,
                        const Roofs& roofs) {
  std::vector<PlotSeries> series;
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  size_t unplaced = 0;
  std::vector<PlotSeries> points;
  for (const KernelPoint& k : kernels) {
    if (!(k.flops > 0 && k.bytes > 0 && k.seconds > 0)) {
      ++unplaced;
      continue;
    }
    const double intensity = k.flops / k.bytes, gflops = k.flops / k.seconds / 1e9;
    lo = std::min(lo, intensity), hi = std::max(hi, intensity);
    const std::string label = fmt::format("k{}", points.size() + 1);
    points.push_back({label + " " + k.name, {{intensity, gflops}}, false, false, {label}});
  }
  if (points.empty()) lo = 0.1, hi = 10;
  // Room on both sides, and both ridges (where a bandwidth meets the peak) in view.
  lo /= 3, hi *= 3;
  for (double gbps : {roofs.dram_gbps, roofs.l2_gbps})
    if (roofs.fma_gflops > 0 && gbps > 0)
      lo = std::min(lo, roofs.fma_gflops / gbps / 2),
      hi = std::max(hi, roofs.fma_gflops / gbps * 2);
  if (roofs.dram_gbps > 0)
    series.push_back(Roof(fmt::format("roof: FMA peak {:.0f} GFLOP/s, DRAM read {:.0f} GB/s",
                                      roofs.fma_gflops, roofs.dram_gbps),
                          roofs.fma_gflops, roofs.dram_gbps, lo, hi, false));
  if (roofs.l2_gbps > 0)
    series.push_back(Roof(fmt::format("roof: L2 read {:.0f} GB/s", roofs.l2_gbps), roofs.fma_gflops,
                          roofs.l2_gbps, lo, hi, true));
  if (roofs.fma_gflops > 0 && roofs.dram_gbps <= 0)
    series.push_back({fmt::format("roof: FMA peak {:.0f} GFLOP/s", roofs.fma_gflops),
                      {{lo, roofs.fma_gflops}, {hi, roofs.fma_gflops}},
                      true,
                      false,
                      {}});
  series.insert(series.end(), points.begin(), points.end());
  std::string full_title = title;
  if (unplaced > 0)
    full_title +=
        fmt::format(" ({} kernel{} without FLOPs not shown)", unplaced, unplaced == 1 ? "" : "s");
  if (roofs.fma_gflops <= 0 && roofs.dram_gbps <= 0) full_title += " (no calibration stored)";
  return SvgPlot({full_title, "arithmetic intensity (FLOP/byte)", "achieved (GFLOP/s)", true, true},
                 series);
}

Status WriteRooflinePlot(db::Database& database, const db::JobEntry& job,
                         const search::TuneSummary& summary, const std::string& path) {
  PlanKernels plan;
  if (summary.best.has_value() && summary.best_plan.is_object()) {
    FT_ASSIGN_OR_RETURN(plan, WholePlanKernels(database, job, summary));
  }
  if (plan.kernels.empty()) {
    FT_ASSIGN_OR_RETURN(plan, GroupBestKernels(database, job, summary));
  }
  Roofs roofs;
  if (!plan.target.empty()) {
    FT_ASSIGN_OR_RETURN(auto target, database.GetTarget(plan.target));
    if (target.has_value())
      roofs = RoofsFromCalibration(nlohmann::json::parse(target->calibration, nullptr, false));
  }
  return WriteSvgFile(path, RooflineSvg("Roofline: " + plan.source, plan.kernels, roofs));
}

}  // namespace fusetune::cli
