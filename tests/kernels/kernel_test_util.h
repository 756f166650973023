// Helpers shared by the kernel tests: random inputs and the error of a kernel
// output against the reference executor's, relative to the output's scale.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/rng.h"
#include "graph/tensor.h"

namespace fusetune::kernels::testing {

inline std::vector<float> Random(int64_t n, Rng& rng, double scale = 1.0) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.Normal() * scale);
  return v;
}

// max |got - want| / max(max |want|, 1e-6).
inline double Error(const std::vector<float>& got, const graph::Tensor& want) {
  double err = 0, scale = 1e-6;
  for (int64_t i = 0; i < want.numel(); ++i) {
    err = std::max(err, std::abs(double(got[i]) - want.data<float>()[i]));
    scale = std::max(scale, std::abs(double(want.data<float>()[i])));
  }
  return err / scale;
}

}  // namespace fusetune::kernels::testing
