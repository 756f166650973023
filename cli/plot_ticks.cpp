#include "cli/plot_ticks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>

namespace fusetune::cli {

namespace {

constexpr double kEps = 1e-9;

// The largest m * 10^d <= v with m in `mantissas` (ascending, starting at 1).
double SnapDown(double v, const std::vector<double>& mantissas) {
  const double decade = std::pow(10.0, std::floor(std::log10(v) + kEps));
  double best = decade;
  for (double m : mantissas)
    if (m * decade <= v * (1 + kEps)) best = m * decade;
  return best;
}

// The smallest m * 10^d >= v with m in `mantissas` or 10.
double SnapUp(double v, const std::vector<double>& mantissas) {
  const double decade = std::pow(10.0, std::floor(std::log10(v) + kEps));
  for (double m : mantissas)
    if (m * decade >= v * (1 - kEps)) return m * decade;
  return 10 * decade;
}

// Every m * 10^d within [lo, hi], ascending.
std::vector<double> LogValues(double lo, double hi, const std::vector<double>& mantissas) {
  std::vector<double> out;
  const int d0 = static_cast<int>(std::floor(std::log10(lo) + kEps));
  const int d1 = static_cast<int>(std::floor(std::log10(hi) + kEps));
  for (int d = d0; d <= d1; ++d)
    for (double m : mantissas) {
      const double v = m * std::pow(10.0, d);
      if (v >= lo * (1 - kEps) && v <= hi * (1 + kEps)) out.push_back(v);
    }
  return out;
}

}  // namespace

double NiceStep(double lo, double hi, int target) {
  const double range = hi - lo;
  if (!(range > 0) || !std::isfinite(range)) return 1;
  target = std::max(target, 1);
  // Of the 1-2-5 steps around range / target, the one whose count of
  // intervals comes nearest the target (the larger on a tie).
  const double decade = std::pow(10.0, std::floor(std::log10(range / target)));
  double best = 10 * decade;
  for (double m : {5.0, 2.0, 1.0}) {
    const double step = m * decade;
    if (std::fabs(range / step - target) < std::fabs(range / best - target) - kEps) best = step;
  }
  return best;
}

AxisTicks LinearTicks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double half = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= half, hi += half;
  }
  // Counts and times whose low end comes near 0 start there.
  if (lo >= 0 && lo < (hi - lo) * 0.05) lo = 0;
  AxisTicks t;
  const double step = NiceStep(lo, hi, target);
  t.lo = std::floor(lo / step + kEps) * step;
  t.hi = std::ceil(hi / step - kEps) * step;
  const int n = static_cast<int>(std::lround((t.hi - t.lo) / step));
  for (int i = 0; i <= n; ++i) {
    const double v = t.lo + i * step;
    t.values.push_back(std::fabs(v) < step * kEps ? 0.0 : v);
  }
  return t;
}

AxisTicks LogTicks(double lo, double hi) {
  if (!(lo > 0) || !std::isfinite(lo)) lo = 1;
  if (!(hi > 0) || !std::isfinite(hi)) hi = lo * 10;
  if (hi < lo) std::swap(lo, hi);
  AxisTicks t;
  const std::vector<double> decades{1}, one_two_five{1, 2, 5}, digits{1, 2, 3, 4, 5, 6, 7, 8, 9};
  t.lo = SnapDown(lo, one_two_five);
  t.hi = SnapUp(hi, one_two_five);
  if (t.hi <= t.lo) t.hi = SnapUp(t.lo * (1 + 1e-6), one_two_five);
  if (std::log10(t.hi / t.lo) > 2 + kEps) {
    t.lo = SnapDown(lo, decades);
    t.hi = SnapUp(hi, decades);
    const int n = static_cast<int>(std::lround(std::log10(t.hi / t.lo)));
    const int every = (n + 7) / 8;  // at most about eight labelled decades
    for (int i = 0; i <= n; i += every) t.values.push_back(t.lo * std::pow(10.0, i));
    return t;
  }
  t.values = LogValues(t.lo, t.hi, one_two_five);
  if (t.values.size() < 3) {
    t.lo = SnapDown(lo, digits);
    t.hi = SnapUp(hi, digits);
    if (t.hi <= t.lo) t.hi = SnapUp(t.lo * (1 + 1e-6), digits);
    t.values = LogValues(t.lo, t.hi, digits);
  }
  return t;
}

std::string FormatTick(double value, double step) {
  if (value == 0) return "0";
  const double size = std::fabs(value);
  if (size >= 1e7 || size < 1e-4) {
    std::string s = fmt::format("{:.3g}", value);  // 1e+08, 2.5e-05
    for (const char* from : {"e+0", "e+", "e-0"}) {
      const size_t at = s.find(from);
      if (at != std::string::npos) {
        s.replace(at, std::string(from).size(), from[1] == '-' ? "e-" : "e");
        break;
      }
    }
    return s;
  }
  const double spacing = step > 0 ? step : size;
  const int decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(spacing) - kEps)), 0, 12);
  return fmt::format("{:.{}f}", value, decimals);
}

double TextWidth(const std::string& text, double font_size) {
  double em = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) == 0x80) continue;  // a UTF-8 continuation byte: counted with its lead
    if (std::string_view("iljtfr.,:;'|!I ()[]").find(static_cast<char>(c)) !=
        std::string_view::npos)
      em += 0.4;
    else if (c == 'm' || c == 'w' || c == 'M' || c == 'W' || c == '@' || c == '%')
      em += 1.0;
    else if (std::isupper(c))
      em += 0.78;
    else
      em += 0.66;
  }
  return em * font_size;
}

}  // namespace fusetune::cli
