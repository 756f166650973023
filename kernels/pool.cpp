#include "kernels/pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/conv_rows.h"
#include "kernels/estimate.h"
#include "kernels/simd_math.h"

#if !defined(__AVX512F__) && defined(__AVX2__)
#include <immintrin.h>
#endif

namespace fusetune::kernels {

const char* PoolKindName(PoolKind kind) {
  switch (kind) {
    case PoolKind::kMax:
      return "max";
    case PoolKind::kAverage:
      return "average";
    case PoolKind::kGlobalMax:
      return "global_max";
    case PoolKind::kGlobalAverage:
      return "global_average";
  }
  return "?";
}

std::string PoolDesc::ToString() const {
  if (IsGlobalPool(kind))
    return fmt::format("{} {}x{}x{}x{}", PoolKindName(kind), batch, channels, in_h, in_w);
  return fmt::format("{} {}x{}x{}x{} -> {}x{} k{}x{} s{}x{} p{},{},{},{} d{}x{}{}",
                     PoolKindName(kind), batch, channels, in_h, in_w, out_h, out_w, kernel_h,
                     kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right,
                     dilation_h, dilation_w, count_include_pad ? " include_pad" : "");
}

std::string PoolTiling::ToString() const {
  return fmt::format("channels={} rows={}", channel_block, row_block);
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t RoundUp64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// The window as the convolution's band copy sees it: a depthwise shape.
ConvShape BandShape(const PoolDesc& d) {
  ConvShape s;
  s.batch = d.batch;
  s.in_channels = s.out_channels = s.groups = d.channels;
  s.in_h = d.in_h;
  s.in_w = d.in_w;
  s.out_h = d.out_h;
  s.out_w = d.out_w;
  s.kernel_h = d.kernel_h;
  s.kernel_w = d.kernel_w;
  s.stride_h = d.stride_h;
  s.stride_w = d.stride_w;
  s.pad_top = d.pad_top;
  s.pad_left = d.pad_left;
  s.dilation_h = d.dilation_h;
  s.dilation_w = d.dilation_w;
  return s;
}

struct PoolTile {
  int64_t image = 0, c0 = 0, cs = 0, oh0 = 0, rows = 1;
};

// Tiles in (image, channel block, row block) order: a thread's consecutive
// tiles walk down the planes of its channels.
struct PoolWalk {
  int64_t channels = 0, out_h = 1, cb = 1, rb = 1, channel_blocks = 1, row_blocks = 1, images = 1;
  int64_t size() const { return images * channel_blocks * row_blocks; }
  PoolTile At(int64_t i) const {
    PoolTile t;
    const int64_t r = i % row_blocks;
    i /= row_blocks;
    t.c0 = (i % channel_blocks) * cb;
    t.cs = std::min(cb, channels - t.c0);
    t.image = i / channel_blocks;
    t.oh0 = r * rb;
    t.rows = std::min(rb, out_h - t.oh0);
    return t;
  }
  void ShareOf(int thread, int threads, int64_t* begin, int64_t* end) const {
    *begin = size() * thread / threads;
    *end = size() * (thread + 1) / threads;
  }
};

PoolWalk WalkOf(const PoolDesc& d, const PoolTiling& t) {
  PoolWalk w;
  w.channels = d.channels;
  w.out_h = IsGlobalPool(d.kind) ? 1 : d.out_h;
  w.cb = std::clamp<int64_t>(t.channel_block, 1, d.channels);
  w.rb = std::clamp<int64_t>(t.row_block, 1, w.out_h);
  w.channel_blocks = (d.channels + w.cb - 1) / w.cb;
  w.row_blocks = (w.out_h + w.rb - 1) / w.rb;
  w.images = d.batch;
  return w;
}

// Per channel of a tile: the floats of its input (a band, or a whole plane
// for global pools) and of its output rows in the local buffer.
struct PoolLayout {
  conv_detail::BandGeometry band;  // windowed pools
  int64_t in_floats = 0, out_floats = 0;
};

PoolLayout LayoutOf(const PoolDesc& d, const PoolWalk& w) {
  PoolLayout l;
  if (IsGlobalPool(d.kind)) {
    l.in_floats = d.in_h * d.in_w;
    l.out_floats = 1;
    return l;
  }
  l.band = conv_detail::BandOf(BandShape(d), w.rb);
  l.in_floats = l.band.floats();
  l.out_floats = w.rb * d.out_w;
  return l;
}

// Taps of output position o along one axis that the divisor counts: inside
// the input, or (count_include_pad) inside the input and its explicit pads,
// as the reference counts them (graph/ops_conv.cpp).
int64_t CountedTaps(int64_t o, int64_t stride, int64_t pad, int64_t in, int64_t pad_end,
                    int64_t kernel, int64_t dilation, bool include_pad) {
  const int64_t lo = include_pad ? -pad : 0, hi = include_pad ? in + pad_end : in;
  int64_t n = 0;
  for (int64_t k = 0; k < kernel; ++k) {
    const int64_t i = o * stride - pad + k * dilation;
    n += i >= lo && i < hi;
  }
  return n;
}

float InverseCount(int64_t n) { return n > 0 ? 1.0f / static_cast<float>(n) : 0.0f; }

float RowInverse(const PoolDesc& d, int64_t oh) {
  return InverseCount(CountedTaps(oh, d.stride_h, d.pad_top, d.in_h, d.pad_bottom, d.kernel_h,
                                  d.dilation_h, d.count_include_pad));
}

void ColumnInverses(const PoolDesc& d, float* inv) {
  for (int64_t ow = 0; ow < d.out_w; ++ow)
    inv[ow] = InverseCount(CountedTaps(ow, d.stride_w, d.pad_left, d.in_w, d.pad_right, d.kernel_w,
                                       d.dilation_w, d.count_include_pad));
}

#if defined(__AVX512F__)
// V vectors of 16 output columns of one output row: every tap's columns are
// consecutive floats of the band (phase layout). Average pools scale the sums
// by the row's and the columns' inverse tap counts.
template <bool kMax, int V>
void PoolBlock(const float* in, const int64_t* off, int64_t taps, float* out, __mmask16 last,
               const float* inv_w, float inv_h) {
  __m512 a[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) a[v] = kMax ? _mm512_set1_ps(kNegInf) : _mm512_setzero_ps();
  for (int64_t t = 0; t < taps; ++t) {
    const float* src = in + off[t];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const __mmask16 m = v == V - 1 ? last : static_cast<__mmask16>(0xFFFF);
      const __m512 x = _mm512_maskz_loadu_ps(m, src + 16 * v);
      a[v] = kMax ? _mm512_max_ps(a[v], x) : _mm512_add_ps(a[v], x);
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    const __mmask16 m = v == V - 1 ? last : static_cast<__mmask16>(0xFFFF);
    if constexpr (!kMax)
      a[v] = _mm512_mul_ps(
          a[v], _mm512_mul_ps(_mm512_set1_ps(inv_h), _mm512_maskz_loadu_ps(m, inv_w + 16 * v)));
    _mm512_mask_storeu_ps(out + 16 * v, m, a[v]);
  }
}

using PoolBlockFn = void (*)(const float*, const int64_t*, int64_t, float*, __mmask16, const float*,
                             float);
constexpr PoolBlockFn kPoolBlocks[2][4] = {
    {PoolBlock<false, 1>, PoolBlock<false, 2>, PoolBlock<false, 3>, PoolBlock<false, 4>},
    {PoolBlock<true, 1>, PoolBlock<true, 2>, PoolBlock<true, 3>, PoolBlock<true, 4>}};

void PoolRow(bool max, const float* in, const int64_t* off, int64_t taps, int64_t out_w,
             const float* inv_w, float inv_h, float* out) {
  for (int64_t ow = 0; ow < out_w; ow += 64) {
    const int64_t cols = std::min<int64_t>(64, out_w - ow);
    const int64_t nv = (cols + 15) / 16;
    const __mmask16 last = cols % 16 == 0 ? static_cast<__mmask16>(0xFFFF) : simd::Tail(cols % 16);
    kPoolBlocks[max ? 1 : 0][nv - 1](in + ow, off, taps, out + ow, last,
                                     inv_w ? inv_w + ow : nullptr, inv_h);
  }
}

float ReducePlane(bool max, const float* p, int64_t n) {
  const __m512 init = max ? _mm512_set1_ps(kNegInf) : _mm512_setzero_ps();
  __m512 a[4] = {init, init, init, init};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512 x = _mm512_loadu_ps(p + i + 16 * v);
      a[v] = max ? _mm512_max_ps(a[v], x) : _mm512_add_ps(a[v], x);
    }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : simd::Tail(n - i);
    const __m512 x = _mm512_mask_loadu_ps(init, m, p + i);
    a[0] = max ? _mm512_max_ps(a[0], x) : _mm512_add_ps(a[0], x);
  }
  if (max)
    return _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_max_ps(a[0], a[1]), _mm512_max_ps(a[2], a[3])));
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
}
#else
#if defined(__AVX2__)
// AVX2: 8 output columns at a time in a register across the taps (the
// portable loop below stays scalar: `out` may alias the band for the
// compiler); the last out_w % 8 columns by that loop, which ignores a NaN
// tap where max_ps keeps a NaN in the last one.
int64_t PoolRowVectors(bool max, const float* in, const int64_t* off, int64_t taps, int64_t out_w,
                       const float* inv_w, float inv_h, float* out) {
  int64_t c = 0;
  for (; c + 8 <= out_w; c += 8) {
    __m256 a = max ? _mm256_set1_ps(kNegInf) : _mm256_setzero_ps();
    for (int64_t t = 0; t < taps; ++t) {
      const __m256 x = _mm256_loadu_ps(in + off[t] + c);
      a = max ? _mm256_max_ps(a, x) : _mm256_add_ps(a, x);
    }
    if (!max)
      a = _mm256_mul_ps(a, _mm256_mul_ps(_mm256_set1_ps(inv_h), _mm256_loadu_ps(inv_w + c)));
    _mm256_storeu_ps(out + c, a);
  }
  return c;
}
#else
int64_t PoolRowVectors(bool, const float*, const int64_t*, int64_t, int64_t, const float*, float,
                       float*) {
  return 0;
}
#endif

