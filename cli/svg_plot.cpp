#include "cli/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include "cli/plot_ticks.h"

namespace fusetune::cli {

namespace {

constexpr double kFont = 12, kTitleFont = 15, kLabelFont = 11;
constexpr double kPlotWidth = 560, kPanelHeight = 300, kStackedPanelHeight = 230;
constexpr double kMargin = 16, kLegendRow = 18, kLegendGap = 24;
constexpr size_t kMaxLabel = 90;  // longer legend names end in "..."
const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

const char* Colour(size_t i) { return kColours[i % std::size(kColours)]; }

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string LegendName(const std::string& name) {
  return name.size() <= kMaxLabel ? name : name.substr(0, kMaxLabel - 3) + "...";
}

struct Axis {
  AxisTicks ticks;
  bool log = false;
  double Map(double v, double from, double to) const {
    const double a = log ? std::log10(ticks.lo) : ticks.lo;
    const double b = log ? std::log10(ticks.hi) : ticks.hi;
    const double x = log ? std::log10(std::max(v, ticks.lo)) : v;
    return from + (to - from) * (b > a ? (x - a) / (b - a) : 0.5);
  }
  std::string Label(double v) const {
    const double step = !log && ticks.values.size() > 1 ? ticks.values[1] - ticks.values[0] : 0;
    return FormatTick(v, step);
  }
};

Axis MakeAxis(std::vector<double> values, bool log, bool from_zero = false) {
  if (from_zero && !log) values.push_back(0);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values)
    if (std::isfinite(v) && (!log || v > 0)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) lo = log ? 1 : 0, hi = log ? 10 : 1;
  return {log ? LogTicks(lo, hi) : LinearTicks(lo, hi), log};
}

struct PanelAxes {
  Axis x, y;
};

PanelAxes MakeAxes(const PlotPanel& panel) {
  std::vector<double> xs, ys;
  for (const auto& s : panel.series)
    for (auto [x, y] : s.points) xs.push_back(x), ys.push_back(y);
  if (panel.spec.diagonal) {  // one range for both, so y = x is the diagonal
    std::vector<double> both = xs;
    both.insert(both.end(), ys.begin(), ys.end());
    xs = ys = both;
  }
  return {MakeAxis(xs, panel.spec.log_x, panel.spec.x_from_zero), MakeAxis(ys, panel.spec.log_y)};
}

// The plot area of a panel in picture coordinates.
struct Box {
  double x0, x1, y0, y1;  // y0 the bottom, y1 the top
};

std::string DrawAxes(const PlotSpec& spec, const PanelAxes& a, const Box& b, double y_title_x) {
  std::string svg = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", b.x0,
      b.y1, b.x1 - b.x0, b.y0 - b.y1);
  for (double v : a.x.ticks.values) {
    const double px = a.x.Map(v, b.x0, b.x1);
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<text class=\"tick\" x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        px, b.y0, b.y1, b.y0 + 16, a.x.Label(v));
  }
  for (double v : a.y.ticks.values) {
    const double py = a.y.Map(v, b.y0, b.y1);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text class=\"tick\" x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        b.x0, py, b.x1, b.x0 - 6, py + 4, a.y.Label(v));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     (b.x0 + b.x1) / 2, b.y0 + 36, Escape(spec.x_label));
  svg += fmt::format(
      "<text x=\"{0}\" y=\"{1}\" transform=\"rotate(-90 {0} {1})\" "
      "text-anchor=\"middle\">{2}</text>\n",
      y_title_x, (b.y0 + b.y1) / 2, Escape(spec.y_label));
  if (spec.diagonal)
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\" "
        "stroke-dasharray=\"4 4\"/>\n",
        a.x.Map(a.x.ticks.lo, b.x0, b.x1), a.y.Map(a.x.ticks.lo, b.y0, b.y1),
        a.x.Map(a.x.ticks.hi, b.x0, b.x1), a.y.Map(a.x.ticks.hi, b.y0, b.y1));
  return svg;
}

// A point's label goes to the first place around it where it overlaps no
// label placed before (or to the first place when none is free).
struct LabelBox {
  double x0, y0, x1, y1;
  bool Overlaps(const LabelBox& o) const {
    return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1;
  }
};

std::string PlaceLabel(const std::string& text, const char* colour, double px, double py,
                       std::vector<LabelBox>& placed) {
  struct Spot {
    double dx, dy;
    bool end;
  };
  const Spot spots[] = {{5, -5, false},  {5, 12, false}, {-5, -5, true},  {-5, 12, true},
                        {5, -17, false}, {5, 24, false}, {-5, -17, true}, {-5, 24, true},
                        {5, -29, false}, {5, 36, false}};
  const double w = TextWidth(text, kLabelFont);
  auto box = [&](const Spot& s) {
    const double x = px + s.dx;
    return LabelBox{s.end ? x - w : x, py + s.dy - kLabelFont + 2, s.end ? x : x + w,
                    py + s.dy + 2};
  };
  const Spot* chosen = &spots[0];
  for (const Spot& s : spots)
    if (std::none_of(placed.begin(), placed.end(),
                     [&](const LabelBox& b) { return b.Overlaps(box(s)); })) {
      chosen = &s;
      break;
    }
  placed.push_back(box(*chosen));
  return fmt::format(
      "<text class=\"point\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" fill=\"{}\"{}>{}</text>\n",
      px + chosen->dx, py + chosen->dy, kLabelFont, colour,
      chosen->end ? " text-anchor=\"end\"" : "", Escape(text));
}

