// Finishing a conv tile whose sums are held as whole 16-channel blocks
// ([position][16] per block: the direct conv's register blocks, the NCHW16c
// depthwise) where they lie: the bias and epilogue run on the blocks, and
// each block is copied out as it lies into NCHW16c Y, or transposed in
// registers on its way into NCHW Y's planes. The rows' form
// (FinishConvTile) first transposed the blocks into a tile of channel rows
// in the local buffer, ran the bias and epilogue on that, and copied the
// rows out: two more passes over the tile, which were a fifth of the
// MobileNetV2 stem conv's cycles (its 3 input channels leave little
// arithmetic per output to hide them).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/conv_algorithm.h"
#include "kernels/layout.h"
#include "kernels/row_simd.h"
#include "kernels/simd_math.h"

namespace fusetune::kernels::conv_detail {

namespace {

constexpr int64_t kBlock = kLayoutChannelBlock;

bool PerChannelOrScalar(const EpilogueOp& op) {
  return !op.reads_memory() || (op.row_stride == 1 && op.col_stride == 0) ||
         (op.row_stride == 0 && op.col_stride == 0);
}

// The epilogue as block `block`'s [position][16] tile sees it: rows =
// positions, columns = the block's 16 channels.
std::vector<EpilogueOp> BlockEpilogue(const ConvDesc& d, int64_t block) {
  const ConvShape& s = d.shape;
  std::vector<EpilogueOp> ops = d.epilogue;
  for (EpilogueOp& op : ops) {
    if (!op.reads_memory()) continue;
    if (op.row_stride == s.pixels() && op.col_stride == 1) {  // Y's shape in NCHW16c, as Y
      op.data += block * kBlock * s.pixels();
      op.row_stride = kBlock;
      op.col_stride = 1;
    } else if (op.row_stride == 1 && op.col_stride == 0) {  // per channel
      op.data += block * kBlock;
      op.row_stride = 0;
      op.col_stride = 1;
    }
  }
  return ops;
}

#if defined(__AVX512F__)
// A block's bias and epilogue as one vector function of each position's 16
// sums: v = clamp(v * mul + add (+ the residual's vector)). It holds the
// epilogues of the convs that matter (a bias, per-channel or scalar
// multiplies and adds, an NCHW16c residual, then ReLU or Clip: ResNet's and
// MobileNetV2's), which then cost one pass that also copies the block out;
// ApplyEpilogue on a [position][16] tile ran its ops as 16-float rows, each
// with a loop of its own (a fifth of the stem conv's cycles). The clamps
// treat NaN as ApplyEpilogue's do: ReLU makes it 0, Clip keeps it.
struct LaneFinish {
  enum class Clamp { kNone, kRelu, kClip };
  __m512 mul = _mm512_set1_ps(1.0f), add = _mm512_setzero_ps();
  const float* residual = nullptr;  // the block's [position][16] at the tile's first position
  Clamp clamp = Clamp::kNone;
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();

  __m512 operator()(__m512 v, int64_t p) const {
    v = _mm512_fmadd_ps(v, mul, add);
    if (residual != nullptr) v = _mm512_add_ps(v, _mm512_loadu_ps(residual + p * kBlock));
    // max_ps and min_ps return their second operand where one is NaN.
    if (clamp == Clamp::kRelu) return _mm512_max_ps(v, _mm512_setzero_ps());
    if (clamp == Clamp::kClip) return _mm512_min_ps(hi, _mm512_max_ps(lo, v));
    return v;
  }
};

// The LaneFinish of block c0 (its first `lanes` channels) of tile t, or
// false where the ops are not of that form: adds and multiplies (per channel,
// scalar), then at most one residual of Y's shape (NCHW16c Y), then at most
// one clamp.
bool LaneFinishOf(const ConvDesc& d, const ConvTile& t, int64_t c0, int64_t lanes,
                  ActivationLayout y_layout, LaneFinish* f) {
  const ConvShape& s = d.shape;
  const __mmask16 valid = simd::Tail(lanes);
  if (d.bias != nullptr) f->add = _mm512_maskz_loadu_ps(valid, d.bias + c0);
  for (const EpilogueOp& op : d.epilogue) {
    if (f->clamp != LaneFinish::Clamp::kNone) return false;
    if (op.kind == EpilogueKind::kRelu) {
      f->clamp = LaneFinish::Clamp::kRelu;
      continue;
    }
    if (op.kind == EpilogueKind::kClip) {
      f->clamp = LaneFinish::Clamp::kClip;
      f->lo = _mm512_set1_ps(op.scalar);
      f->hi = _mm512_set1_ps(op.scalar2);
      continue;
    }
    if (f->residual != nullptr) return false;
    const float* data = op.reads_memory() ? op.data + t.image * op.batch_stride : nullptr;
    if (op.kind == EpilogueKind::kResidualAdd && data != nullptr && op.row_stride == s.pixels() &&
        op.col_stride == 1 && y_layout == ActivationLayout::kNCHWc) {
      f->residual = data + c0 * s.pixels() + t.p0 * kBlock;
      continue;
    }
    __m512 operand;
    if (op.kind == EpilogueKind::kScale)
      operand = _mm512_set1_ps(op.scalar);
    else if (data != nullptr && op.row_stride == 1 && op.col_stride == 0)
      operand = _mm512_maskz_loadu_ps(valid, data + c0);
    else if (data != nullptr && op.row_stride == 0 && op.col_stride == 0)
      operand = _mm512_set1_ps(*data);
    else
      return false;
    if (op.kind == EpilogueKind::kBiasAdd || op.kind == EpilogueKind::kResidualAdd) {
      f->add = _mm512_add_ps(f->add, operand);
    } else if (op.kind == EpilogueKind::kMultiply || op.kind == EpilogueKind::kScale) {
      f->mul = _mm512_mul_ps(f->mul, operand);
      f->add = _mm512_mul_ps(f->add, operand);
    } else {
      return false;
    }
  }
  return true;
}

// The block's 16 x ps sums, finished by f, into Y: NCHW16c as they lie
// (y at the block's first position; streamed: finished in place, then one
// run), or NCHW transposed 16 positions at a time (y at channel c0's plane,
// position p0).
void WriteFinishedBlock(const LaneFinish& f, float* tile, int64_t ps, int64_t lanes,
                        ActivationLayout y_layout, bool stream, float* y, int64_t plane) {
  if (y_layout == ActivationLayout::kNCHWc && !stream) {
    for (int64_t p = 0; p < ps; ++p)
      _mm512_storeu_ps(y + p * kBlock, f(_mm512_loadu_ps(tile + p * kBlock), p));
    return;
  }
  int64_t p = 0;
  if (y_layout == ActivationLayout::kNCHW)
    for (; p + kBlock <= ps; p += kBlock) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i) r[i] = f(_mm512_loadu_ps(tile + (p + i) * kBlock), p + i);
      Transpose16x16(r);
      for (int64_t c = 0; c < lanes; ++c) _mm512_storeu_ps(y + c * plane + p, r[c]);
    }
  for (int64_t q = p; q < ps; ++q)
    _mm512_storeu_ps(tile + q * kBlock, f(_mm512_loadu_ps(tile + q * kBlock), q));
  if (y_layout == ActivationLayout::kNCHWc)
    WriteOut(y, tile, ps * kBlock, stream);
  else
    BlockedToRows(tile + p * kBlock, ps - p, y + p, plane, lanes);
}
#endif

}  // namespace

