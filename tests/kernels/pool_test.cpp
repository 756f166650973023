// kernels/pool.h against a double reference written from ONNX's definition
// (as graph/ops_conv.cpp computes it): max and average pools over strides,
// pads, dilations, ceil_mode output sizes, count_include_pad both ways, 1-D
// pools and odd sizes; global pools; threads and tilings; run modes; the
// estimate against what a run counts; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/rng.h"
#include "kernels/estimate.h"
#include "kernels/pool.h"

namespace fusetune::kernels {
namespace {

struct Window {
  int64_t k_h = 3, k_w = 3, s_h = 1, s_w = 1, p_top = 0, p_left = 0, p_bottom = 0, p_right = 0,
          d_h = 1, d_w = 1;
  bool ceil_mode = false;
};

// The output size along one axis, as ONNX (and graph/ResolveWindow) gives it.
int64_t OutSize(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d, bool ceil) {
  const int64_t span = in + pb + pe - ((k - 1) * d + 1);
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + pb) --out;
  return out;
}

PoolDesc MakePool(PoolKind kind, int64_t batch, int64_t c, int64_t h, int64_t w, const Window& win,
                  bool include_pad = false) {
  PoolDesc d;
  d.kind = kind;
  d.batch = batch;
  d.channels = c;
  d.in_h = h;
  d.in_w = w;
  d.kernel_h = win.k_h;
  d.kernel_w = win.k_w;
  d.stride_h = win.s_h;
  d.stride_w = win.s_w;
  d.pad_top = win.p_top;
  d.pad_left = win.p_left;
  d.pad_bottom = win.p_bottom;
  d.pad_right = win.p_right;
  d.dilation_h = win.d_h;
  d.dilation_w = win.d_w;
  d.count_include_pad = include_pad;
  d.out_h = OutSize(h, win.k_h, win.s_h, win.p_top, win.p_bottom, win.d_h, win.ceil_mode);
  d.out_w = OutSize(w, win.k_w, win.s_w, win.p_left, win.p_right, win.d_w, win.ceil_mode);
  return d;
}

Window Square(int64_t k, int64_t s, int64_t p, int64_t dil = 1, bool ceil = false) {
  return Window{k, k, s, s, p, p, p, p, dil, dil, ceil};
}

std::vector<double> Reference(const PoolDesc& d, const std::vector<float>& x) {
  const int64_t planes = d.batch * d.channels;
  if (IsGlobalPool(d.kind)) {
    std::vector<double> y(planes);
    const int64_t n = d.in_h * d.in_w;
    for (int64_t p = 0; p < planes; ++p) {
      double r = d.kind == PoolKind::kGlobalMax ? -INFINITY : 0.0;
      for (int64_t i = 0; i < n; ++i)
        r = d.kind == PoolKind::kGlobalMax ? std::max(r, double(x[p * n + i])) : r + x[p * n + i];
      y[p] = d.kind == PoolKind::kGlobalMax ? r : r / double(n);
    }
    return y;
  }
  std::vector<double> y(planes * d.out_h * d.out_w);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oh = 0; oh < d.out_h; ++oh)
      for (int64_t ow = 0; ow < d.out_w; ++ow) {
        double best = -INFINITY, sum = 0;
        int64_t count = 0, padded = 0;
        for (int64_t kh = 0; kh < d.kernel_h; ++kh) {
          const int64_t ih = oh * d.stride_h - d.pad_top + kh * d.dilation_h;
          if (ih >= d.in_h + d.pad_bottom) break;
          for (int64_t kw = 0; kw < d.kernel_w; ++kw) {
            const int64_t iw = ow * d.stride_w - d.pad_left + kw * d.dilation_w;
            if (iw >= d.in_w + d.pad_right) break;
            ++padded;
            if (ih < 0 || ih >= d.in_h || iw < 0 || iw >= d.in_w) continue;
            const double v = x[(p * d.in_h + ih) * d.in_w + iw];
            best = std::max(best, v);
            sum += v;
            ++count;
          }
        }
        const int64_t div = d.count_include_pad ? padded : count;
        y[(p * d.out_h + oh) * d.out_w + ow] =
            d.kind == PoolKind::kMax ? best : (div > 0 ? sum / double(div) : 0.0);
      }
  return y;
}

