#include "cli/tune_summary.h"

#include <fmt/format.h>

#include <algorithm>

namespace fusetune::cli {

namespace {

std::string Ms(const std::optional<double>& s) {
  return s.has_value() ? fmt::format("{:.3f}", *s * 1e3) : "-";
}

std::string Ratio(const std::optional<double>& num, const std::optional<double>& den) {
  if (!num.has_value() || !den.has_value() || *den <= 0) return "-";
  return fmt::format("{:.2f}x", *num / *den);
}

double Weight(const search::TaskReport& t) {
  return static_cast<double>(t.occurrences) * t.best_seconds.value_or(0);
}

// What the showdown at the job's end decided (search/tuner.h: Showdown).
std::string ShowdownLine(const search::ShowdownReport& r) {
  const std::string head =
      fmt::format("  showdown {} plans x {} rounds head to head: ", r.plans, r.rounds);
  const double percent = 100 * (1 - r.ratio);
  if (r.winner)
    return head + fmt::format("record {}'s plan beat record {}'s by {:.1f}% (now record {})\n",
                              r.fastest_other, r.against, percent, *r.winner);
  return head + fmt::format("record {} held (record {}'s plan ran {:+.1f}% against it)\n",
                            r.against, r.fastest_other, -percent);
}

}  // namespace

std::string FormatTuneSummary(const search::TuneSummary& s, int max_rows) {
  std::string out;
  std::vector<const search::TaskReport*> tasks;
  for (const auto& t : s.tasks) tasks.push_back(&t);
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](auto* a, auto* b) { return Weight(*a) > Weight(*b); });
  out += fmt::format("{:<44} {:>4} {:>7} {:>11} {:>11} {:>8} {:>8} {:>7}\n", "group", "x", "trials",
                     "default ms", "best ms", "speedup", "traffic", "overlap");
  int shown = 0;
  for (const search::TaskReport* t : tasks) {
    if (shown++ == max_rows) {
      out += fmt::format("... {} more groups\n", tasks.size() - static_cast<size_t>(max_rows));
      break;
    }
    const std::string traffic = t->best_bytes > 0 && t->baseline_bytes > 0
                                    ? fmt::format("{:.2f}x", t->baseline_bytes / t->best_bytes)
                                    : "-";
    const std::string overlap = t->best_overlap >= 0 ? fmt::format("{:.2f}", t->best_overlap) : "-";
    out += fmt::format("{:<44} {:>4} {:>7} {:>11} {:>11} {:>8} {:>8} {:>7}{}\n",
                       t->summary.substr(0, 44), t->occurrences,
                       fmt::format("{}/{}", t->measured, t->space_size), Ms(t->baseline_seconds),
                       Ms(t->best_seconds), Ratio(t->baseline_seconds, t->best_seconds), traffic,
                       overlap, t->converged ? "" : " *");
  }
  out += "(speedup and traffic: default tiling over best; * not converged)\n\nwhole model:\n";
  auto seconds = [](const std::optional<search::PlanReport>& p) {
    return p.has_value() ? std::optional<double>(p->seconds) : std::nullopt;
  };
  const auto unfused = seconds(s.unfused), greedy = seconds(s.greedy), best = seconds(s.best);
  out += fmt::format("  unfused  {:>10} ms\n", Ms(unfused));
  out += fmt::format("  greedy   {:>10} ms  {} faster than unfused\n", Ms(greedy),
                     Ratio(unfused, greedy));
  out += fmt::format("  best     {:>10} ms  {} faster than unfused, {} than greedy ({} plan)\n",
                     Ms(best), Ratio(unfused, best), Ratio(greedy, best),
                     s.best.has_value() ? measure::PlanKindName(s.best->kind) : "-");
  if (s.best.has_value() && s.unfused.has_value() && s.best->bytes > 0)
    out += fmt::format("  traffic  {:.1f} MiB, {:.2f}x less than unfused\n",
                       s.best->bytes / 1048576, s.unfused->bytes / s.best->bytes);
  if (s.showdown) out += ShowdownLine(*s.showdown);
  out += fmt::format(
      "{} trials ({} failed), {} whole plans measured, {} model updates, {:.0f} s, "
      "stopped: {}\n",
      s.trials, s.failed_trials, s.plans.size(), s.model_updates, s.seconds,
      s.stop_reason.empty() ? "-" : s.stop_reason);
  return out;
}

}  // namespace fusetune::cli