bool EpilogueOpAddressableInBlocks(const ConvShape& s, const EpilogueOp& op) {
  return PerChannelOrScalar(op) || (op.row_stride == s.pixels() && op.col_stride == 1);
}

bool EpilogueAddressableInBlocks(const ConvShape& s, const std::vector<EpilogueOp>& ops) {
  for (const EpilogueOp& op : ops)
    if (!EpilogueOpAddressableInBlocks(s, op)) return false;
  return true;
}

bool FinishableInBlocks(const ConvDesc& d, ActivationLayout y_layout) {
  if (d.global_pool != ConvGlobalPool::kNone || d.max_pool.active()) return false;
  if (y_layout == ActivationLayout::kNCHWc) return EpilogueAddressableInBlocks(d.shape, d.epilogue);
  if (y_layout != ActivationLayout::kNCHW) return false;
  // An operand of Y's shape lies in NCHW planes: a block's 16 channels of
  // it are 16 strided reads per position. A Y too large to stay cached is
  // streamed out by the rows' form in whole runs; transposed blocks would
  // write it 16 partial lines at a time.
  const ConvShape& s = d.shape;
  return std::all_of(d.epilogue.begin(), d.epilogue.end(), PerChannelOrScalar) &&
         !StreamsOutput(4 * s.batch * s.out_channels * s.pixels());
}

void FinishBlockedConvTile(const ConvDesc& d, const ConvTile& t, float* blocks, int64_t block_ld,
                           ActivationLayout y_layout, RunMode mode, KernelStats* stats) {
  const ConvShape& s = d.shape;
  const bool stream = StreamsOutput(4 * s.batch * s.out_channels * s.pixels());
  if (mode != RunMode::kComputeOnly) {
    // Counted for the whole tile as the rows' form and the estimates count
    // it (EpilogueReadBytes).
    stats->bytes_global_to_local +=
        static_cast<int64_t>(EpilogueReadBytes(d.epilogue, t.ocs, t.ps));
    if (d.bias != nullptr) stats->bytes_global_to_local += 4 * t.ocs;
    stats->bytes_local_to_global += 4 * t.ps * t.ocs;
  }
  for (int64_t c0 = t.oc0; c0 < t.oc0 + t.ocs; c0 += kBlock) {
    const int64_t lanes = std::min(kBlock, t.oc0 + t.ocs - c0);
    float* tile = blocks + (c0 - t.oc0) / kBlock * block_ld;
    float* y = d.y + (t.image * s.out_channels + c0) * s.pixels() +
               t.p0 * (y_layout == ActivationLayout::kNCHWc ? kBlock : 1);
#if defined(__AVX512F__)
    LaneFinish f;
    if (mode == RunMode::kFull && LaneFinishOf(d, t, c0, lanes, y_layout, &f)) {
      WriteFinishedBlock(f, tile, t.ps, lanes, y_layout, stream, y, s.pixels());
      continue;
    }
#endif
    // As FinishConvTile: the bias is arithmetic (kCopyOnly skips it), the
    // epilogue's ops that read memory run in kCopyOnly.
    if (d.bias != nullptr && mode != RunMode::kCopyOnly)
      for (int64_t p = 0; p < t.ps; ++p)
        for (int64_t c = 0; c < lanes; ++c) tile[p * kBlock + c] += d.bias[c0 + c];
    // Block-aligned: a tile's channels start on a block (its oc_block is a
    // multiple of 16) and col0 0 is the block's first channel.
    ApplyEpilogue(BlockEpilogue(d, c0 / kBlock), tile, kBlock, t.ps, lanes, t.image, t.p0, 0, mode);
    if (mode == RunMode::kComputeOnly) continue;
    if (y_layout == ActivationLayout::kNCHWc)
      WriteOut(y, tile, t.ps * kBlock, stream);
    else
      BlockedToRows(tile, t.ps, y, s.pixels(), lanes);
  }
}

}  // namespace fusetune::kernels::conv_detail

#if defined(__AVX512F__)
FT_SIMD_MATH_END
#endif
