#include "kernels/conv_rows.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/simd_math.h"

namespace fusetune::kernels::conv_detail {

BandGeometry BandOf(const ConvShape& s, int64_t out_rows) {
  BandGeometry g;
  g.rows = (out_rows - 1) * s.stride_h + (s.kernel_h - 1) * s.dilation_h + 1;
  g.width = (s.out_w - 1) * s.stride_w + (s.kernel_w - 1) * s.dilation_w + 1;
  g.phase = (g.width + s.stride_w - 1) / s.stride_w;
  g.row_floats = g.phase * s.stride_w;
  return g;
}

namespace {

// Input columns a padded row reads: iw in [0, InCols) (padded j = iw + pad_left).
int64_t InCols(const ConvShape& s, const BandGeometry& g) {
  return std::clamp<int64_t>(g.width - s.pad_left, 0, s.in_w);
}

#if defined(__AVX512F__)
// Lanes [lo, hi) of a 16-lane mask.
__mmask16 LaneRange(int64_t lo, int64_t hi) {
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, 16);
  if (hi <= lo) return 0;
  return static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
}

// The 16 padded columns [j, j + 16) of a row: X where inside it, else
// `fill`. Masked-off lanes are not read, so the window may hang over either end.
__m512 PaddedWindow(const float* src, int64_t in_cols, int64_t pad, int64_t width, int64_t j,
                    __m512 fill) {
  const __mmask16 m = LaneRange(pad - j, std::min(pad + in_cols, width) - j);
  return _mm512_mask_loadu_ps(fill, m, src + (j - pad));
}

void CopyRowStride1(const float* src, int64_t in_cols, int64_t pad, const BandGeometry& g,
                    __m512 fill, float* dst) {
  for (int64_t j = 0; j < g.row_floats; j += 16)
    _mm512_mask_storeu_ps(dst + j, LaneRange(0, g.row_floats - j),
                          PaddedWindow(src, in_cols, pad, g.width, j, fill));
}

// Stride 2: even padded columns to phase 0, odd ones to phase 1, 16 of each
// from a window of 32.
void CopyRowStride2(const float* src, int64_t in_cols, int64_t pad, const BandGeometry& g,
                    __m512 fill, float* dst) {
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odds = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (int64_t i = 0; i < g.phase; i += 16) {
    const __m512 a = PaddedWindow(src, in_cols, pad, g.width, 2 * i, fill);
    const __m512 b = PaddedWindow(src, in_cols, pad, g.width, 2 * i + 16, fill);
    const __mmask16 m = LaneRange(0, g.phase - i);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_permutex2var_ps(a, evens, b));
    _mm512_mask_storeu_ps(dst + g.phase + i, m, _mm512_permutex2var_ps(a, odds, b));
  }
}
#endif

// Phase q of a row (columns q, q + stride, ...) as padding, X's columns,
// padding: no test per column (one per column, with the pools' scalar rows,
// ran ResNet-18's stem pool at 1.1 ms on a Zen 3 guest).
void CopyPhase(const float* src, int64_t in_cols, int64_t pad, int64_t stride, int64_t q,
               const BandGeometry& g, float pad_value, float* dst) {
  auto ceil_div = [](int64_t x, int64_t d) { return x <= 0 ? 0 : (x + d - 1) / d; };
  float* phase = dst + q * g.phase;
  // Columns j = q + i * stride inside X: pad <= j < min(width, pad + in_cols).
  const int64_t inside_end = std::min(g.width, pad + in_cols);
  const int64_t lo = std::min(ceil_div(pad - q, stride), g.phase);
  const int64_t hi = std::clamp(ceil_div(inside_end - q, stride), lo, g.phase);
  std::fill(phase, phase + lo, pad_value);
  if (hi > lo) {
    const float* from = src + (q + lo * stride - pad);
    if (stride == 1)
      std::memcpy(phase + lo, from, sizeof(float) * (hi - lo));
    else
      for (int64_t i = 0; i < hi - lo; ++i) phase[lo + i] = from[i * stride];
  }
  std::fill(phase + hi, phase + g.phase, pad_value);
}

void CopyRow(const ConvShape& s, const float* src, int64_t in_cols, const BandGeometry& g,
             float pad_value, float* dst) {
  const int64_t pad = s.pad_left;
#if defined(__AVX512F__)
  const __m512 fill = _mm512_set1_ps(pad_value);
  if (s.stride_w == 1) return CopyRowStride1(src, in_cols, pad, g, fill, dst);
  if (s.stride_w == 2) return CopyRowStride2(src, in_cols, pad, g, fill, dst);
#endif
  for (int64_t q = 0; q < s.stride_w; ++q)
    CopyPhase(src, in_cols, pad, s.stride_w, q, g, pad_value, dst);
}

// The band's rows, each input row as RowOf gives it (contiguous floats),
// padding rows filled. Returns the floats read from X.
template <typename RowOf>
int64_t CopyBandRows(const ConvShape& s, int64_t ih0, const BandGeometry& g, float* dst,
                     float pad_value, RowOf&& row_of) {
  const int64_t in_cols = InCols(s, g);
  int64_t rows_read = 0;
  for (int64_t r = 0; r < g.rows; ++r) {
    const int64_t ih = ih0 + r;
    float* row = dst + r * g.row_floats;
    if (ih < 0 || ih >= s.in_h) {
      std::fill(row, row + g.row_floats, pad_value);
      continue;
    }
    CopyRow(s, row_of(ih), in_cols, g, pad_value, row);
    ++rows_read;
  }
  return rows_read * in_cols;
}

}  // namespace

