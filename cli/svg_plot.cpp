#include "cli/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

namespace fusetune::cli {

namespace {

constexpr double kWidth = 760, kHeight = 480, kLeft = 80, kRight = 200, kTop = 40, kBottom = 60;
const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double Map(double v, double from, double to) const {
    const double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi;
    const double x = log ? std::log10(std::max(v, lo)) : v;
    return from + (to - from) * (b > a ? (x - a) / (b - a) : 0.5);
  }
};

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

std::string Tick(double v) {
  if (std::fabs(v) >= 1e5 || (std::fabs(v) < 1e-2 && v != 0)) return fmt::format("{:.1e}", v);
  return std::fabs(v) >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v);
}

Axis MakeAxis(const std::vector<double>& values, bool log) {
  Axis a;
  a.log = log;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values)
    if (std::isfinite(v) && (!log || v > 0)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) lo = log ? 1 : 0, hi = log ? 10 : 1;
  if (hi <= lo) hi = log ? lo * 10 : lo + 1;
  if (log) {
    a.lo = lo / 1.2;
    a.hi = hi * 1.2;
  } else {
    const double pad = (hi - lo) * 0.05;
    a.lo = lo >= 0 && lo - pad < 0 ? 0 : lo - pad;  // counts and times start at 0
    a.hi = hi + pad;
  }
  return a;
}

}  // namespace

std::string SvgPlot(const PlotSpec& spec, const std::vector<PlotSeries>& series) {
  std::vector<double> xs, ys;
  for (const auto& s : series)
    for (auto [x, y] : s.points) xs.push_back(x), ys.push_back(y);
  if (spec.diagonal) {
    std::vector<double> both = xs;
    both.insert(both.end(), ys.begin(), ys.end());
    xs = ys = both;
  }
  const Axis ax = MakeAxis(xs, spec.log_x), ay = MakeAxis(ys, spec.log_y);
  const double x0 = kLeft, x1 = kWidth - kRight, y0 = kHeight - kBottom, y1 = kTop;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n<text x=\"{}\" y=\"22\" font-size=\"15\">{}</text>\n",
      kWidth, kHeight, kLeft, Escape(spec.title));
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
      "stroke=\"#333\"/>\n",
      x0, y1, x1 - x0, y0 - y1);
  for (int i = 0; i <= 4; ++i) {
    const double f = i / 4.0;
    auto value = [&](const Axis& a) {
      return a.log ? std::pow(10, std::log10(a.lo) + f * (std::log10(a.hi) - std::log10(a.lo)))
                   : a.lo + f * (a.hi - a.lo);
    };
    const double px = x0 + f * (x1 - x0), py = y0 + f * (y1 - y0);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        px, y0, y1, y0 + 16, Tick(value(ax)));
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
        x0, py, x1, x0 - 6, py + 4, Tick(value(ay)));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (x0 + x1) / 2,
                     kHeight - 18, Escape(spec.x_label));
  svg += fmt::format(
      "<text x=\"16\" y=\"{0}\" transform=\"rotate(-90 16 {0})\" "
      "text-anchor=\"middle\">{1}</text>\n",
      (y0 + y1) / 2, Escape(spec.y_label));
  if (spec.diagonal)
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\" "
        "stroke-dasharray=\"4 4\"/>\n",
        ax.Map(ax.lo, x0, x1), ay.Map(ax.lo, y0, y1), ax.Map(ax.hi, x0, x1), ay.Map(ax.hi, y0, y1));
  for (size_t i = 0; i < series.size(); ++i) {
    const char* colour = kColours[i % std::size(kColours)];
    const PlotSeries& s = series[i];
    std::string path;
    for (auto [x, y] : s.points) {
      const double px = ax.Map(x, x0, x1), py = ay.Map(y, y0, y1);
      if (s.line)
        path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", px, py);
      else
        svg += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\" "
            "fill-opacity=\"0.6\"/>\n",
            px, py, colour);
    }
    if (s.line && !path.empty())
      svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"/>\n",
                         path, colour);
    const double ly = y1 + 14 + 18 * static_cast<double>(i);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\">{}</text>\n",
        x1 + 10, ly - 10, colour, x1 + 28, ly, Escape(s.name.substr(0, 26)));
  }
  return svg + "</svg>\n";
}

Status WriteSvgPlot(const std::string& path, const PlotSpec& spec,
                    const std::vector<PlotSeries>& series) {
  std::ofstream out(path);
  out << SvgPlot(spec, series);
  if (!out) return Error(ErrorCode::kIo, "cannot write " + path);
  return Status::Ok();
}

}  // namespace fusetune::cli