std::string DrawSeries(const PlotSeries& s, const char* colour, const PanelAxes& a, const Box& b,
                       std::vector<LabelBox>& labels) {
  std::string svg, path;
  double last_py = 0;
  for (size_t i = 0; i < s.points.size(); ++i) {
    const auto [x, y] = s.points[i];
    const double px = a.x.Map(x, b.x0, b.x1), py = a.y.Map(y, b.y0, b.y1);
    if (s.line && s.steps && !path.empty()) path += fmt::format("L{:.1f},{:.1f} ", px, last_py);
    if (s.line)
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", px, py);
    else
      svg += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\" fill-opacity=\"0.7\"/>\n", px,
          py, colour);
    last_py = py;
    if (i < s.point_labels.size() && !s.point_labels[i].empty())
      svg += PlaceLabel(s.point_labels[i], colour, px, py, labels);
  }
  if (s.line && !path.empty())
    svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"{}/>\n",
                       path, colour, s.dashed ? " stroke-dasharray=\"6 4\"" : "");
  return svg;
}

// The legend's entries, drawn with their top-left corner at (x, y).
std::string DrawLegend(const std::vector<PlotSeries>& series, double x, double y, double width) {
  std::string svg = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"white\" stroke=\"#ccc\"/>\n", x, y,
      width, kLegendRow * static_cast<double>(series.size()) + 8);
  for (size_t i = 0; i < series.size(); ++i) {
    const double row = y + 4 + kLegendRow * static_cast<double>(i) + kLegendRow / 2;
    const PlotSeries& s = series[i];
    if (s.line)
      svg += fmt::format(
          "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"{}/>",
          x + 6, row, x + 24, row, Colour(i), s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    else
      svg +=
          fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/>", x + 15, row, Colour(i));
    svg += fmt::format("<text class=\"legend\" x=\"{}\" y=\"{}\">{}</text>\n", x + 30, row + 4,
                       Escape(LegendName(s.name)));
  }
  return svg;
}

double LegendWidth(const std::vector<PlotSeries>& series) {
  double w = 0;
  for (const auto& s : series) w = std::max(w, TextWidth(LegendName(s.name), kFont));
  return w + 30 + 10;
}

double TickLabelWidth(const Axis& axis) {
  double w = 0;
  for (double v : axis.ticks.values) w = std::max(w, TextWidth(axis.Label(v), kFont));
  return w;
}

}  // namespace

std::string SvgFigure(const std::string& title, const std::vector<PlotPanel>& panels) {
  std::vector<PanelAxes> axes;
  double tick_width = 0;
  for (const auto& p : panels) {
    axes.push_back(MakeAxes(p));
    tick_width = std::max(tick_width, TickLabelWidth(axes.back().y));
  }
  const std::vector<PlotSeries>* legend = nullptr;
  for (const auto& p : panels)
    if (!p.series.empty() && (!legend || p.series.size() > legend->size())) legend = &p.series;
  const double left = kMargin + 20 + tick_width + 10;  // y title, tick labels, gap
  const double x0 = left, x1 = left + kPlotWidth;
  const double legend_x = x1 + kLegendGap, legend_w = legend ? LegendWidth(*legend) : 0;
  const bool stacked = panels.size() > 1;
  std::string body;
  double y = 30 + kMargin;  // below the title
  for (size_t i = 0; i < panels.size(); ++i) {
    if (stacked && !panels[i].spec.title.empty()) {
      body += fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}</text>\n", x0, y + 4,
                          Escape(panels[i].spec.title));
      y += 14;
    }
    const Box box{x0, x1, y + (stacked ? kStackedPanelHeight : kPanelHeight), y};
    body += DrawAxes(panels[i].spec, axes[i], box, kMargin + 8);
    std::vector<LabelBox> labels;
    for (size_t k = 0; k < panels[i].series.size(); ++k)
      body += DrawSeries(panels[i].series[k], Colour(k), axes[i], box, labels);
    y = box.y0 + 44 + kMargin;
  }
  if (legend) body += DrawLegend(*legend, legend_x, 30 + kMargin, legend_w);
  const double legend_bottom =
      legend ? 30 + kMargin + kLegendRow * static_cast<double>(legend->size()) + 8 + kMargin : 0;
  const double width = std::max({legend ? legend_x + legend_w + kMargin : x1 + kMargin,
                                 kMargin + TextWidth(title, kTitleFont) + kMargin});
  const double height = std::max(y, legend_bottom);
  return fmt::format(
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
             "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"{2}\">\n"
             "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
             "<text class=\"title\" x=\"{3}\" y=\"24\" font-size=\"{4}\">{5}</text>\n",
             std::ceil(width), std::ceil(height), kFont, kMargin, kTitleFont, Escape(title)) +
         body + "</svg>\n";
}

std::string SvgPlot(const PlotSpec& spec, const std::vector<PlotSeries>& series) {
  PlotPanel panel{spec, series};
  panel.spec.title.clear();
  return SvgFigure(spec.title, {panel});
}

Status WriteSvgFile(const std::string& path, const std::string& svg) {
  std::ofstream out(path);
  out << svg;
  if (!out) return Error(ErrorCode::kIo, "cannot write " + path);
  return Status::Ok();
}

Status WriteSvgPlot(const std::string& path, const PlotSpec& spec,
                    const std::vector<PlotSeries>& series) {
  return WriteSvgFile(path, SvgPlot(spec, series));
}

}  // namespace fusetune::cli
