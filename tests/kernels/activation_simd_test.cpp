// The vectorised activations against the C library in double precision,
// over lengths that leave every tail size, out of place and in place, and at
// the ends of their ranges (saturation, signed zeros, huge inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/rng.h"
#include "kernels/activation_simd.h"

namespace fusetune::kernels {
namespace {

double Want(Activation f, double x) {
  switch (f) {
    case Activation::kExp:
      return std::exp(std::min(std::max(x, -87.0), 88.0));
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kErf:
      return std::erf(x);
    case Activation::kSigmoid:
      return 1 / (1 + std::exp(-x));
    case Activation::kGeluErf:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x * (1 + std::tanh(0.7978845608 * (x + 0.044715 * x * x * x)));
    case Activation::kSilu:
      return x / (1 + std::exp(-x));
  }
  return 0;
}

// Absolute error for bounded results, relative for exp and the unbounded
// tails of the gated forms (|x| large: x itself).
void ExpectClose(Activation f, float x, float got) {
  const double want = Want(f, x);
  const double tolerance = 1e-6 + 2e-6 * std::fabs(want);
  EXPECT_NEAR(got, want, tolerance) << "activation " << static_cast<int>(f) << " at " << x;
}

constexpr Activation kAll[] = {Activation::kExp,     Activation::kTanh,    Activation::kErf,
                               Activation::kSigmoid, Activation::kGeluErf, Activation::kGeluTanh,
                               Activation::kSilu};

TEST(ActivationSimd, MatchesTheLibraryOverEveryTail) {
  for (Activation f : kAll)
    for (int64_t n = 0; n <= 40; ++n) {
      Rng rng(static_cast<uint64_t>(n) + 1);
      std::vector<float> in(n), out(n, -7.0f);
      for (float& x : in) x = static_cast<float>(3 * rng.Normal());
      Activate(f, in.data(), out.data(), n);
      for (int64_t j = 0; j < n; ++j) ExpectClose(f, in[j], out[j]);
      std::vector<float> same(in);  // in place
      Activate(f, same.data(), same.data(), n);
      EXPECT_EQ(same, out) << n;
    }
}

TEST(ActivationSimd, RangeEnds) {
  const std::vector<float> in = {0.0f,  -0.0f,  1e-30f, -1e-30f, 1e-4f, -1e-4f, 3.9f,  -3.9f,
                                 6.5f,  -6.5f,  20.0f,  -20.0f,  44.0f, -44.0f, 90.0f, -90.0f,
                                 1e10f, -1e10f, 1e30f,  -1e30f,  0.5f,  -0.5f,  2.0f,  -2.0f};
  for (Activation f : kAll) {
    std::vector<float> out(in.size());
    Activate(f, in.data(), out.data(), static_cast<int64_t>(in.size()));
    for (size_t j = 0; j < in.size(); ++j) {
      EXPECT_TRUE(std::isfinite(out[j])) << static_cast<int>(f) << " at " << in[j];
      if (std::fabs(in[j]) <= 90.0f) ExpectClose(f, in[j], out[j]);
    }
  }
}

// GELU's negative tail, 0.5 x erfc(|x| / sqrt 2) or x sigmoid(2u): tiny
// values whose relative accuracy 1 + erf(x) or 1 + tanh(u) would lose.
TEST(ActivationSimd, GeluTailKeepsRelativeAccuracy) {
  std::vector<float> in;
  for (float x = -5.5f; x <= -1.0f; x += 0.01f) in.push_back(x);
  for (Activation f : {Activation::kGeluErf, Activation::kGeluTanh}) {
    std::vector<float> out(in.size());
    Activate(f, in.data(), out.data(), static_cast<int64_t>(in.size()));
    for (size_t j = 0; j < in.size(); ++j) {
      const double want = Want(f, in[j]);
      EXPECT_NEAR(out[j], want, 1e-5 * std::fabs(want)) << static_cast<int>(f) << " at " << in[j];
    }
  }
}

// Far in the negative tail the gated activations are 0, not subnormal
// remnants of a clamped exponential, on every ISA (the portable forms
// returned x / (1 + e^88) there).
TEST(ActivationSimd, FarNegativeTailIsZero) {
  const std::vector<float> in = {-100.0f, -1e10f, -1e30f, -1e38f};
  for (Activation f :
       {Activation::kSigmoid, Activation::kSilu, Activation::kGeluErf, Activation::kGeluTanh}) {
    std::vector<float> out(in.size(), 1.0f);
    Activate(f, in.data(), out.data(), static_cast<int64_t>(in.size()));
    for (size_t j = 0; j < in.size(); ++j)
      EXPECT_EQ(out[j], 0.0f) << static_cast<int>(f) << " at " << in[j];
  }
}

// The epilogues' one pass of bias and activation is the two passes.
TEST(ActivationSimd, BiasedIsTheActivationOfTheSum) {
  for (Activation f : kAll)
    for (int64_t n : {0, 1, 15, 16, 17, 40}) {
      Rng rng(static_cast<uint64_t>(n) + 9);
      std::vector<float> in(n), bias(n), sum(n), want(n), got(n);
      for (int64_t j = 0; j < n; ++j) {
        in[j] = static_cast<float>(2 * rng.Normal());
        bias[j] = static_cast<float>(rng.Normal());
        sum[j] = in[j] + bias[j];
      }
      Activate(f, sum.data(), want.data(), n);
      ActivateBiased(f, in.data(), bias.data(), got.data(), n);
      EXPECT_EQ(got, want) << static_cast<int>(f) << " n=" << n;
    }
}

TEST(ActivationSimd, NanStaysNan) {
  const std::vector<float> in(19, NAN);
  for (Activation f : kAll) {
    std::vector<float> out(in.size(), 0.0f);
    Activate(f, in.data(), out.data(), static_cast<int64_t>(in.size()));
    for (float y : out) EXPECT_TRUE(std::isnan(y)) << static_cast<int>(f);
  }
}

TEST(ActivationSimd, SiluTimesIsTheGatedProduct) {
  for (int64_t n = 0; n <= 35; ++n) {
    Rng rng(static_cast<uint64_t>(n) + 100);
    std::vector<float> gate(n), up(n);
    for (float& x : gate) x = static_cast<float>(4 * rng.Normal());
    for (float& x : up) x = static_cast<float>(rng.Normal());
    std::vector<float> got(gate);
    SiluTimes(got.data(), up.data(), n);
    for (int64_t j = 0; j < n; ++j) {
      const double want = Want(Activation::kSilu, gate[j]) * up[j];
      EXPECT_NEAR(got[j], want, 1e-6 + 2e-6 * std::fabs(want)) << n;
    }
  }
}

}  // namespace
}  // namespace fusetune::kernels
