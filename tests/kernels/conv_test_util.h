// Helpers shared by the convolution tests: a double-precision reference
// convolution written from the definition (independent of graph/'s), the
// shapes every algorithm is checked on, and a runner that compares one
// algorithm and tiling against the reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/rng.h"
#include "kernels/conv.h"
#include "kernels/conv_winograd.h"
#include "kernels/estimate.h"
#include "kernels/layout.h"

namespace fusetune::kernels::testing {

// conv(x, w) + bias in double, then the epilogue's activations (a residual
// `r` of Y's shape, added before them when given).
inline std::vector<double> ReferenceConv(const ConvShape& s, const std::vector<float>& x,
                                         const std::vector<float>& w,
                                         const std::vector<float>& bias) {
  std::vector<double> y(s.batch * s.out_channels * s.pixels(), 0.0);
  const int64_t icg = s.in_per_group(), ocg = s.out_per_group();
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oc = 0; oc < s.out_channels; ++oc) {
      const int64_t g = oc / ocg;
      for (int64_t oh = 0; oh < s.out_h; ++oh)
        for (int64_t ow = 0; ow < s.out_w; ++ow) {
          double acc = bias.empty() ? 0.0 : bias[oc];
          for (int64_t ic = 0; ic < icg; ++ic)
            for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
              const int64_t ih = oh * s.stride_h - s.pad_top + kh * s.dilation_h;
              if (ih < 0 || ih >= s.in_h) continue;
              for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
                const int64_t iw = ow * s.stride_w - s.pad_left + kw * s.dilation_w;
                if (iw < 0 || iw >= s.in_w) continue;
                acc += double(x[((n * s.in_channels + g * icg + ic) * s.in_h + ih) * s.in_w + iw]) *
                       w[((oc * icg + ic) * s.kernel_h + kh) * s.kernel_w + kw];
              }
            }
          y[((n * s.out_channels + oc) * s.out_h + oh) * s.out_w + ow] = acc;
        }
    }
  return y;
}