void PoolRow(bool max, const float* in, const int64_t* off, int64_t taps, int64_t out_w,
             const float* inv_w, float inv_h, float* out) {
  const int64_t done = PoolRowVectors(max, in, off, taps, out_w, inv_w, inv_h, out);
  in += done;
  out += done;
  out_w -= done;
  if (inv_w != nullptr) inv_w += done;
  std::fill(out, out + out_w, max ? kNegInf : 0.0f);
  for (int64_t t = 0; t < taps; ++t) {
    const float* src = in + off[t];
    if (max)
      for (int64_t c = 0; c < out_w; ++c) out[c] = src[c] > out[c] ? src[c] : out[c];
    else
      for (int64_t c = 0; c < out_w; ++c) out[c] += src[c];
  }
  if (!max)
    for (int64_t c = 0; c < out_w; ++c) out[c] *= inv_h * inv_w[c];
}

float ReducePlane(bool max, const float* p, int64_t n) {
  float a[16];
  std::fill(a, a + 16, max ? kNegInf : 0.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int v = 0; v < 16; ++v) a[v] = max ? std::max(a[v], p[i + v]) : a[v] + p[i + v];
  for (; i < n; ++i) a[0] = max ? std::max(a[0], p[i]) : a[0] + p[i];
  float r = a[0];
  for (int v = 1; v < 16; ++v) r = max ? std::max(r, a[v]) : r + a[v];
  return r;
}
#endif

