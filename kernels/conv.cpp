#include "kernels/conv.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/conv_algorithm.h"
#include "kernels/estimate.h"
#include "kernels/row_simd.h"

namespace fusetune::kernels {

const char* ConvGlobalPoolName(ConvGlobalPool pool) {
  switch (pool) {
    case ConvGlobalPool::kNone:
      return "none";
    case ConvGlobalPool::kAverage:
      return "global_average";
    case ConvGlobalPool::kMax:
      return "global_max";
  }
  return "none";
}

namespace {
constexpr const char* kAlgorithmNames[kNumConvAlgorithms] = {"im2col_gemm", "direct", "winograd2",
                                                             "winograd4", "depthwise"};
}  // namespace

const char* ConvAlgorithmName(ConvAlgorithm algorithm) {
  return kAlgorithmNames[static_cast<int>(algorithm)];
}

std::optional<ConvAlgorithm> ConvAlgorithmFromName(const std::string& name) {
  for (int i = 0; i < kNumConvAlgorithms; ++i)
    if (name == kAlgorithmNames[i]) return static_cast<ConvAlgorithm>(i);
  return std::nullopt;
}

bool ConvAlgorithmHasBf16(ConvAlgorithm algorithm) {
  return algorithm == ConvAlgorithm::kIm2colGemm || algorithm == ConvAlgorithm::kDirect ||
         algorithm == ConvAlgorithm::kWinograd2;
}

bool ConvAlgorithmUsesMicroTile(ConvAlgorithm algorithm) {
  return algorithm == ConvAlgorithm::kIm2colGemm || algorithm == ConvAlgorithm::kWinograd2 ||
         algorithm == ConvAlgorithm::kWinograd4;
}

int64_t ConvReductionExtent(const ConvShape& s, ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::kIm2colGemm:
      return s.in_per_group() * s.kernel_h * s.kernel_w;
    case ConvAlgorithm::kDirect:
    case ConvAlgorithm::kWinograd2:
    case ConvAlgorithm::kWinograd4:
      return s.in_per_group();
    case ConvAlgorithm::kDepthwise:
      return 0;
  }
  return 0;
}

double ConvMultiplicationRatio(ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::kWinograd2:
      return 16.0 / 36.0;
    case ConvAlgorithm::kWinograd4:
      return 36.0 / 144.0;
    default:
      return 1.0;
  }
}

double ConvShape::Macs() const {
  return static_cast<double>(batch) * out_channels * pixels() * in_per_group() * kernel_h *
         kernel_w;
}

std::string ConvShape::ToString() const {
  return fmt::format("{}x{}x{}x{} -> {} k{}x{} s{} p{} d{} g{}", batch, in_channels, in_h, in_w,
                     out_channels, kernel_h, kernel_w, stride_h, pad_top, dilation_h, groups);
}

std::string ConvMaxPool::ToString() const {
  return fmt::format("max_pool k{}x{} s{}x{} p{},{} -> {}x{}", kernel_h, kernel_w, stride_h,
                     stride_w, pad_top, pad_left, out_h, out_w);
}

std::string ConvTiling::ToString() const {
  std::string text = fmt::format("{} oc={} px={} k={} micro={}x{}", ConvAlgorithmName(algorithm),
                                 oc_block, pixel_block, k_block, mr, nr);
  // NCHW, the layout of every record before layouts were searched, unsaid.
  if (in_layout != ActivationLayout::kNCHW || out_layout != ActivationLayout::kNCHW)
    text +=
        fmt::format(" {}->{}", ActivationLayoutName(in_layout), ActivationLayoutName(out_layout));
  if (precision != Precision::kF32) text += fmt::format(" {}", PrecisionName(precision));
  return text;
}

