// Axis ticks people read at a glance, for the SVG plots of `fusetune report`:
// linear axes step by 1, 2 or 5 times a power of ten (0, 50, 100, 150), log
// axes mark decades with 2 and 5 between them while the range is short, and
// labels are plain decimals (0.003, 250) rather than exponents. Pure
// functions, so the tests pin them down without drawing anything.
#pragma once

#include <string>
#include <vector>

namespace fusetune::cli {

struct AxisTicks {
  double lo = 0, hi = 1;       // the axis range: the data's, widened to ticks
  std::vector<double> values;  // ascending, all within [lo, hi]
};

// The 1-2-5 step that cuts [lo, hi] into about `target` intervals.
double NiceStep(double lo, double hi, int target = 5);

// Linear axis over data in [lo, hi]: the range widened to multiples of the
// step; an axis over non-negative data whose low end is near 0 starts at 0.
AxisTicks LinearTicks(double lo, double hi, int target = 5);

// Log axis over positive data in [lo, hi]: the range widened to the nearest
// 1-2-5 values; ticks at decades (every second or more when there are many),
// with 2 and 5 inside them when the range spans at most two decades, and with
// every digit when 1-2-5 would leave fewer than three ticks.
AxisTicks LogTicks(double lo, double hi);

// A tick's label: as many decimals as the ticks' spacing needs (`step` on a
// linear axis; on a log axis, the tick itself) and no more; exponents only
// outside [1e-4, 1e7).
std::string FormatTick(double value, double step);

// Width in pixels of `text` in a sans-serif font of `font_size` pixels, an
// upper bound for ordinary text (what sizes the margins and the legend).
double TextWidth(const std::string& text, double font_size);

}  // namespace fusetune::cli