namespace {

// Whether the band is X's rows as they lie: whole input rows, stride 1, no
// padding column and no padding row (a 1x1 stride-1 unpadded conv, or a
// valid one whose band stays inside the map).
bool BandIsContiguous(const ConvShape& s, int64_t ih0, const BandGeometry& g) {
  return s.stride_w == 1 && s.pad_left == 0 && g.row_floats == s.in_w && ih0 >= 0 &&
         ih0 + g.rows <= s.in_h;
}

}  // namespace

int64_t CopyBand(const ConvShape& s, const float* plane, int64_t ih0, const BandGeometry& g,
                 float* dst, float pad_value) {
  if (BandIsContiguous(s, ih0, g)) {  // one run: narrow rows cost a call each otherwise
    std::memcpy(dst, plane + ih0 * s.in_w, sizeof(float) * g.floats());
    return g.floats();
  }
  return CopyBandRows(s, ih0, g, dst, pad_value, [&](int64_t ih) { return plane + ih * s.in_w; });
}

void InsideBand(const ConvShape& s, int64_t ih0, const BandGeometry& g, float* dst) {
  thread_local std::vector<float> ones;
  ones.assign(static_cast<size_t>(s.in_w), 1.0f);
  CopyBandRows(s, ih0, g, dst, 0.0f, [&](int64_t) { return ones.data(); });
}

const float* PlaneRow(const ConvShape& s, const float* x, const PlaneView& view, int64_t ih,
                      float* scratch) {
  const float* row = x + view.offset + ih * s.in_w * view.pixel_stride;
  if (view.pixel_stride == 1) return row;
  for (int64_t iw = 0; iw < s.in_w; ++iw) scratch[iw] = row[iw * view.pixel_stride];
  return scratch;
}

int64_t CopyBand(const ConvShape& s, const float* x, const PlaneView& view, int64_t ih0,
                 const BandGeometry& g, float* dst, float pad_value) {
  if (view.pixel_stride == 1) return CopyBand(s, x + view.offset, ih0, g, dst, pad_value);
  thread_local std::vector<float> gathered;
  gathered.resize(static_cast<size_t>(s.in_w));
  return CopyBandRows(s, ih0, g, dst, pad_value,
                      [&](int64_t ih) { return PlaneRow(s, x, view, ih, gathered.data()); });
}

int64_t CopyBands(const ConvShape& s, const float* x, ActivationLayout layout, int64_t image,
                  int64_t c0, int64_t count, int64_t ih0, const BandGeometry& g, float* dst,
                  int64_t dst_stride, float pad_value) {
  const ActivationDims dims{s.batch, s.in_channels, s.in_h, s.in_w};
  // Whole NCHW planes laid out in the band as in X (a 1x1 conv's band of
  // the whole map): every channel in one copy.
  if (layout == ActivationLayout::kNCHW && ih0 == 0 && g.rows == s.in_h &&
      dst_stride == g.floats() && BandIsContiguous(s, ih0, g)) {
    std::memcpy(dst, x + ChannelPlane(layout, dims, image, c0).offset,
                sizeof(float) * count * g.floats());
    return count * g.floats();
  }
  int64_t read = 0, c = 0;
  if (layout == ActivationLayout::kNCHWc) {
    const int64_t in_cols = InCols(s, g);
    thread_local std::vector<float> rows;
    rows.resize(static_cast<size_t>(kLayoutChannelBlock * s.in_w));
    for (; c0 % kLayoutChannelBlock == 0 && c + kLayoutChannelBlock <= count;
         c += kLayoutChannelBlock, c0 += kLayoutChannelBlock) {
      const float* block = x + ChannelPlane(layout, dims, image, c0).offset;
      for (int64_t r = 0; r < g.rows; ++r) {
        const int64_t ih = ih0 + r;
        const bool inside = ih >= 0 && ih < s.in_h;
        if (inside)
          BlockedToRows(block + ih * s.in_w * kLayoutChannelBlock, s.in_w, rows.data(), s.in_w);
        for (int64_t i = 0; i < kLayoutChannelBlock; ++i) {
          float* row = dst + (c + i) * dst_stride + r * g.row_floats;
          if (inside)
            CopyRow(s, rows.data() + i * s.in_w, in_cols, g, pad_value, row);
          else
            std::fill(row, row + g.row_floats, pad_value);
        }
        if (inside) read += kLayoutChannelBlock * in_cols;
      }
    }
  }
  for (; c < count; ++c, ++c0)
    read += CopyBand(s, x, ChannelPlane(layout, dims, image, c0), ih0, g, dst + c * dst_stride,
                     pad_value);
  return read;
}

int64_t BandReadFloats(const ConvShape& s, int64_t ih0, const BandGeometry& g) {
  const int64_t rows =
      std::max<int64_t>(0, std::min(s.in_h, ih0 + g.rows) - std::max<int64_t>(0, ih0));
  return rows * InCols(s, g);
}

}  // namespace fusetune::kernels::conv_detail

#if defined(__AVX512F__)
FT_SIMD_MATH_END
#endif