Status ValidateConvShape(const ConvShape& s) {
  auto bad = [](const std::string& what) {
    return Error(ErrorCode::kInvalidArgument, "conv shape: " + what);
  };
  if (s.batch < 1 || s.in_channels < 1 || s.in_h < 1 || s.in_w < 1 || s.out_channels < 1 ||
      s.out_h < 1 || s.out_w < 1)
    return bad("every extent must be positive: " + s.ToString());
  if (s.kernel_h < 1 || s.kernel_w < 1 || s.stride_h < 1 || s.stride_w < 1 || s.dilation_h < 1 ||
      s.dilation_w < 1 || s.pad_top < 0 || s.pad_left < 0)
    return bad("kernel, strides and dilations must be positive, pads not negative: " +
               s.ToString());
  if (s.groups < 1 || s.in_channels % s.groups != 0 || s.out_channels % s.groups != 0)
    return bad(fmt::format("groups {} must divide in_channels {} and out_channels {}", s.groups,
                           s.in_channels, s.out_channels));
  // The last output's window must start inside the padded input.
  const int64_t last_h = (s.out_h - 1) * s.stride_h - s.pad_top;
  const int64_t last_w = (s.out_w - 1) * s.stride_w - s.pad_left;
  if (last_h >= s.in_h + s.pad_top || last_w >= s.in_w + s.pad_left)
    return bad(fmt::format("out {}x{} does not follow from the window arithmetic of {}", s.out_h,
                           s.out_w, s.ToString()));
  return Status::Ok();
}

namespace conv_detail {

const ConvAlgorithmOps& OpsOf(ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::kIm2colGemm:
      return Im2colGemmOps();
    case ConvAlgorithm::kDirect:
      return DirectOps();
    case ConvAlgorithm::kWinograd2:
    case ConvAlgorithm::kWinograd4:
      return WinogradOps();
    case ConvAlgorithm::kDepthwise:
      return DepthwiseOps();
  }
  return Im2colGemmOps();
}

const ConvAlgorithmOps& OpsOf(const ConvTiling& tiling) {
  if (tiling.precision == Precision::kBf16) {
    if (tiling.algorithm == ConvAlgorithm::kIm2colGemm) return Im2colGemmBf16Ops();
    if (tiling.algorithm == ConvAlgorithm::kDirect) return DirectBf16Ops();
  }
  return OpsOf(tiling.algorithm);
}

ConvTileWalk::ConvTileWalk(const ConvShape& s, int64_t oc_block, int64_t pixel_block,
                           bool whole_rows, int64_t row_multiple, bool across_groups,
                           const ConvMaxPool& pool)
    : shape_(s), pool_(pool), oc_block_(oc_block), pos_block_(pixel_block), images_(s.batch) {
  if (across_groups) {  // blocks of channels as if there were one group
    shape_.groups = 1;
    shape_.in_channels = s.in_per_group();
  }
  if (whole_rows || pool.active()) {
    rows_per_block_ = std::max<int64_t>(1, pixel_block / s.out_w);
    rows_per_block_ = (rows_per_block_ + row_multiple - 1) / row_multiple * row_multiple;
    pos_block_ = rows_per_block_ * s.out_w;
  }
  pos_blocks_ = (s.pixels() + pos_block_ - 1) / pos_block_;
  if (pool.active()) {
    // The pooled rows whose windows fit in a band: all of them when the band
    // holds the image, none when it holds no window (CheckConv refuses).
    const int64_t rows = std::min(rows_per_block_, s.out_h);
    pool_rows_per_block_ = rows >= s.out_h         ? pool.out_h
                           : rows >= pool.kernel_h ? (rows - pool.kernel_h) / pool.stride_h + 1
                                                   : 0;
    pool_rows_per_block_ = std::min(pool_rows_per_block_, pool.out_h);
    pos_blocks_ = pool_rows_per_block_ > 0
                      ? (pool.out_h + pool_rows_per_block_ - 1) / pool_rows_per_block_
                      : 0;
  }
  oc_blocks_per_group_ = (shape_.out_per_group() + oc_block_ - 1) / oc_block_;
  oc_blocks_ = oc_blocks_per_group_ * shape_.groups;
}

ConvTile ConvTileWalk::At(int64_t index) const {
  ConvTile t;
  const int64_t ocb = index % oc_blocks_;
  const int64_t rest = index / oc_blocks_;
  const int64_t pb = rest % pos_blocks_;
  t.image = rest / pos_blocks_;
  const int64_t group = ocb / oc_blocks_per_group_;
  const int64_t in_group = (ocb % oc_blocks_per_group_) * oc_block_;
  t.oc0 = group * shape_.out_per_group() + in_group;
  t.ocs = std::min(oc_block_, shape_.out_per_group() - in_group);
  if (pool_.active()) {
    // The conv rows the band's windows read, padding rows excluded.
    t.pool_row0 = pb * pool_rows_per_block_;
    t.pool_rows = std::min(pool_rows_per_block_, pool_.out_h - t.pool_row0);
    const int64_t first = std::max<int64_t>(0, t.pool_row0 * pool_.stride_h - pool_.pad_top);
    const int64_t last = std::min(shape_.out_h, (t.pool_row0 + t.pool_rows - 1) * pool_.stride_h -
                                                    pool_.pad_top + pool_.kernel_h);
    t.p0 = first * shape_.out_w;
    t.ps = (last - first) * shape_.out_w;
    return t;
  }
  t.p0 = pb * pos_block_;
  t.ps = std::min(pos_block_, shape_.pixels() - t.p0);
  return t;
}

