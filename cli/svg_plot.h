// Small SVG plots for `fusetune report`: lines or points on linear or log
// axes, one panel or several stacked over a shared legend. No plotting
// library: SVG text opens in any browser. Ticks are round (plot_ticks.h);
// the margins and the legend are sized by their longest text, so nothing is
// cut at the edge of the picture.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace fusetune::cli {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;
  bool line = true;  // false: points
  bool dashed = false;
  std::vector<std::string> point_labels;  // drawn beside the points, when given
  bool steps = false;  // a line that holds its value until the next point (best so far)
};

struct PlotSpec {
  std::string title, x_label, y_label;  // labels name their unit: "latency (ms)"
  bool log_x = false, log_y = false;
  bool diagonal = false;     // draw y = x (predicted against measured)
  bool x_from_zero = false;  // a linear x axis that starts at 0 whatever the data
};

// A panel of a figure: its own axes; series i has colour i in every panel.
struct PlotPanel {
  PlotSpec spec;
  std::vector<PlotSeries> series;
};

// Panels stacked top to bottom under `title`; the legend, to the right of
// the panels, names the series of the panel with the most of them.
std::string SvgFigure(const std::string& title, const std::vector<PlotPanel>& panels);
std::string SvgPlot(const PlotSpec& spec, const std::vector<PlotSeries>& series);

Status WriteSvgFile(const std::string& path, const std::string& svg);
Status WriteSvgPlot(const std::string& path, const PlotSpec& spec,
                    const std::vector<PlotSeries>& series);

}  // namespace fusetune::cli
