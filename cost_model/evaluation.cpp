#include "cost_model/evaluation.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "common/rng.h"

namespace fusetune::cost_model {

namespace {

std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {  // ties share their mean rank
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = (static_cast<double>(i + j)) / 2.0;
    i = j + 1;
  }
  return ranks;
}

double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n,
               mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : 0;
}

double PairwiseAccuracy(const std::vector<double>& predicted, const std::vector<double>& measured) {
  int64_t right = 0, total = 0;
  for (size_t i = 0; i < measured.size(); ++i)
    for (size_t j = i + 1; j < measured.size(); ++j) {
      if (measured[i] == measured[j]) continue;
      ++total;
      if ((predicted[i] < predicted[j]) == (measured[i] < measured[j])) ++right;
    }
  return total > 0 ? static_cast<double>(right) / static_cast<double>(total) : 1;
}

// The best measured time among the k best-predicted candidates.
double BestOfTopK(const std::vector<double>& predicted, const std::vector<double>& measured,
                  size_t k) {
  std::vector<size_t> order(predicted.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return predicted[a] < predicted[b]; });
  double best_picked = INFINITY;
  for (size_t i = 0; i < std::min(k, order.size()); ++i)
    best_picked = std::min(best_picked, measured[order[i]]);
  return best_picked;
}

double TopK(const std::vector<double>& predicted, const std::vector<double>& measured, size_t k) {
  return *std::min_element(measured.begin(), measured.end()) / BestOfTopK(predicted, measured, k);
}

double Regret(const std::vector<double>& predicted, const std::vector<double>& measured, size_t k) {
  return BestOfTopK(predicted, measured, k) / *std::min_element(measured.begin(), measured.end()) -
         1;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Per workload: (row indices).
std::vector<std::vector<int64_t>> RowsByWorkload(const Dataset& data) {
  std::vector<std::vector<int64_t>> rows(data.workload_keys.size());
  for (int64_t i = 0; i < data.size(); ++i) rows[data.y[i].workload].push_back(i);
  return rows;
}

RankingMetrics Rank(const Dataset& data, const std::vector<double>& predicted) {
  RankingMetrics m;
  m.samples = data.size();
  for (const auto& rows : RowsByWorkload(data)) {
    if (rows.size() < 2) continue;
    std::vector<double> p, y;
    for (int64_t i : rows) {
      p.push_back(predicted[i]);
      y.push_back(data.y[i].seconds);
    }
    m.spearman += Spearman(p, y);
    m.pairwise += PairwiseAccuracy(p, y);
    m.top1 += TopK(p, y, 1);
    m.top5 += TopK(p, y, 5);
    m.regret1 += Regret(p, y, 1);
    if (rows.size() > 8) {
      m.regret8 += Regret(p, y, 8);
      ++m.regret8_workloads;
    }
    ++m.workloads;
  }
  if (m.workloads > 0) {
    const double n = m.workloads;
    m.spearman /= n;
    m.pairwise /= n;
    m.top1 /= n;
    m.top5 /= n;
    m.regret1 /= n;
  }
  if (m.regret8_workloads > 0) m.regret8 /= m.regret8_workloads;
  return m;
}

}  // namespace

bool RankingMetrics::BetterThan(const RankingMetrics& o) const {
  if (std::abs(top1 - o.top1) > 1e-3) return top1 > o.top1;
  return spearman > o.spearman;
}

nlohmann::json MetricsToJson(const RankingMetrics& m) {
  return {{"spearman", m.spearman},
          {"pairwise_accuracy", m.pairwise},
          {"top1", m.top1},
          {"top5", m.top5},
          {"regret1", m.regret1},
          {"regret8", m.regret8},
          {"regret8_workloads", m.regret8_workloads},
          {"workloads", m.workloads},
          {"samples", m.samples},
          {"traffic_error", m.traffic_error},
          {"overhead_error", m.overhead_error},
          {"eta_error", m.eta_error},
          {"time_error", m.time_error}};
}

RankingMetrics Evaluate(const Dataset& data, const std::vector<Prediction>& predicted) {
  std::vector<double> seconds(predicted.size());
  for (size_t i = 0; i < predicted.size(); ++i) seconds[i] = predicted[i].seconds;
  RankingMetrics m = Rank(data, seconds);
  std::vector<double> traffic, overhead, eta, time;
  for (int64_t i = 0; i < data.size(); ++i) {
    const Sample& s = data.y[i];
    const Prediction& p = predicted[i];
    if (s.traffic_bytes > 0) traffic.push_back(std::abs(p.traffic_bytes / s.traffic_bytes - 1));
    if (s.overhead > 0) overhead.push_back(std::abs(p.overhead / s.overhead - 1));
    if (s.eta >= 0) eta.push_back(std::abs(p.eta - s.eta));
    if (s.seconds > 0) time.push_back(std::abs(p.seconds / s.seconds - 1));
  }
  m.traffic_error = Median(traffic);
  m.overhead_error = Median(overhead);
  m.eta_error = Median(eta);
  m.time_error = Median(time);
  return m;
}

RankingMetrics EvaluateRandom(const Dataset& data, int draws, uint64_t seed) {
  RankingMetrics sum;
  Rng rng(seed);
  for (int d = 0; d < draws; ++d) {
    std::vector<double> scores(data.size());
    for (double& s : scores) s = rng.Uniform();
    const RankingMetrics m = Rank(data, scores);
    sum.spearman += m.spearman / draws;
    sum.pairwise += m.pairwise / draws;
    sum.top1 += m.top1 / draws;
    sum.top5 += m.top5 / draws;
    sum.regret1 += m.regret1 / draws;
    sum.regret8 += m.regret8 / draws;
    sum.workloads = m.workloads;
    sum.regret8_workloads = m.regret8_workloads;
    sum.samples = m.samples;
  }
  return sum;
}

RowsAndTuning EvaluateWithTuning(const Dataset& data, const std::vector<Prediction>& predicted) {
  RowsAndTuning scored{Evaluate(data, predicted), std::nullopt};
  const std::vector<int64_t> rows = data.TuningRows();
  if (rows.empty()) return scored;
  std::vector<Prediction> tuning;
  for (int64_t row : rows) tuning.push_back(predicted[row]);
  const RankingMetrics m = Evaluate(data.Rows(rows), tuning);
  if (m.workloads > 0) scored.tuning = m;  // else no workload had two such rows
  return scored;
}

void MetricsMean::Add(const RankingMetrics& m) {
  if (m.workloads == 0) return;
  auto fold = [&](double* into, double v) { *into = (*into * splits_ + v) / (splits_ + 1); };
  fold(&sum_.spearman, m.spearman);
  fold(&sum_.pairwise, m.pairwise);
  fold(&sum_.top1, m.top1);
  fold(&sum_.top5, m.top5);
  fold(&sum_.regret1, m.regret1);
  fold(&sum_.regret8, m.regret8);
  fold(&sum_.traffic_error, m.traffic_error);
  fold(&sum_.overhead_error, m.overhead_error);
  fold(&sum_.eta_error, m.eta_error);
  fold(&sum_.time_error, m.time_error);
  sum_.regret8_workloads += m.regret8_workloads;
  sum_.workloads += m.workloads;
  sum_.samples += m.samples;
  ++splits_;
}

RankingMetrics MetricsMean::Get() const {
  RankingMetrics m = sum_;
  if (splits_ > 1) {
    m.workloads /= splits_;
    m.regret8_workloads /= splits_;
    m.samples /= splits_;
  }
  return m;
}

}  // namespace fusetune::cost_model