// A shape with out_h/out_w from the window arithmetic (symmetric pads).
inline ConvShape MakeShape(int64_t batch, int64_t ic, int64_t h, int64_t w, int64_t oc, int64_t k,
                           int64_t stride = 1, int64_t pad = 0, int64_t dilation = 1,
                           int64_t groups = 1) {
  ConvShape s;
  s.batch = batch;
  s.in_channels = ic;
  s.in_h = h;
  s.in_w = w;
  s.out_channels = oc;
  s.kernel_h = h == 1 ? 1 : k;  // height 1: a 1-D convolution
  s.kernel_w = k;
  s.stride_h = h == 1 ? 1 : stride;
  s.stride_w = stride;
  s.pad_top = h == 1 ? 0 : pad;
  s.pad_left = pad;
  s.dilation_h = h == 1 ? 1 : dilation;
  s.dilation_w = dilation;
  s.groups = groups;
  s.out_h = (h + 2 * s.pad_top - s.dilation_h * (s.kernel_h - 1) - 1) / s.stride_h + 1;
  s.out_w = (w + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  return s;
}

// A tiling of algorithm `a` with every block and the micro-tile given.
inline ConvTiling Tiling(ConvAlgorithm a, int64_t oc, int64_t px, int64_t k, int mr = 8,
                         int nr = 32) {
  ConvTiling t;
  t.algorithm = a;
  t.oc_block = oc;
  t.pixel_block = px;
  t.k_block = k;
  t.mr = mr;
  t.nr = nr;
  return t;
}

// The tolerance every f32 algorithm is held to against the reference:
// Winograd's stated bounds (kernels/conv_winograd.h), 1e-5 for the others.
inline double ToleranceOf(ConvAlgorithm a) {
  if (a == ConvAlgorithm::kWinograd4) return kWinograd4Tolerance;
  if (a == ConvAlgorithm::kWinograd2) return kWinograd2Tolerance;
  return 1e-5;
}

struct ConvRun {
  double max_rel_error = 0;  // max |got - want| / max(max |want|, 1e-6)
  KernelStats stats;
};

// Random data for one conv (x, w, optional bias and residual) with its
// descriptor: a bias, then (with residual_relu) the residual Add and ReLU.
struct RandomConv {
  std::vector<float> x, w, b, r, y, packed;
  ConvDesc d;

  RandomConv(const ConvShape& s, bool bias, bool residual_relu, uint64_t seed, int64_t y_floats) {
    Rng rng(seed);
    auto random = [&](int64_t n) {
      std::vector<float> v(n);
      for (float& f : v) f = static_cast<float>(rng.Normal());
      return v;
    };
    x = random(s.batch * s.in_channels * s.in_h * s.in_w);
    w = random(s.out_channels * s.in_per_group() * s.kernel_h * s.kernel_w);
    if (bias) b = random(s.out_channels);
    if (residual_relu) r = random(s.batch * s.out_channels * s.pixels());
    y.assign(static_cast<size_t>(y_floats), -1.0f);
    d.shape = s;
    d.x = x.data();
    d.w = w.data();
    d.bias = bias ? b.data() : nullptr;
    d.y = y.data();
    if (residual_relu) {
      d.epilogue.push_back(EpilogueOp::Residual(r.data(), s.pixels(), s.out_channels * s.pixels()));
      d.epilogue.push_back(EpilogueOp::Act(EpilogueKind::kRelu));
    }
  }
  // The unpooled result in double (ReferenceConv, then the epilogue).
  std::vector<double> Want() const {
    std::vector<double> want = ReferenceConv(d.shape, x, w, b);
    if (!r.empty())
      for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, want[i] + r[i]);
    return want;
  }
  void PrePack(const ConvTiling& tiling) {
    const int64_t floats = PrePackedConvWeightFloats(d, tiling);
    if (floats == 0) return;
    packed.resize(static_cast<size_t>(floats));
    PrePackConvWeights(d, tiling, packed.data());
    d.w_packed = packed.data();
  }
  // Runs `tiling`; false (and a failed test) on a kernel error.
  bool Run(const ConvTiling& tiling, int threads, size_t local_bytes, ConvRun* run) {
    KernelConfig config;
    config.threads = threads;
    config.local_buffer_bytes = local_bytes;
    Result<KernelStats> stats = RunConv(d, tiling, config);
    EXPECT_TRUE(stats.ok()) << (stats.ok() ? "" : stats.error().message()) << " on "
                            << d.shape.ToString() << " " << tiling.ToString();
    run->max_rel_error = stats.ok() ? 0 : 1e9;
    if (stats.ok()) run->stats = *stats;
    return stats.ok();
  }
};