void ConvTileWalk::ShareOf(int thread, int threads, int64_t* begin, int64_t* end) const {
  const int64_t n = size();
  *begin = n * thread / threads;
  *end = n * (thread + 1) / threads;
}

ConvTileWalk AlgorithmWalk(const ConvDesc& d, const ConvTiling& t) {
  const int64_t m = t.algorithm == ConvAlgorithm::kWinograd2   ? 2
                    : t.algorithm == ConvAlgorithm::kWinograd4 ? 4
                                                               : 1;
  return ConvTileWalk(d.shape, t.oc_block, t.pixel_block, t.algorithm != ConvAlgorithm::kIm2colGemm,
                      m, t.algorithm == ConvAlgorithm::kDepthwise, d.max_pool);
}

double EpilogueReadBytes(const std::vector<EpilogueOp>& ops, int64_t rows, int64_t cols) {
  double bytes = 0;
  for (const EpilogueOp& op : ops)
    if (op.reads_memory() && !IsRowNorm(op.kind))
      bytes += 4.0 * cols * (op.row_stride == 0 ? 1 : rows);
  return bytes;
}

namespace {

// The sum of a row in 16 lanes and a fixed order: vectorised and the same
// on every run.
float RowSum(const float* row, int64_t n) {
  float lanes[16] = {};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += row[j + l];
  for (int l = 0; j < n; ++j, ++l) lanes[l] += row[j];
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

// A tile holding all of its image's positions (CheckConv): each row's
// pooled value goes to the row's first float, then the ocs values to Y.
void PoolTileOut(const ConvDesc& d, const ConvTile& t, float* acc, int64_t ld, RunMode mode,
                 KernelStats* stats) {
  if (mode != RunMode::kCopyOnly)
    for (int64_t r = 0; r < t.ocs; ++r) {
      float* row = acc + r * ld;
      row[0] = d.global_pool == ConvGlobalPool::kMax ? RowMax(row, t.ps)
                                                     : RowSum(row, t.ps) / static_cast<float>(t.ps);
    }
  if (mode == RunMode::kComputeOnly) return;
  float* out = d.y + t.image * d.shape.out_channels + t.oc0;
  for (int64_t r = 0; r < t.ocs; ++r) out[r] = acc[r * ld];
  stats->bytes_local_to_global += static_cast<int64_t>(sizeof(float)) * t.ocs;
}

// One pooled row from the column-wise max of its window's rows, `padded`
// holding that max with pad_left -inf values before it and enough after:
// each window's max along it. S and K as constants (ResNet's 3x3/2, 2x2/2)
// let the compiler vectorise the strided reads; 0 reads them at run time.
template <int S, int K>
void PoolColumns(const float* padded, int64_t out_w, int64_t stride, int64_t kernel, float* dst) {
  const int64_t s = S > 0 ? S : stride, k = K > 0 ? K : kernel;
  for (int64_t pw = 0; pw < out_w; ++pw) {
    const float* window = padded + pw * s;
    float m = window[0];
    for (int64_t j = 1; j < k; ++j) m = window[j] > m ? window[j] : m;
    dst[pw] = m;
  }
}

void PoolColumnsOf(const ConvMaxPool& p, const float* padded, float* dst) {
  if (p.stride_w == 2 && p.kernel_w == 3)
    PoolColumns<2, 3>(padded, p.out_w, 2, 3, dst);
  else if (p.stride_w == 2 && p.kernel_w == 2)
    PoolColumns<2, 2>(padded, p.out_w, 2, 2, dst);
  else
    PoolColumns<0, 0>(padded, p.out_w, p.stride_w, p.kernel_w, dst);
}

// n floats of one channel to a plane whose positions lie `stride` apart.
void WritePlaneRun(float* dst, int64_t stride, const float* src, int64_t n) {
  if (stride == 1) {
    std::memcpy(dst, src, sizeof(float) * n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i * stride] = src[i];
}

// The tile's rows to Y in `layout`: NCHW rows go out whole (streamed when Y
// is too large to stay cached, StreamsOutput); in NHWC and
// NCHW16c a position's channels are neighbours, so the rows interleave.
void WriteTileRows(const ConvDesc& d, const ConvTile& t, const float* acc, int64_t ld,
                   ActivationLayout layout) {
  const ConvShape& s = d.shape;
  const ActivationDims dims{s.batch, s.out_channels, s.out_h, s.out_w};
  if (layout == ActivationLayout::kNCHW) {
    float* out = d.y + (t.image * s.out_channels + t.oc0) * s.pixels() + t.p0;
    const bool stream = StreamsOutput(4 * s.batch * s.out_channels * s.pixels());
    for (int64_t r = 0; r < t.ocs; ++r) WriteOut(out + r * s.pixels(), acc + r * ld, t.ps, stream);
    return;
  }
  for (int64_t r = 0; r < t.ocs;) {
    const int64_t c = t.oc0 + r;
    const PlaneView view = ChannelPlane(layout, dims, t.image, c);
    float* out = d.y + view.offset + t.p0 * view.pixel_stride;
    // A whole NCHW16c block of the tile's rows: 16x16 transposes.
    if (layout == ActivationLayout::kNCHWc && c % kLayoutChannelBlock == 0 &&
        r + kLayoutChannelBlock <= t.ocs) {
      RowsToBlocked(acc + r * ld, ld, t.ps, out);
      r += kLayoutChannelBlock;
      continue;
    }
    WritePlaneRun(out, view.pixel_stride, acc + r * ld, t.ps);
    ++r;
  }
}

// An epilogue operand of Y's shape (a residual, a tensor multiplied by) lies
// in Y's layout: its strides are rewritten for rows [row0, row0 + rows) of
// the tile, which NCHW16c keeps within one block of 16 channels.
std::vector<EpilogueOp> EpilogueInLayout(const std::vector<EpilogueOp>& ops, const ConvShape& s,
                                         ActivationLayout layout, int64_t block) {
  std::vector<EpilogueOp> out = ops;
  for (EpilogueOp& op : out) {
    if (!op.reads_memory() || op.row_stride != s.pixels() || op.col_stride != 1) continue;
    if (layout == ActivationLayout::kNHWC) {
      op.row_stride = 1;
      op.col_stride = s.out_channels;
    } else if (layout == ActivationLayout::kNCHWc) {
      // Channel c of block b at b*16*HW + (c - 16b) + p*16: rows one apart,
      // the block's offset folded into the base.
      op.data += block * kLayoutChannelBlock * (s.pixels() - 1);
      op.row_stride = 1;
      op.col_stride = kLayoutChannelBlock;
    }
  }
  return out;
}

int64_t ApplyConvEpilogue(const ConvDesc& d, const ConvTile& t, float* acc, int64_t ld,
                          ActivationLayout layout, RunMode mode) {
  if (layout == ActivationLayout::kNCHW)
    return ApplyEpilogue(d.epilogue, acc, ld, t.ocs, t.ps, t.image, t.oc0, t.p0, mode);
  if (layout == ActivationLayout::kNHWC)
    return ApplyEpilogue(EpilogueInLayout(d.epilogue, d.shape, layout, 0), acc, ld, t.ocs, t.ps,
                         t.image, t.oc0, t.p0, mode);
  int64_t read = 0;
  for (int64_t r = 0; r < t.ocs;) {
    const int64_t c = t.oc0 + r, block = c / kLayoutChannelBlock;
    const int64_t rows = std::min(t.ocs - r, (block + 1) * kLayoutChannelBlock - c);
    read += ApplyEpilogue(EpilogueInLayout(d.epilogue, d.shape, layout, block), acc + r * ld, ld,
                          rows, t.ps, t.image, c, t.p0, mode);
    r += rows;
  }
  return read;
}

// The padded row PoolColumns reads: -inf, then out_w columns, then -inf up
// to the last window's end.
int64_t PaddedPoolRow(const ConvShape& s, const ConvMaxPool& p) {
  return std::max(p.pad_left + s.out_w, (p.out_w - 1) * p.stride_w + p.kernel_w);
}

// A max-pooled tile: for each channel row and each of the tile's pooled
// rows, the column-wise max of the window's conv rows (padding rows
// skipped) into a padded row, then each window's max along it; the pooled
// row goes to Y.
void MaxPoolTileOut(const ConvDesc& d, const ConvTile& t, const float* acc, int64_t ld,
                    ActivationLayout layout, RunMode mode, KernelStats* stats) {
  const ConvShape& s = d.shape;
  const ConvMaxPool& p = d.max_pool;
  const int64_t first = t.p0 / s.out_w, last = first + t.ps / s.out_w;
  // Staging for one pooled row (CheckConv counts it in the local buffer).
  thread_local std::vector<float> padded, pooled;
  padded.assign(static_cast<size_t>(PaddedPoolRow(s, p)), -std::numeric_limits<float>::infinity());
  pooled.resize(static_cast<size_t>(p.out_w));
  float* vertical = padded.data() + p.pad_left;
  const ActivationDims pooled_dims{s.batch, s.out_channels, p.out_h, p.out_w};
  for (int64_t r = 0; r < t.ocs; ++r) {
    const float* rows = acc + r * ld - first * s.out_w;  // rows[oh * out_w + ow]
    const PlaneView view = ChannelPlane(layout, pooled_dims, t.image, t.oc0 + r);
    float* out = d.y + view.offset + t.pool_row0 * p.out_w * view.pixel_stride;
    for (int64_t j = 0; j < t.pool_rows; ++j) {
      if (mode != RunMode::kCopyOnly) {
        const int64_t top = (t.pool_row0 + j) * p.stride_h - p.pad_top;
        const int64_t lo = std::max(top, first), hi = std::min(top + p.kernel_h, last);
        std::copy(rows + lo * s.out_w, rows + (lo + 1) * s.out_w, vertical);
        for (int64_t oh = lo + 1; oh < hi; ++oh) {
          const float* row = rows + oh * s.out_w;
          for (int64_t ow = 0; ow < s.out_w; ++ow)
            vertical[ow] = row[ow] > vertical[ow] ? row[ow] : vertical[ow];
        }
        PoolColumnsOf(p, padded.data(), pooled.data());
      }
      if (mode != RunMode::kComputeOnly)
        WritePlaneRun(out + j * p.out_w * view.pixel_stride, view.pixel_stride, pooled.data(),
                      p.out_w);
    }
  }
  if (mode != RunMode::kComputeOnly)
    stats->bytes_local_to_global +=
        static_cast<int64_t>(sizeof(float)) * t.ocs * t.pool_rows * p.out_w;
}

}  // namespace

void FinishConvTile(const ConvDesc& d, const ConvTile& t, float* acc, int64_t ld,
                    ActivationLayout y_layout, RunMode mode, KernelStats* stats) {
  if (d.bias != nullptr) {
    if (mode != RunMode::kComputeOnly)
      stats->bytes_global_to_local += static_cast<int64_t>(sizeof(float)) * t.ocs;
    if (mode != RunMode::kCopyOnly)
      for (int64_t r = 0; r < t.ocs; ++r) {
        const float b = d.bias[t.oc0 + r];
        float* row = acc + r * ld;
        for (int64_t c = 0; c < t.ps; ++c) row[c] += b;
      }
  }
  const int64_t read = ApplyConvEpilogue(d, t, acc, ld, y_layout, mode);
  if (d.global_pool != ConvGlobalPool::kNone) {
    if (mode != RunMode::kComputeOnly) stats->bytes_global_to_local += read;
    PoolTileOut(d, t, acc, ld, mode, stats);
  } else if (d.max_pool.active()) {
    if (mode != RunMode::kComputeOnly) stats->bytes_global_to_local += read;
    MaxPoolTileOut(d, t, acc, ld, y_layout, mode, stats);
  } else if (mode != RunMode::kComputeOnly) {
    stats->bytes_global_to_local += read;
    WriteTileRows(d, t, acc, ld, y_layout);
    stats->bytes_local_to_global += static_cast<int64_t>(sizeof(float)) * t.ocs * t.ps;
  }
  stats->tiles += 1;
}

}  // namespace conv_detail

using conv_detail::ConvAlgorithmOps;
using conv_detail::OpsOf;

Status ConvAlgorithmApplies(const ConvShape& shape, ConvAlgorithm algorithm) {
  return OpsOf(algorithm).applies(shape);
}

namespace {

// The window must fit the conv's output: pads smaller than the window, every
// window holding a conv position, out sizes from the window arithmetic.
Status ValidateMaxPool(const ConvShape& s, const ConvMaxPool& p) {
  auto bad = [&](const std::string& what) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("conv max pool: {}: {} after {}", what, p.ToString(), s.ToString()));
  };
  if (p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1 || p.out_h < 1 || p.out_w < 1)
    return bad("window, strides and out sizes must be positive");
  if (p.pad_top < 0 || p.pad_left < 0 || p.pad_top >= p.kernel_h || p.pad_left >= p.kernel_w)
    return bad("pads must be smaller than the window");
  if ((p.out_h - 1) * p.stride_h - p.pad_top >= s.out_h ||
      (p.out_w - 1) * p.stride_w - p.pad_left >= s.out_w)
    return bad("the last window starts past the conv's output");
  return Status::Ok();
}