std::vector<int64_t> TapOffsets(const ConvShape& s, const conv_detail::BandGeometry& g) {
  std::vector<int64_t> offsets;
  for (int64_t kh = 0; kh < s.kernel_h; ++kh)
    for (int64_t kw = 0; kw < s.kernel_w; ++kw)
      offsets.push_back(conv_detail::TapOffset(s, g, kh, kw));
  return offsets;
}

// The pooled rows of one tile, channel by channel, from its bands.
void ComputeWindowTile(const PoolDesc& d, const ConvShape& s, const PoolLayout& l,
                       const PoolTile& tile, const std::vector<int64_t>& offsets, const float* band,
                       const float* inv_w, float* out) {
  const bool max = d.kind == PoolKind::kMax;
  const int64_t taps = static_cast<int64_t>(offsets.size());
  const int64_t row_step = s.stride_h * l.band.row_floats;
  for (int64_t c = 0; c < tile.cs; ++c)
    for (int64_t r = 0; r < tile.rows; ++r) {
      const float inv_h = max ? 1.0f : RowInverse(d, tile.oh0 + r);
      PoolRow(max, band + c * l.in_floats + r * row_step, offsets.data(), taps, d.out_w, inv_w,
              inv_h, out + c * l.out_floats + r * d.out_w);
    }
}

void ComputeGlobalTile(const PoolDesc& d, const PoolLayout& l, const PoolTile& tile,
                       const float* planes, float* out) {
  const bool max = d.kind == PoolKind::kGlobalMax;
  for (int64_t c = 0; c < tile.cs; ++c) {
    const float r = ReducePlane(max, planes + c * l.in_floats, l.in_floats);
    out[c] = max ? r : r / static_cast<float>(l.in_floats);
  }
}