// Runs `tiling` on random data of `shape` (bias, optional residual and ReLU
// epilogue) and compares with ReferenceConv. Fails the test on a kernel error.
inline ConvRun RunAgainstReference(const ConvShape& shape, const ConvTiling& tiling,
                                   bool bias = true, bool residual_relu = false,
                                   bool prepack = true, int threads = 2,
                                   size_t local_bytes = 1 << 20, uint64_t seed = 7) {
  const ConvShape& s = shape;
  RandomConv c(s, bias, residual_relu, seed, s.batch * s.out_channels * s.pixels());
  const std::vector<double> want = c.Want();
  if (prepack) c.PrePack(tiling);
  ConvRun run;
  if (!c.Run(tiling, threads, local_bytes, &run)) return run;
  double err = 0, scale = 1e-6;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(double(c.y[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  run.max_rel_error = err / scale;
  return run;
}

// Runs `tiling` with a global pool after a bias (and optionally a residual
// and ReLU) on random data and compares the pooled [batch, out_channels]
// with ReferenceConv's planes pooled in double. The error is relative to
// the unpooled output's largest magnitude, the scale the algorithms'
// tolerances are stated in (an average of rounding errors is no larger).
inline ConvRun RunPooledAgainstReference(const ConvShape& s, const ConvTiling& tiling,
                                         ConvGlobalPool pool, bool residual_relu = false,
                                         int threads = 2, bool prepack = true, uint64_t seed = 5) {
  RandomConv c(s, /*bias=*/true, residual_relu, seed, s.batch * s.out_channels);
  c.d.global_pool = pool;
  const std::vector<double> full = c.Want();
  if (prepack) c.PrePack(tiling);
  ConvRun run;
  if (!c.Run(tiling, threads, 1 << 20, &run)) return run;
  double err = 0, scale = 1e-6;
  for (double v : full) scale = std::max(scale, std::abs(v));
  for (int64_t plane = 0; plane < s.batch * s.out_channels; ++plane) {
    const double* p = full.data() + plane * s.pixels();
    double want = pool == ConvGlobalPool::kMax ? p[0] : 0.0;
    for (int64_t i = 0; i < s.pixels(); ++i)
      want = pool == ConvGlobalPool::kMax ? std::max(want, p[i]) : want + p[i];
    if (pool != ConvGlobalPool::kMax) want /= static_cast<double>(s.pixels());
    err = std::max(err, std::abs(double(c.y[plane]) - want));
  }
  run.max_rel_error = err / scale;
  return run;
}

// Copy-only runs count what full runs count and leave the arithmetic out;
// compute-only runs copy nothing but compute every tile.
inline void ExpectModeCountsAlike(const Result<KernelStats>& full, const Result<KernelStats>& copy,
                                  const Result<KernelStats>& compute) {
  ASSERT_TRUE(full.ok() && copy.ok() && compute.ok());
  EXPECT_EQ(copy->bytes_global_to_local, full->bytes_global_to_local);
  EXPECT_EQ(copy->bytes_local_to_global, full->bytes_local_to_global);
  EXPECT_EQ(compute->bytes_global_to_local, 0);
  EXPECT_EQ(compute->bytes_local_to_global, 0);
  EXPECT_EQ(compute->tiles, full->tiles);
}

// ExpectModeCountsAlike on one conv (ones everywhere: no data dependence),
// its weights pre-packed when asked.
inline void ExpectRunModesCountAlike(const ConvShape& s, const ConvTiling& t,
                                     ConvGlobalPool pool = ConvGlobalPool::kNone,
                                     bool prepack = false) {
  std::vector<float> x(s.batch * s.in_channels * s.in_h * s.in_w, 1.0f);
  std::vector<float> w(s.out_channels * s.in_per_group() * s.kernel_h * s.kernel_w, 1.0f);
  std::vector<float> b(s.out_channels, 1.0f), y(s.batch * s.out_channels * s.pixels());
  ConvDesc d;
  d.shape = s;
  d.x = x.data();
  d.w = w.data();
  d.bias = b.data();
  d.y = y.data();
  d.global_pool = pool;
  std::vector<float> packed;
  if (prepack) {
    packed.resize(static_cast<size_t>(PrePackedConvWeightFloats(d, t)));
    PrePackConvWeights(d, t, packed.data());
    d.w_packed = packed.data();
  }
  KernelConfig config;
  ExpectModeCountsAlike(RunConv(d, t, config, RunMode::kFull),
                        RunConv(d, t, config, RunMode::kCopyOnly),
                        RunConv(d, t, config, RunMode::kComputeOnly));
}

// A bf16 tiling's outputs (bias, residual, ReLU) differ from its f32
// twin's on the same data: the operands really are rounded.
inline void ExpectBf16DiffersFromF32(const ConvShape& s, const ConvTiling& bf16) {
  ConvTiling f32 = bf16;
  f32.precision = Precision::kF32;
  RandomConv a(s, true, true, 5, s.batch * s.out_channels * s.pixels());
  RandomConv b(s, true, true, 5, s.batch * s.out_channels * s.pixels());
  ConvRun ra, rb;
  ASSERT_TRUE(a.Run(bf16, 2, 1 << 20, &ra));
  ASSERT_TRUE(b.Run(f32, 2, 1 << 20, &rb));
  EXPECT_NE(a.y, b.y) << "bf16 rounds: the outputs differ from f32's";
}

// The estimate of `t` on random data of `s` (pre-packed or not) counts
// the bytes and the local buffer that runs on 1 and 2 threads count.
inline void ExpectEstimateCountsWhatRunsCount(const ConvShape& s, const ConvTiling& t,
                                              bool prepack) {
  RandomConv c(s, true, false, 1, s.batch * s.out_channels * s.pixels());
  if (prepack) c.PrePack(t);
  for (int threads : {1, 2}) {
    ConvRun run;
    ASSERT_TRUE(c.Run(t, threads, 1 << 20, &run));
    const TilingEstimate e = EstimateConv(c.d, t, threads);
    EXPECT_EQ(e.bytes_in, static_cast<double>(run.stats.bytes_global_to_local));
    EXPECT_EQ(e.bytes_out, static_cast<double>(run.stats.bytes_local_to_global));
    EXPECT_EQ(e.local_bytes, ConvLocalBytes(c.d, t));
  }
}

// The largest ratio of |y - exact| to the bound a bf16 convolution (im2col
// or direct) is held to, the bf16 GEMM's (docs/PRECISION.md):
// (2u + u^2 + K 2^-23) sum |w||x| with u = 2^-8, plus the f32 roundings of
// the bias, the residual and the copy out (a few 2^-24 of what they add).
// <= 1 passes. Fails the test on a kernel error (returns 1e9).
inline double Bf16WorstBoundRatio(const ConvShape& s, const ConvTiling& tiling, bool prepack,
                                  bool residual_relu, int threads = 2) {
  RandomConv c(s, /*bias=*/true, residual_relu, 11, s.batch * s.out_channels * s.pixels());
  const std::vector<double> want = c.Want();
  std::vector<float> ax(c.x.size()), aw(c.w.size());
  for (size_t i = 0; i < ax.size(); ++i) ax[i] = std::abs(c.x[i]);
  for (size_t i = 0; i < aw.size(); ++i) aw[i] = std::abs(c.w[i]);
  const std::vector<double> magnitude = ReferenceConv(s, ax, aw, {});
  if (prepack) c.PrePack(tiling);
  ConvRun run;
  if (!c.Run(tiling, threads, 1 << 20, &run)) return 1e9;
  const double u = std::ldexp(1.0, -8);
  const double k = static_cast<double>(s.in_per_group() * s.kernel_h * s.kernel_w);
  const double per_product = 2 * u + u * u + k * std::ldexp(1.0, -23);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const int64_t oc = static_cast<int64_t>(i) / s.pixels() % s.out_channels;
    const double added = std::abs(c.b[oc]) + (c.r.empty() ? 0.0 : std::abs(c.r[i]));
    const double bound =
        per_product * magnitude[i] + 4 * std::ldexp(1.0, -24) * (magnitude[i] + added) + 1e-30;
    worst = std::max(worst, std::abs(double(c.y[i]) - want[i]) / bound);
  }
  return worst;
}

// `data` rearranged between NCHW and `layout` by the index arithmetic
// alone: into the layout, or (to_nchw) back out of it.
inline std::vector<float> Rearrange(const std::vector<float>& data, const ActivationDims& d,
                                    ActivationLayout layout, bool to_nchw) {
  std::vector<float> out(data.size());
  for (int64_t n = 0; n < d.batch; ++n)
    for (int64_t c = 0; c < d.channels; ++c)
      for (int64_t h = 0; h < d.height; ++h)
        for (int64_t w = 0; w < d.width; ++w) {
          const int64_t nchw = ((n * d.channels + c) * d.height + h) * d.width + w;
          const int64_t laid = ElementIndex(layout, d, n, c, h, w);
          out[to_nchw ? nchw : laid] = data[to_nchw ? laid : nchw];
        }
  return out;
}

inline std::vector<float> ToLayout(const std::vector<float>& nchw, const ActivationDims& d,
                                   ActivationLayout layout) {
  return Rearrange(nchw, d, layout, false);
}

inline std::vector<float> FromLayout(const std::vector<float>& data, const ActivationDims& d,
                                     ActivationLayout layout) {
  return Rearrange(data, d, layout, true);
}

}  // namespace fusetune::kernels::testing