Status CheckMaxPool(const ConvDesc& d, const ConvTiling& t) {
  if (!d.max_pool.active()) return Status::Ok();
  if (d.global_pool != ConvGlobalPool::kNone)
    return Error(ErrorCode::kInvalidArgument, "conv: a global pool and a max pool both set");
  FT_RETURN_IF_ERROR(ValidateMaxPool(d.shape, d.max_pool));
  const int64_t rows = std::min(d.max_pool.kernel_h, d.shape.out_h);
  if (t.pixel_block < rows * d.shape.out_w)
    return Error(
        ErrorCode::kInvalidArgument,
        fmt::format("tiling.pixel_block: a conv with a max pool needs tiles of at least "
                    "{} whole rows of {} ({} positions); {} has {}",
                    rows, d.shape.out_w, rows * d.shape.out_w, t.ToString(), t.pixel_block));
  return Status::Ok();
}

// im2col's gather plan is one of NCHW offsets; a 1x1 stride-1 conv's B is X
// itself, which it also gathers from NCHW16c (whole blocks of 16 channels).
bool Im2colReadsBlocked(const ConvShape& s, const ConvTiling& t) {
  const int64_t k = s.in_channels;
  return t.in_layout == ActivationLayout::kNCHWc && s.kernel_h == 1 && s.kernel_w == 1 &&
         s.stride_h == 1 && s.stride_w == 1 && s.pad_top == 0 && s.pad_left == 0 && s.groups == 1 &&
         s.out_h == s.in_h && s.out_w == s.in_w &&  // positions are X's, none cropped
         (t.k_block % kLayoutChannelBlock == 0 || t.k_block >= k);
}