struct PoolRun {
  double max_error = 0;  // |got - want| / max(1, |want|); infinities must match exactly
  KernelStats stats;
};

PoolRun RunAgainstReference(PoolDesc d, const PoolTiling& t, int threads = 2,
                            RunMode mode = RunMode::kFull, uint64_t seed = 3) {
  Rng rng(seed);
  std::vector<float> x(d.batch * d.channels * d.in_h * d.in_w);
  for (float& f : x) f = static_cast<float>(rng.Normal());
  const int64_t out_plane = IsGlobalPool(d.kind) ? 1 : d.out_h * d.out_w;
  std::vector<float> y(d.batch * d.channels * out_plane, 12345.0f);
  d.x = x.data();
  d.y = y.data();
  KernelConfig config;
  config.threads = threads;
  config.local_buffer_bytes = 1 << 20;
  Result<KernelStats> stats = RunPool(d, t, config, mode);
  EXPECT_TRUE(stats.ok()) << stats.error().message();
  PoolRun run;
  if (!stats.ok()) return run;
  run.stats = *stats;
  if (mode != RunMode::kFull) return run;
  const std::vector<double> want = Reference(d, x);
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i])) {
      if (double(y[i]) != want[i]) run.max_error = INFINITY;
      continue;
    }
    run.max_error = std::max(run.max_error,
                             std::abs(double(y[i]) - want[i]) / std::max(1.0, std::abs(want[i])));
  }
  return run;
}

constexpr double kPoolTolerance = 2e-6;

const PoolTiling kTilings[] = {{16, 8}, {3, 1}, {64, 100}, {5, 3}};

TEST(Pool, ResNetStemScaledDown) {
  for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage})
    for (const PoolTiling& t : kTilings)
      for (int threads : {1, 2}) {
        const PoolDesc d = MakePool(kind, 1, 20, 30, 30, Square(3, 2, 1));
        EXPECT_EQ(d.out_h, 15);
        EXPECT_LT(RunAgainstReference(d, t, threads).max_error, kPoolTolerance)
            << d.ToString() << " " << t.ToString() << " threads " << threads;
      }
}

TEST(Pool, StridesPadsDilationsCeilModeAndIncludePad) {
  for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage})
    for (bool include_pad : {false, true})
      for (int64_t k : {1, 2, 3, 5})
        for (int64_t s : {1, 2, 3})
          for (int64_t p : {0, 1, 2})
            for (int64_t dil : {1, 2})
              for (bool ceil : {false, true}) {
                if (p >= (k - 1) * dil + 1) continue;  // a window wholly in the padding: below
                const PoolDesc d =
                    MakePool(kind, 2, 17, 13, 37, Square(k, s, p, dil, ceil), include_pad);
                for (const PoolTiling& t : {PoolTiling{16, 4}, PoolTiling{7, 1}})
                  EXPECT_LT(RunAgainstReference(d, t).max_error, kPoolTolerance)
                      << d.ToString() << " " << t.ToString();
              }
}

TEST(Pool, CeilModeShapes) {
  // 2x2 stride 2 over 5: floor 2, ceil 3 (the last window half past the input).
  PoolDesc d = MakePool(PoolKind::kMax, 1, 3, 5, 5, Square(2, 2, 0, 1, true));
  EXPECT_EQ(d.out_h, 3);
  EXPECT_EQ(MakePool(PoolKind::kMax, 1, 3, 5, 5, Square(2, 2, 0)).out_h, 2);
  // 2x2 stride 2 over 4 with an end pad of 1 and ceil_mode: the third window
  // would start in the end pad and is dropped.
  EXPECT_EQ(MakePool(PoolKind::kMax, 1, 3, 4, 4, Window{2, 2, 2, 2, 0, 0, 1, 1, 1, 1, true}).out_h,
            2);
  for (bool include_pad : {false, true}) {
    d = MakePool(PoolKind::kAverage, 1, 3, 5, 7, Square(2, 2, 0, 1, true), include_pad);
    EXPECT_LT(RunAgainstReference(d, PoolTiling{2, 2}).max_error, kPoolTolerance) << d.ToString();
  }
}