// The floats of X a tile reads, as the copy counts them.
int64_t TileReadFloats(const PoolDesc& d, const ConvShape& s, const PoolLayout& l,
                       const PoolTile& t) {
  if (IsGlobalPool(d.kind)) return t.cs * l.in_floats;
  return t.cs * conv_detail::BandReadFloats(s, conv_detail::BandFirstRow(s, t.oh0),
                                            conv_detail::BandOf(s, t.rows));
}

KernelStats RunShare(const PoolDesc& d, const PoolTiling& t, const KernelConfig& config,
                     RunMode mode, int thread) {
  const PoolWalk walk = WalkOf(d, t);
  const PoolLayout l = LayoutOf(d, walk);
  const ConvShape s = BandShape(d);
  const bool global = IsGlobalPool(d.kind);
  LocalBuffer local(static_cast<size_t>(PoolLocalBytes(d, t)));
  float* in = local.Take(walk.cb * l.in_floats);
  float* out = local.Take(walk.cb * l.out_floats);
  float* inv_w = nullptr;
  if (d.kind == PoolKind::kAverage) {
    inv_w = local.Take(d.out_w);
    ColumnInverses(d, inv_w);
  }
  // Compute-only runs read whatever the buffer holds: finite values, not
  // stale NaNs or denormals that would slow the arithmetic.
  if (mode == RunMode::kComputeOnly) std::fill(in, in + walk.cb * l.in_floats, 0.5f);
  const std::vector<int64_t> offsets = global ? std::vector<int64_t>{} : TapOffsets(s, l.band);
  const float pad_value = d.kind == PoolKind::kMax ? kNegInf : 0.0f;
  const int64_t plane = d.in_h * d.in_w, out_plane = global ? 1 : d.out_h * d.out_w;
  const bool stream = StreamsOutput(4 * d.batch * d.channels * out_plane);
  const int64_t out_w = global ? 1 : d.out_w;
  KernelStats stats;
  int64_t begin = 0, end = 0;
  walk.ShareOf(thread, config.threads, &begin, &end);
  for (int64_t i = begin; i < end; ++i) {
    const PoolTile tile = walk.At(i);
    const float* x = d.x + (tile.image * d.channels + tile.c0) * plane;
    if (mode != RunMode::kComputeOnly) {
      if (global) {
        std::memcpy(in, x, sizeof(float) * tile.cs * plane);  // the planes are contiguous
      } else {
        const conv_detail::BandGeometry g = conv_detail::BandOf(s, tile.rows);
        const int64_t ih0 = conv_detail::BandFirstRow(s, tile.oh0);
        for (int64_t c = 0; c < tile.cs; ++c)
          conv_detail::CopyBand(s, x + c * plane, ih0, g, in + c * l.in_floats, pad_value);
      }
      stats.bytes_global_to_local +=
          static_cast<int64_t>(sizeof(float)) * TileReadFloats(d, s, l, tile);
    }
    if (mode != RunMode::kCopyOnly) {
      if (global)
        ComputeGlobalTile(d, l, tile, in, out);
      else
        ComputeWindowTile(d, s, l, tile, offsets, in, inv_w, out);
    }
    if (mode != RunMode::kComputeOnly) {
      float* y = d.y + (tile.image * d.channels + tile.c0) * out_plane + tile.oh0 * out_w;
      if (global)
        WriteOut(y, out, tile.cs, stream);
      else
        for (int64_t c = 0; c < tile.cs; ++c)
          WriteOut(y + c * out_plane, out + c * l.out_floats, tile.rows * out_w, stream);
      stats.bytes_local_to_global +=
          static_cast<int64_t>(sizeof(float)) * tile.cs * tile.rows * out_w;
    }
    stats.tiles += 1;
  }
  return stats;
}

}  // namespace

Status ValidatePoolShape(const PoolDesc& d) {
  auto bad = [&](const std::string& msg) {
    return Error(ErrorCode::kInvalidArgument, "pool: " + msg);
  };
  if (d.batch < 1 || d.channels < 1 || d.in_h < 1 || d.in_w < 1)
    return bad("batch, channels, in_h and in_w must be positive: " + d.ToString());
  if (IsGlobalPool(d.kind)) return Status::Ok();
  if (d.out_h < 1 || d.out_w < 1) return bad("out_h and out_w must be positive: " + d.ToString());
  if (d.kernel_h < 1 || d.kernel_w < 1 || d.stride_h < 1 || d.stride_w < 1 || d.dilation_h < 1 ||
      d.dilation_w < 1 || d.pad_top < 0 || d.pad_left < 0 || d.pad_bottom < 0 || d.pad_right < 0)
    return bad("kernel, strides and dilations must be positive, pads not negative: " +
               d.ToString());
  // ceil_mode may add a last window that hangs over the end pad, never one
  // that starts past it.
  if ((d.out_h - 1) * d.stride_h - d.pad_top >= d.in_h + d.pad_bottom)
    return bad("out_h: the last window starts past the padded input: " + d.ToString());
  if ((d.out_w - 1) * d.stride_w - d.pad_left >= d.in_w + d.pad_right)
    return bad("out_w: the last window starts past the padded input: " + d.ToString());
  return Status::Ok();
}