// Layouts (conv.h): every algorithm reads X in any layout (their bands
// gather a channel plane's rows at any stride), but im2col (above); a
// global pool writes [N, C], which has no layout.
Status CheckLayouts(const ConvDesc& d, const ConvTiling& t) {
  auto forbid = [&](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, fmt::format("tiling {}: {}", t.ToString(), why));
  };
  if (Status s = LayoutApplies(t.in_layout, d.shape.in_channels); !s.ok())
    return forbid("in_layout: " + s.error().message());
  if (Status s = LayoutApplies(t.out_layout, d.shape.out_channels); !s.ok())
    return forbid("out_layout: " + s.error().message());
  if (t.in_layout != ActivationLayout::kNCHW && t.algorithm == ConvAlgorithm::kIm2colGemm &&
      !Im2colReadsBlocked(d.shape, t))
    return forbid(
        "in_layout: im2col_gemm reads NCHW input, or NCHW16c for a 1x1 stride-1 unpadded conv "
        "of one group sliced in whole blocks of 16 channels");
  if (t.out_layout != ActivationLayout::kNCHW && d.global_pool != ConvGlobalPool::kNone)
    return forbid("out_layout: a global pool's [N, C] output is NCHW");
  return Status::Ok();
}

// MaxPoolTileOut's pooled-row staging.
int64_t MaxPoolStagingBytes(const ConvDesc& d) {
  if (!d.max_pool.active()) return 0;
  return static_cast<int64_t>(sizeof(float)) *
         (conv_detail::PaddedPoolRow(d.shape, d.max_pool) + d.max_pool.out_w);
}

}  // namespace