TEST(Pool, AsymmetricPadsAndWindowsInThePadding) {
  Window w{3, 2, 2, 1, 2, 0, 1, 3, 1, 1, false};
  for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage})
    for (bool include_pad : {false, true}) {
      const PoolDesc d = MakePool(kind, 1, 5, 9, 11, w, include_pad);
      EXPECT_LT(RunAgainstReference(d, PoolTiling{4, 3}).max_error, kPoolTolerance) << d.ToString();
    }
  // Pads as wide as the kernel: corner windows read no input (max -inf, average 0).
  for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage}) {
    const PoolDesc d = MakePool(kind, 1, 3, 6, 6, Square(2, 1, 2));
    EXPECT_LT(RunAgainstReference(d, PoolTiling{16, 8}).max_error, kPoolTolerance) << d.ToString();
  }
}

TEST(Pool, OneDimensionalAsHeightOne) {
  for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage})
    for (int64_t s : {1, 2}) {
      const PoolDesc d = MakePool(kind, 2, 6, 1, 51, Window{1, 3, 1, s, 0, 1, 0, 1, 1, 1, false});
      EXPECT_EQ(d.out_h, 1);
      EXPECT_LT(RunAgainstReference(d, PoolTiling{4, 8}).max_error, kPoolTolerance) << d.ToString();
    }
}

TEST(Pool, WideRowsAndChannelsNotMultiplesOfSixteen) {
  // Rows wider than one 64-column block, stride 2 and 3.
  for (int64_t s : {1, 2, 3}) {
    const PoolDesc d = MakePool(PoolKind::kMax, 1, 19, 9, 301, Square(3, s, 1));
    for (int threads : {1, 2})
      EXPECT_LT(RunAgainstReference(d, PoolTiling{16, 2}, threads).max_error, kPoolTolerance)
          << d.ToString();
  }
}

TEST(Pool, GlobalPools) {
  for (PoolKind kind : {PoolKind::kGlobalMax, PoolKind::kGlobalAverage})
    for (auto [c, h, w] : {std::tuple{2048, 7, 7}, std::tuple{19, 1, 1}, std::tuple{5, 1, 50},
                           std::tuple{33, 13, 11}, std::tuple{3, 16, 8}})
      for (const PoolTiling& t : kTilings)
        for (int threads : {1, 2}) {
          PoolDesc d = MakePool(kind, 2, c, h, w, Square(1, 1, 0));
          EXPECT_LT(RunAgainstReference(d, t, threads).max_error, kPoolTolerance)
              << d.ToString() << " " << t.ToString();
        }
}

TEST(Pool, RunModesCountWhatFullRunsCount) {
  for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage, PoolKind::kGlobalAverage}) {
    const PoolDesc d = MakePool(kind, 2, 20, 17, 17, Square(3, 2, 1));
    const PoolTiling t{8, 3};
    const KernelStats full = RunAgainstReference(d, t, 2, RunMode::kFull).stats;
    const KernelStats copy = RunAgainstReference(d, t, 2, RunMode::kCopyOnly).stats;
    const KernelStats compute = RunAgainstReference(d, t, 2, RunMode::kComputeOnly).stats;
    EXPECT_GT(full.bytes_global_to_local, 0);
    EXPECT_EQ(copy.bytes_global_to_local, full.bytes_global_to_local);
    EXPECT_EQ(copy.bytes_local_to_global, full.bytes_local_to_global);
    EXPECT_EQ(compute.bytes_global_to_local, 0);
    EXPECT_EQ(compute.bytes_local_to_global, 0);
    EXPECT_EQ(copy.tiles, full.tiles);
    EXPECT_EQ(compute.tiles, full.tiles);
  }
}

