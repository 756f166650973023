#include "cli/roofline_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "cli/svg_plot.h"
#include "measure/measurement.h"

namespace fusetune::cli {

namespace {

// Fields of stored JSON, read without throwing on an unexpected shape.
nlohmann::json Field(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) ? j[key] : nlohmann::json();
}
std::string Text(const nlohmann::json& j, const char* key, const std::string& fallback) {
  const nlohmann::json f = Field(j, key);
  return f.is_string() ? f.get<std::string>() : fallback;
}

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
  filter.status = db::RecordStatus::kOk;
  if (!target.empty()) filter.target = target;
  if (job_id > 0) filter.job_id = job_id;
  FT_RETURN_IF_ERROR(database.ForEachRecord(filter, [&](const db::Record& r) {
    if (best && best->seconds <= r.seconds) return true;
    if (!tiling.is_null()) {
      const auto groups = Field(nlohmann::json::parse(r.plan, nullptr, false), "groups");
      if (!groups.is_array() || groups.size() != 1 || Field(groups[0], "tiling") != tiling)
        return true;
    }
    best = r;
    return true;
  }));
  return best;
}

std::optional<KernelPoint> PointOf(const db::Record& r, std::string name) {
  auto metrics = measure::MetricsFromText(r.metrics);
  if (!metrics.ok()) return std::nullopt;
  const measure::MeasureResult& m = metrics->measured;
  return KernelPoint{std::move(name), m.flops, static_cast<double>(m.bytes_in + m.bytes_out),
                     r.seconds};
}

// The target the job's best whole plan was measured on ("" when unknown);
// the plan may be a record of an earlier job on the same graph.
Result<std::string> PlanTarget(db::Database& database, const db::JobEntry& job,
                               const search::PlanReport& best) {
  std::string target;
  db::RecordFilter filter;
  const std::string graph_key =
      Text(nlohmann::json::parse(job.spec, nullptr, false), "graph_key", "");
  if (!graph_key.empty()) filter.workload_key = graph_key;
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

// A model's repeated layers repeat their groups: each distinct group and
// tiling is one point, named with how often the plan runs it.
Result<PlanKernels> WholePlanKernels(db::Database& database, const db::JobEntry& job,
                                     const search::TuneSummary& summary) {
  PlanKernels out{{}, {}, "kernels of the best whole-model plan"};
  FT_ASSIGN_OR_RETURN(out.target, PlanTarget(database, job, *summary.best));
  std::map<std::string, size_t> seen;  // group key and tiling -> index in out.kernels
  std::vector<int> counts;
  const nlohmann::json groups = Field(summary.best_plan, "groups");
  for (const auto& g : groups.is_array() ? groups : nlohmann::json::array()) {
    const std::string key = Text(g, "workload_key", "");
    const nlohmann::json tiling = Field(g, "tiling");
    if (key.empty()) continue;
    if (auto it = seen.find(key + tiling.dump()); it != seen.end()) {
      ++counts[it->second];
      continue;
    }
    FT_ASSIGN_OR_RETURN(auto record, FastestRecord(database, key, out.target, tiling, 0));
    if (!record) continue;
    auto p = PointOf(*record, Text(g, "kernel", Text(g, "template", key)));
    if (!p) continue;
    seen[key + tiling.dump()] = out.kernels.size();
    out.kernels.push_back(*p);
    counts.push_back(1);
  }
  for (size_t i = 0; i < out.kernels.size(); ++i)
    if (counts[i] > 1) out.kernels[i].name = fmt::format("{}x {}", counts[i], out.kernels[i].name);
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

Result<std::string> RooflinePlotSvg(db::Database& database, const db::JobEntry& job,
                                    const search::TuneSummary& summary) {
  PlanKernels plan;
  if (summary.best.has_value()) {
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
  return RooflineSvg("Roofline: " + plan.source, plan.kernels, roofs);
}

Status WriteRooflinePlot(db::Database& database, const db::JobEntry& job,
                         const search::TuneSummary& summary, const std::string& path) {
  FT_ASSIGN_OR_RETURN(std::string svg, RooflinePlotSvg(database, job, summary));
  return WriteSvgFile(path, svg);
}

}  // namespace fusetune::cli