int64_t ConvLocalBytes(const ConvDesc& desc, const ConvTiling& tiling) {
  return OpsOf(tiling).local_bytes(desc, tiling) + MaxPoolStagingBytes(desc);
}

namespace {

Status CheckConv(const ConvDesc& d, const ConvTiling& t, const KernelConfig& config) {
  FT_RETURN_IF_ERROR(ValidateConvShape(d.shape));
  if (d.x == nullptr || d.w == nullptr || d.y == nullptr)
    return Error(ErrorCode::kInvalidArgument, "conv: x, w and y must be set");
  FT_RETURN_IF_ERROR(ConvAlgorithmApplies(d.shape, t.algorithm));
  if (t.oc_block < 1 || t.pixel_block < 1 || t.k_block < 1)
    return Error(ErrorCode::kInvalidArgument,
                 "tiling: oc_block, pixel_block and k_block must be positive: " + t.ToString());
  if (config.threads < 1)
    return Error(ErrorCode::kInvalidArgument, "config.threads must be positive");
  for (const EpilogueOp& op : d.epilogue)
    if (IsRowNorm(op.kind))
      return Error(ErrorCode::kInvalidArgument,
                   std::string("conv epilogue: ") + EpilogueKindName(op.kind) +
                       " needs whole rows, which a conv tile does not hold");
  if (t.precision != Precision::kF32 && !ConvAlgorithmHasBf16(t.algorithm))
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("tiling.precision: {} is computed by im2col_gemm, direct and "
                             "winograd2 only, not {} (conv.h's ConvAlgorithmHasBf16)",
                             PrecisionName(t.precision), ConvAlgorithmName(t.algorithm)));
  const ConvAlgorithmOps& ops = OpsOf(t);
  FT_RETURN_IF_ERROR(ops.check_tiling(d, t));
  FT_RETURN_IF_ERROR(CheckLayouts(d, t));
  FT_RETURN_IF_ERROR(CheckMaxPool(d, t));
  if (d.global_pool != ConvGlobalPool::kNone &&
      conv_detail::AlgorithmWalk(d, t).position_blocks() != 1)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("tiling.pixel_block: a conv with a global pool needs all {} "
                             "positions of an image in one tile; {} cuts them",
                             d.shape.pixels(), t.ToString()));
  const int64_t need = ConvLocalBytes(d, t);
  if (need > static_cast<int64_t>(config.local_buffer_bytes))
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("tiling {} needs {} bytes of local buffer, the target has {}",
                             t.ToString(), need, config.local_buffer_bytes));
  return Status::Ok();
}
}  // namespace

