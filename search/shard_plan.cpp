#include "search/shard_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <numeric>

namespace fusetune::search {

namespace {

// Quotas in proportion to `weight`, each within [lo, hi], summing to about
// `budget`: tasks whose share would leave their bounds are pinned there and
// the rest share what is left (water-filling), then shares are rounded by
// largest remainder (ties to the lower index, so the result is fixed).
std::vector<int64_t> ProportionalQuotas(const std::vector<double>& weight,
                                        const std::vector<int64_t>& lo,
                                        const std::vector<int64_t>& hi, int64_t budget) {
  const size_t n = weight.size();
  std::vector<double> share(n, 0);
  std::vector<bool> pinned(n, false);
  for (size_t pass = 0; pass <= n; ++pass) {
    double free_weight = 0, left = static_cast<double>(budget);
    for (size_t i = 0; i < n; ++i) {
      if (pinned[i])
        left -= share[i];
      else
        free_weight += weight[i];
    }
    bool changed = false;
    for (size_t i = 0; i < n && !changed; ++i) {
      if (pinned[i]) continue;
      const double s = free_weight > 0 ? std::max(0.0, left) * weight[i] / free_weight : 0;
      if (s < lo[i] || s > hi[i]) {
        share[i] = std::clamp(s, double(lo[i]), double(hi[i]));
        pinned[i] = changed = true;
      } else {
        share[i] = s;
      }
    }
    if (!changed) break;
  }
  std::vector<int64_t> quota(n);
  std::vector<std::pair<double, size_t>> remainder;
  int64_t given = 0;
  for (size_t i = 0; i < n; ++i) {
    quota[i] = static_cast<int64_t>(std::floor(share[i]));
    given += quota[i];
    if (quota[i] < hi[i]) remainder.push_back({share[i] - double(quota[i]), i});
  }
  std::stable_sort(remainder.begin(), remainder.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t r = 0; r < remainder.size() && given < budget; ++r, ++given)
    ++quota[remainder[r].second];
  return quota;
}

struct Unit {
  std::string key;
  std::vector<int> tasks;
  double load = 0;
};

std::vector<Unit> UnitsOf(const std::vector<std::string>& keys,
                          const std::vector<std::string>& units, const std::vector<double>& load) {
  std::map<std::string, Unit> by_key;
  for (size_t t = 0; t < keys.size(); ++t) {
    Unit& u = by_key[units[t].empty() ? keys[t] : units[t]];
    u.tasks.push_back(static_cast<int>(t));
    u.load += load[t];
  }
  std::vector<Unit> out;
  for (auto& [key, u] : by_key) {
    u.key = key;
    std::sort(u.tasks.begin(), u.tasks.end(), [&](int a, int b) { return keys[a] < keys[b]; });
    out.push_back(std::move(u));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Unit& a, const Unit& b) { return a.load > b.load; });
  return out;
}

}  // namespace

int64_t ShardPlan::total_quota() const { return std::accumulate(quota.begin(), quota.end(), 0L); }

double EstimatedTrialSeconds(double run_seconds, const measure::MeasureOptions& options) {
  constexpr double kWorkerSeconds = 0.03;  // compile, inputs, the reference run's setup
  constexpr double kFlushSeconds = 5e-4;   // evicting a group's tensors before a repeat
  const double repeat = run_seconds + kFlushSeconds;
  const double mode = std::max(options.min_seconds, options.min_repeats * repeat);
  const int modes = options.measure_overlap ? 3 : 1;
  return kWorkerSeconds + (options.warmup_runs + 2) * run_seconds + modes * mode;
}

Result<ShardPlan> PlanShards(const std::vector<ShardTaskInfo>& tasks,
                             const ShardPlanOptions& options) {
  if (options.shards < 1)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("a job needs at least one shard (got {})", options.shards));
  if (tasks.empty()) return Error(ErrorCode::kInvalidArgument, "the models have no tuning task");
  const size_t n = tasks.size();
  std::vector<double> weight(n);
  std::vector<int64_t> lo(n), hi(n);
  int64_t searched = 0;
  for (size_t t = 0; t < n; ++t) searched += !tasks[t].reference;
  const int64_t references = static_cast<int64_t>(n) - searched;
  const int64_t budget = std::max<int64_t>(options.trials - references, 0);
  // The floor each searched task gets: min_trials, less when the budget
  // cannot give every task that much (but its first round, 2, always).
  const int64_t floor_trials =
      searched == 0 ? 0 : std::clamp<int64_t>(budget / searched, 2, options.min_trials);
  for (size_t t = 0; t < n; ++t) {
    const int64_t size = std::max<int64_t>(tasks[t].space_size, 1);
    const bool ref = tasks[t].reference;
    weight[t] = ref ? 0 : std::max(tasks[t].predicted_seconds, 1e-9) * tasks[t].occurrences;
    lo[t] = ref ? 1 : std::min(floor_trials, size);
    hi[t] = ref ? 1 : size;
  }
  ShardPlan plan;
  plan.quota = ProportionalQuotas(weight, lo, hi, budget + references);
  std::vector<double> load(n);
  for (size_t t = 0; t < n; ++t)
    load[t] = plan.quota[t] * EstimatedTrialSeconds(tasks[t].predicted_seconds, options.measure);
  std::vector<std::string> keys(n), units(n);
  for (size_t t = 0; t < n; ++t) {
    keys[t] = tasks[t].key;
    units[t] = tasks[t].unit;
  }
  LoadBalance balance = BalanceUnits(keys, units, load, options.shards);
  plan.shard.resize(n);
  for (size_t t = 0; t < n; ++t) plan.shard[t] = balance.bin[t] + 1;
  plan.load = std::move(balance.load);
  plan.order = std::move(balance.order);
  return plan;
}

LoadBalance BalanceUnits(const std::vector<std::string>& keys,
                         const std::vector<std::string>& units, const std::vector<double>& load,
                         int bins) {
  LoadBalance b;
  b.bin.assign(keys.size(), 0);
  b.load.assign(std::max(bins, 1), 0);
  b.order.resize(b.load.size());
  for (const Unit& u : UnitsOf(keys, units, load)) {
    const auto least = std::min_element(b.load.begin(), b.load.end());
    const int bin = static_cast<int>(least - b.load.begin());
    *least += u.load;
    for (int t : u.tasks) {
      b.bin[t] = bin;
      b.order[bin].push_back(t);
    }
  }
  return b;
}

int64_t WaveQuota(int64_t quota, int wave, int waves) {
  if (waves <= 1 || wave >= waves) return quota;
  return (quota * wave + waves - 1) / waves;
}

Result<std::pair<int, int>> ParseShardSpec(const std::string& text, const std::string& flag) {
  const auto slash = text.find('/');
  int i = 0, n = 0;
  const auto parse = [](std::string_view s, int* v) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && end == s.data() + s.size();
  };
  if (slash == std::string::npos || !parse(std::string_view(text).substr(0, slash), &i) ||
      !parse(std::string_view(text).substr(slash + 1), &n) || n < 1 || i < 1 || i > n)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("{} '{}': expected I/N with 1 <= I <= N (e.g. 2/8)", flag, text));
  return std::make_pair(i, n);
}

}  // namespace fusetune::search
