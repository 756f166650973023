// The report's plots: round ticks as pure functions, and SVG whose text stays
// inside the picture.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/plot_ticks.h"
#include "cli/roofline_plot.h"
#include "cli/svg_plot.h"
#include "tests/db/db_test_util.h"

namespace fusetune::cli {
namespace {

std::vector<std::string> Labels(const AxisTicks& t, bool log) {
  std::vector<std::string> out;
  const double step = log || t.values.size() < 2 ? 0 : t.values[1] - t.values[0];
  for (double v : t.values) out.push_back(FormatTick(v, step));
  return out;
}

using Strings = std::vector<std::string>;

TEST(PlotTicks, NiceStepIsOneTwoFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(NiceStep(0, 239), 50);
  EXPECT_DOUBLE_EQ(NiceStep(0, 59.8), 10);
  EXPECT_DOUBLE_EQ(NiceStep(0, 1), 0.2);
  EXPECT_DOUBLE_EQ(NiceStep(0.0021, 0.0032), 0.0002);
  EXPECT_DOUBLE_EQ(NiceStep(5, 5), 1);  // no range: any step
}

TEST(PlotTicks, LinearTicksAreRoundAndCoverTheData) {
  AxisTicks t = LinearTicks(0, 239);
  EXPECT_DOUBLE_EQ(t.lo, 0);
  EXPECT_DOUBLE_EQ(t.hi, 250);
  EXPECT_EQ(Labels(t, false), (Strings{"0", "50", "100", "150", "200", "250"}));
  EXPECT_EQ(Labels(LinearTicks(1.2, 59.8), false),
            (Strings{"0", "10", "20", "30", "40", "50", "60"}));  // near 0: from 0
  EXPECT_EQ(Labels(LinearTicks(2.13, 2.47), false), (Strings{"2.1", "2.2", "2.3", "2.4", "2.5"}));
}

TEST(PlotTicks, LinearTicksOfAConstantOrNegativeRange) {
  AxisTicks t = LinearTicks(3, 3);
  EXPECT_LE(t.lo, 3);
  EXPECT_GE(t.hi, 3);
  EXPECT_GE(t.values.size(), 2u);
  EXPECT_EQ(Labels(LinearTicks(-1, 1), false), (Strings{"-1.0", "-0.5", "0", "0.5", "1.0"}));
}

TEST(PlotTicks, LogTicksAtDecadesWithOneTwoFiveInside) {
  AxisTicks t = LogTicks(0.013, 0.6);
  EXPECT_DOUBLE_EQ(t.lo, 0.01);
  EXPECT_DOUBLE_EQ(t.hi, 1);
  EXPECT_EQ(Labels(t, true), (Strings{"0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1"}));
  EXPECT_EQ(Labels(LogTicks(3, 40000), true),
            (Strings{"1", "10", "100", "1000", "10000", "100000"}));
  EXPECT_EQ(Labels(LogTicks(0.0028, 0.0041), true), (Strings{"0.002", "0.003", "0.004", "0.005"}));
  EXPECT_EQ(Labels(LogTicks(0.25, 0.6), true), (Strings{"0.2", "0.5", "1"}));
}

TEST(PlotTicks, LogTicksOverManyDecadesSkipSome) {
  AxisTicks t = LogTicks(1e-3, 1e13);
  EXPECT_LE(t.values.size(), 9u);
  EXPECT_DOUBLE_EQ(t.values.front(), 1e-3);
  for (size_t i = 1; i < t.values.size(); ++i) EXPECT_DOUBLE_EQ(t.values[i] / t.values[i - 1], 100);
}

TEST(PlotTicks, FormatTickWritesDecimalsNotExponents) {
  EXPECT_EQ(FormatTick(0.0028, 0), "0.003");
  EXPECT_EQ(FormatTick(150, 50), "150");
  EXPECT_EQ(FormatTick(0.30000000000000004, 0.1), "0.3");
  EXPECT_EQ(FormatTick(2.5, 0.5), "2.5");
  EXPECT_EQ(FormatTick(-0.0, 1), "0");
  EXPECT_EQ(FormatTick(1e8, 0), "1e8");
  EXPECT_EQ(FormatTick(2e-5, 0), "2e-5");
  EXPECT_EQ(FormatTick(200000, 50000), "200000");
}

// Every <text class="CLASS" x=".." ...>TEXT</text>: its x, anchor and text.
struct SvgText {
  double x;
  std::string text;
};
std::vector<SvgText> Texts(const std::string& svg, const std::string& cls) {
  std::vector<SvgText> out;
  const std::regex re("<text class=\"" + cls + "\" x=\"([0-9.]+)\"[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it)
    out.push_back({std::stod((*it)[1]), (*it)[2]});
  return out;
}
double ViewBoxWidth(const std::string& svg) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(svg, m, std::regex("viewBox=\"0 0 ([0-9.]+) ([0-9.]+)\"")));
  return m.empty() ? 0 : std::stod(m[1]);
}

TEST(SvgPlot, LongLegendNamesStayInsideThePicture) {
  const std::string long_name(70, 'W'), longer = "gemm " + std::string(200, 'm');
  std::vector<PlotSeries> series{{long_name, {{0, 1}, {239, 2}}, true, false, {}},
                                 {longer, {{0, 2}, {100, 59.8}}, true, false, {}},
                                 {"short", {{5, 5}}, false, false, {}}};
  const std::string svg = SvgPlot({"title", "x (s)", "y (ms)", false, false}, series);
  const double width = ViewBoxWidth(svg);
  const auto legend = Texts(svg, "legend");
  ASSERT_EQ(legend.size(), 3u);
  EXPECT_EQ(legend[0].text, long_name);             // not cut short
  EXPECT_LT(legend[1].text.size(), longer.size());  // very long: shortened, with "..."
  EXPECT_EQ(legend[1].text.substr(legend[1].text.size() - 3), "...");
  for (const auto& t : legend) EXPECT_LE(t.x + TextWidth(t.text, 12), width) << t.text;
}

TEST(SvgPlot, TickLabelsAreRound) {
  const std::string svg = SvgPlot({"title", "trials", "latency (ms)", false, false},
                                  {{"a", {{0, 1.2}, {239, 59.8}}, true, false, {}}});
  std::vector<std::string> labels;
  for (const auto& t : Texts(svg, "tick")) labels.push_back(t.text);
  EXPECT_EQ(labels, (Strings{"0", "50", "100", "150", "200", "250", "0", "10", "20", "30", "40",
                             "50", "60"}));
}

TEST(SvgPlot, TwoPanelsShareOneLegend) {
  PlotPanel a{{"against trials", "trials", "ms", false, true},
              {{"s", {{1, 1}, {2, 0.5}}, true, false, {}}}};
  PlotPanel b{{"against time", "time (s)", "ms", false, true},
              {{"s", {{0, 1}, {30, 0.5}}, true, false, {}}}};
  const std::string svg = SvgFigure("curves", {a, b});
  EXPECT_NE(svg.find("against trials"), std::string::npos);
  EXPECT_NE(svg.find("time (s)"), std::string::npos);
  EXPECT_EQ(Texts(svg, "legend").size(), 1u);
}

TEST(Roofline, KernelsUnderTheCalibratedRoofs) {
  const Roofs roofs = RoofsFromCalibration(
      nlohmann::json{{"fma_gflops", 1200.0}, {"dram_read_gbps", 40.0}, {"l2_read_gbps", 300.0}});
  EXPECT_DOUBLE_EQ(roofs.fma_gflops, 1200);
  const std::string svg = RooflineSvg(
      "Roofline",
      {{"gemm 128x512x512", 2 * 128. * 512 * 512, 4 * (128. * 512 * 2 + 512 * 512), 1e-4},
       {"layernorm 128x512", 8 * 128. * 512, 4 * 128. * 512 * 2, 2e-5},
       {"reshape", 0, 1024, 1e-6}},
      roofs);
  EXPECT_NE(svg.find("FMA peak 1200 GFLOP/s, DRAM read 40 GB/s"), std::string::npos);
  EXPECT_NE(svg.find("L2 read 300 GB/s"), std::string::npos);
  EXPECT_NE(svg.find(">k1</text>"), std::string::npos);
  EXPECT_NE(svg.find(">k2</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">k3</text>"), std::string::npos);
  EXPECT_NE(svg.find("1 kernel without FLOPs not shown"), std::string::npos);
  EXPECT_NE(svg.find("arithmetic intensity (FLOP/byte)"), std::string::npos);
  for (const auto& t : Texts(svg, "tick")) {  // a log-log plot: labels at powers of ten, 2 or 5
    const double v = std::stod(t.text),
                 mantissa = v / std::pow(10.0, std::floor(std::log10(v) + 1e-9));
    EXPECT_TRUE(std::fabs(mantissa - 1) < 1e-6 || std::fabs(mantissa - 2) < 1e-6 ||
                std::fabs(mantissa - 5) < 1e-6)
        << t.text;
  }
}

// A database with a calibrated target, two group workloads and a graph, a
// job, and group records of two tilings of workload 0 and one of workload 1.
class RooflineFromDatabase : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = db::testing::FreshDbPath("roofline");
    auto opened = db::MakeSqliteDatabase(path_, {});
    ASSERT_TRUE(opened.ok()) << opened.error().ToString();
    db_ = std::move(*opened);
    ASSERT_TRUE(db::testing::Populate(*db_, 2).ok());
    ASSERT_TRUE(db_->PutTarget({db::testing::kTarget, "{}",
                                R"({"fma_gflops":500,"dram_read_gbps":20,"l2_read_gbps":90})"})
                    .ok());
    ASSERT_TRUE(db_->PutWorkload({"graph", db::WorkloadKind::kGraph, "{}"}).ok());
    auto job = db_->CreateJob({0, R"({"graph_key":"graph"})", "running", "{}", 0, 0});
    ASSERT_TRUE(job.ok());
    auto stored = db_->GetJob(*job);
    ASSERT_TRUE(stored.ok() && stored->has_value());
    job_ = **stored;
    // Workload 0, tiling 1 (the plan's) with FLOPs; tiling 2 faster, without.
    std::vector<db::Record> records{Group(0, 1, 2e-4, 4e6), Group(0, 2, 1e-4, 0),
                                    Group(1, 1, 5e-5, 1e5), db::testing::MakeRecord(0, 9, 1e-3)};
    records[3].workload_key = "graph";  // a plan of an earlier job (job 0)
    auto ids = db_->CommitRecords(records);
    ASSERT_TRUE(ids.ok()) << ids.error().ToString();
    graph_record_ = (*ids)[3];
  }
  void TearDown() override { std::filesystem::remove(path_); }

  db::Record Group(int workload, int tile, double seconds, double flops) {
    db::Record r = db::testing::MakeRecord(workload, tile, seconds);
    r.plan = fmt::format(R"({{"groups":[{{"nodes":[0],"tiling":{{"tile":{}}}}}]}})", tile);
    r.metrics =
        fmt::format(R"({{"status":"ok","flops":{},"bytes_in":50000,"bytes_out":10000}})", flops);
    r.job_id = job_.id;
    return r;
  }
  std::string Svg(const search::TuneSummary& summary) {
    const std::string out = path_ + ".svg";
    EXPECT_TRUE(WriteRooflinePlot(*db_, job_, summary, out).ok());
    std::ifstream in(out);
    std::stringstream text;
    text << in.rdbuf();
    std::filesystem::remove(out);
    return text.str();
  }

  std::string path_;
  std::unique_ptr<db::Database> db_;
  db::JobEntry job_;
  int64_t graph_record_ = 0;
};

TEST_F(RooflineFromDatabase, KernelsOfTheBestWholePlanWithTheirTiling) {
  search::TuneSummary summary;
  summary.best = search::PlanReport{measure::PlanKind::kTuned, 1e-3, 3, 0, graph_record_};
  const auto group = [](int w, int tile, const char* kernel) {
    return nlohmann::json{{"workload_key", db::testing::WorkloadKeyFor(w)},
                          {"tiling", {{"tile", tile}}},
                          {"kernel", kernel}};
  };
  summary.best_plan = {
      {"groups", {group(0, 1, "gemm A"), group(1, 1, "rowwise B"), group(0, 1, "gemm A")}}};
  const std::string svg = Svg(summary);
  EXPECT_NE(svg.find("kernels of the best whole-model plan"), std::string::npos);
  EXPECT_NE(svg.find("k1 2x gemm A"), std::string::npos) << svg;  // one point per distinct group
  EXPECT_NE(svg.find("k2 rowwise B"), std::string::npos);
  EXPECT_EQ(svg.find("without FLOPs"), std::string::npos);  // the plan's tiling, not the faster one
  EXPECT_NE(svg.find("FMA peak 500 GFLOP/s, DRAM read 20 GB/s"), std::string::npos);
  EXPECT_NE(svg.find("L2 read 90 GB/s"), std::string::npos);
}

TEST_F(RooflineFromDatabase, WithoutAWholePlanTheBestOfEachGroup) {
  search::TuneSummary summary;
  for (auto [w, name] : {std::pair{0, "gemm A"}, std::pair{1, "rowwise B"}}) {
    search::TaskReport task;
    task.key = db::testing::WorkloadKeyFor(w);
    task.summary = name;
    summary.tasks.push_back(task);
  }
  const std::string svg = Svg(summary);
  EXPECT_NE(svg.find("best tiling of each group"), std::string::npos);
  EXPECT_NE(svg.find("k1 rowwise B"), std::string::npos) << svg;
  // Workload 0's best record is the tiling without FLOPs: counted, not drawn.
  EXPECT_NE(svg.find("1 kernel without FLOPs not shown"), std::string::npos);
}

}  // namespace
}  // namespace fusetune::cli