Status ValidateConv(const ConvDesc& desc, const ConvTiling& tiling, const KernelConfig& config) {
  return CheckConv(desc, tiling, config);
}

bool ConvTilingFits(const ConvDesc& desc, const ConvTiling& tiling, const KernelConfig& config) {
  return CheckConv(desc, tiling, config).ok();
}

int64_t PrePackedConvWeightFloats(const ConvDesc& desc, const ConvTiling& tiling) {
  return OpsOf(tiling).packed_floats(desc, tiling);
}

void PrePackConvWeights(const ConvDesc& desc, const ConvTiling& tiling, float* dst) {
  OpsOf(tiling).prepack(desc, tiling, dst);
}

Result<KernelStats> RunConv(const ConvDesc& desc, const ConvTiling& tiling,
                            const KernelConfig& config, RunMode mode) {
  FT_RETURN_IF_ERROR(CheckConv(desc, tiling, config));
  const ConvAlgorithmOps& ops = OpsOf(tiling);
  KernelStats stats = RunThreadShares(config.threads, [&](int thread) {
    KernelStats share = ops.run_share(desc, tiling, config, mode, thread);
    StreamFence();  // this thread's streamed rows are visible before the join
    return share;
  });
  return stats;
}

TilingEstimate EstimateConv(const ConvDesc& desc, const ConvTiling& tiling, int threads) {
  TilingEstimate e = OpsOf(tiling).estimate(desc, tiling, threads);
  // A pooled conv's tiles hold whole images and write one value per channel.
  if (desc.global_pool != ConvGlobalPool::kNone)
    e.bytes_out = 4.0 * static_cast<double>(desc.shape.batch * desc.shape.out_channels);
  // A max-pooled one writes the pooled planes; its tiles' overlap is in the
  // walk the algorithm's estimate follows.
  e.local_bytes = ConvLocalBytes(desc, tiling);
  if (desc.max_pool.active())
    e.bytes_out = 4.0 * static_cast<double>(desc.shape.batch * desc.shape.out_channels *
                                            desc.max_pool.out_h * desc.max_pool.out_w);
  return e;
}

}  // namespace fusetune::kernels
