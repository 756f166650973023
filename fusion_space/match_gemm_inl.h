// Template part of match_gemm.h: activation fitting.
#pragma once

#include <cmath>
#include <utility>
#include <vector>

namespace fusetune::fusion_space {

namespace match_detail {
double ReferenceActivation(kernels::EpilogueKind kind, double x);
}  // namespace match_detail

template <typename F>
ActivationFit FitActivation(F&& f) {
  using kernels::EpilogueKind;
  std::vector<double> xs, fs;
  for (int i = -40; i <= 40; ++i) {
    const double x = i * 0.15 + 0.013;
    xs.push_back(x);
    fs.push_back(f(x));
  }
  for (double v : fs)
    if (!std::isfinite(v)) return {};
  auto fit = [&](auto&& act) -> std::pair<bool, double> {
    double num = 0, den = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      num += fs[i] * act(xs[i]);
      den += act(xs[i]) * act(xs[i]);
    }
    if (den == 0) return {false, 0};
    const double s = num / den;
    for (size_t i = 0; i < xs.size(); ++i)
      if (std::abs(fs[i] - s * act(xs[i])) > 2e-5 * (1 + std::abs(fs[i]))) return {false, 0};
    return {s != 0, s};
  };
  if (auto [ok, s] = fit([](double x) { return x; }); ok)
    return {true, true, EpilogueKind::kScale, s};
  for (EpilogueKind kind : {EpilogueKind::kRelu, EpilogueKind::kGeluErf, EpilogueKind::kGeluTanh,
                            EpilogueKind::kSilu, EpilogueKind::kSigmoid, EpilogueKind::kHardSwish})
    if (auto [ok, s] = fit([kind](double x) { return match_detail::ReferenceActivation(kind, x); });
        ok)
      return {true, false, kind, s};
  return {};
}

}  // namespace fusetune::fusion_space
