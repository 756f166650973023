// Small SVG plots for `fusetune report`: lines or points on linear or log
// axes, with a legend. No plotting library: SVG text opens in any browser.
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
};

struct PlotSpec {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  bool diagonal = false;  // draw y = x (predicted against measured)
};

std::string SvgPlot(const PlotSpec& spec, const std::vector<PlotSeries>& series);
Status WriteSvgPlot(const std::string& path, const PlotSpec& spec,
                    const std::vector<PlotSeries>& series);

}  // namespace fusetune::cli