int64_t PoolLocalBytes(const PoolDesc& d, const PoolTiling& t) {
  if (d.channels < 1) return 0;
  const PoolWalk w = WalkOf(d, t);
  const PoolLayout l = LayoutOf(d, w);
  int64_t bytes = RoundUp64(4 * w.cb * l.in_floats) + RoundUp64(4 * w.cb * l.out_floats);
  if (d.kind == PoolKind::kAverage) bytes += RoundUp64(4 * d.out_w);
  return bytes;
}

Status ValidatePool(const PoolDesc& d, const PoolTiling& t, const KernelConfig& config) {
  FT_RETURN_IF_ERROR(ValidatePoolShape(d));
  if (d.x == nullptr || d.y == nullptr)
    return Error(ErrorCode::kInvalidArgument, "pool: x and y must be set");
  if (t.channel_block < 1)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("tiling.channel_block: must be positive, got {}", t.channel_block));
  if (t.row_block < 1)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("tiling.row_block: must be positive, got {}", t.row_block));
  if (config.threads < 1)
    return Error(ErrorCode::kInvalidArgument, "config.threads must be positive");
  const int64_t need = PoolLocalBytes(d, t);
  if (need > static_cast<int64_t>(config.local_buffer_bytes))
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("tiling {} needs {} bytes of local buffer, the target has {}",
                             t.ToString(), need, config.local_buffer_bytes));
  return Status::Ok();
}

bool PoolTilingFits(const PoolDesc& desc, const PoolTiling& tiling, const KernelConfig& config) {
  return ValidatePool(desc, tiling, config).ok();
}

Result<KernelStats> RunPool(const PoolDesc& desc, const PoolTiling& tiling,
                            const KernelConfig& config, RunMode mode) {
  FT_RETURN_IF_ERROR(ValidatePool(desc, tiling, config));
  return RunThreadShares(config.threads, [&](int thread) {
    KernelStats share = RunShare(desc, tiling, config, mode, thread);
    StreamFence();  // this thread's streamed rows are visible before the join
    return share;
  });
}

TilingEstimate EstimatePool(const PoolDesc& d, const PoolTiling& t, int threads) {
  TilingEstimate e;
  if (ValidatePoolShape(d).ok() == false || threads < 1) return e;
  const PoolWalk walk = WalkOf(d, t);
  const PoolLayout l = LayoutOf(d, walk);
  const ConvShape s = BandShape(d);
  const int64_t out_w = IsGlobalPool(d.kind) ? 1 : d.out_w;
  e.local_bytes = PoolLocalBytes(d, t);
  double total = 0, busiest = 0;
  for (int th = 0; th < threads; ++th) {
    int64_t begin = 0, end = 0;
    walk.ShareOf(th, threads, &begin, &end);
    double work = 0;
    for (int64_t i = begin; i < end; ++i) {
      const PoolTile tile = walk.At(i);
      const int64_t read = TileReadFloats(d, s, l, tile);
      e.bytes_in += 4.0 * static_cast<double>(read);
      e.bytes_out += 4.0 * static_cast<double>(tile.cs * tile.rows * out_w);
      // Copying the input in and the rows out: the work is the data moved.
      work += static_cast<double>(read + tile.cs * tile.rows * out_w);
    }
    e.max_thread_tiles = std::max(e.max_thread_tiles, end - begin);
    busiest = std::max(busiest, work);
    total += work;
  }
  e.tiles = walk.size();
  e.max_thread_work = total > 0 ? busiest / total : 1;
  e.steps = e.max_thread_tiles;
  const int64_t lanes = IsGlobalPool(d.kind) ? l.in_floats : d.out_w;
  e.lane_utilisation = static_cast<double>(lanes) / static_cast<double>((lanes + 15) / 16 * 16);
  return e;
}

}  // namespace fusetune::kernels

#if defined(__AVX512F__)
FT_SIMD_MATH_END
#endif