TEST(Pool, EstimateMatchesWhatARunCounts) {
  const PoolDesc descs[] = {
      MakePool(PoolKind::kMax, 1, 64, 112, 112, Square(3, 2, 1)),
      MakePool(PoolKind::kAverage, 2, 17, 13, 37, Square(3, 1, 1, 2, true), true),
      MakePool(PoolKind::kMax, 1, 5, 9, 11, Window{3, 2, 2, 1, 2, 0, 1, 3, 1, 1, false}),
      MakePool(PoolKind::kGlobalAverage, 1, 2048, 7, 7, Square(1, 1, 0)),
      MakePool(PoolKind::kGlobalMax, 3, 10, 5, 3, Square(1, 1, 0))};
  for (const PoolDesc& d : descs)
    for (const PoolTiling& t : kTilings)
      for (int threads : {1, 2}) {
        if (PoolLocalBytes(d, t) > (1 << 20)) continue;  // the runs' local buffer
        const KernelStats stats = RunAgainstReference(d, t, threads).stats;
        const TilingEstimate e = EstimatePool(d, t, threads);
        EXPECT_EQ(e.bytes_in, static_cast<double>(stats.bytes_global_to_local)) << d.ToString();
        EXPECT_EQ(e.bytes_out, static_cast<double>(stats.bytes_local_to_global)) << d.ToString();
        EXPECT_EQ(e.tiles, stats.tiles) << d.ToString();
        EXPECT_EQ(e.local_bytes, PoolLocalBytes(d, t));
        EXPECT_GE(e.max_thread_tiles * threads, e.tiles);
        EXPECT_GT(e.max_thread_work, 0.0);
        EXPECT_LE(e.max_thread_work, 1.0);
        EXPECT_GT(e.lane_utilisation, 0.0);
        EXPECT_LE(e.lane_utilisation, 1.0);
      }
  // The stem pool reads each input row about once per band: no more than
  // the input plus the halo rows of 7 bands.
  const PoolDesc stem = descs[0];
  const TilingEstimate e = EstimatePool(stem, PoolTiling{16, 8}, 2);
  EXPECT_EQ(e.bytes_out, 4.0 * 64 * 56 * 56);
  EXPECT_LE(e.bytes_in, 4.0 * 64 * (112 + 7) * 112);
}

TEST(Pool, Errors) {
  std::vector<float> x(1 * 4 * 8 * 8), y(1 * 4 * 4 * 4);
  PoolDesc d = MakePool(PoolKind::kMax, 1, 4, 8, 8, Square(2, 2, 0));
  d.x = x.data();
  d.y = y.data();
  KernelConfig config;
  EXPECT_TRUE(RunPool(d, PoolTiling{}, config).ok());
  PoolDesc no_x = d;
  no_x.x = nullptr;
  EXPECT_FALSE(RunPool(no_x, PoolTiling{}, config).ok());
  EXPECT_NE(RunPool(d, PoolTiling{0, 8}, config).error().message().find("channel_block"),
            std::string::npos);
  EXPECT_NE(RunPool(d, PoolTiling{4, 0}, config).error().message().find("row_block"),
            std::string::npos);
  PoolDesc bad_out = d;
  bad_out.out_h = 9;  // the last window would start past the input
  EXPECT_NE(RunPool(bad_out, PoolTiling{}, config).error().message().find("out_h"),
            std::string::npos);
  PoolDesc bad_pad = d;
  bad_pad.pad_left = -1;
  EXPECT_FALSE(ValidatePoolShape(bad_pad).ok());
  KernelConfig tiny = config;
  tiny.local_buffer_bytes = 256;
  EXPECT_FALSE(PoolTilingFits(d, PoolTiling{}, tiny));
  EXPECT_NE(ValidatePool(d, PoolTiling{}, tiny).error().message().find("local buffer"),
            std::string::npos);
  KernelConfig no_threads = config;
  no_threads.threads = 0;
  EXPECT_FALSE(RunPool(d, PoolTiling{}, no_threads).ok());
}

}  // namespace
}  // namespace fusetune::kernels
