#include "kernels/attention_decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/fast_math.h"
#include "kernels/row_simd.h"

#if defined(__AVX512F__)
#include "kernels/simd_math.h"
#endif

namespace fusetune::kernels {

namespace {

int64_t CeilDiv(int64_t x, int64_t m) { return (x + m - 1) / m; }

// One (batch, head, query tile) and the key range [k0, k1) of one split.
struct DecodeItem {
  int64_t b, h, i0, rows, k0, k1;
};

int64_t MaxTileRows(const AttentionDesc& d, const AttentionTiling& t) {
  return std::min(t.br, d.seq_q);
}

#if defined(__AVX512F__)
float HorizontalSum(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s4, _mm_movehdup_ps(s4)));
}
#endif

float Dot(const float* a, const float* b, int64_t n) {
  int64_t p = 0;
  float sum = 0;
#if defined(__AVX512F__)
  // Two chains: a 128-float row is 8 multiply-adds, 4 deep each.
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  for (; p + 32 <= n; p += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + p), _mm512_loadu_ps(b + p), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + p + 16), _mm512_loadu_ps(b + p + 16), acc1);
  }
  for (; p + 16 <= n; p += 16)
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + p), _mm512_loadu_ps(b + p), acc0);
  sum = HorizontalSum(_mm512_add_ps(acc0, acc1));
#endif
  for (; p < n; ++p) sum += a[p] * b[p];
  return sum;
}

// y += alpha * x
void Axpy(float alpha, const float* x, float* y, int64_t n) {
  int64_t p = 0;
#if defined(__AVX512F__)
  const __m512 a = _mm512_set1_ps(alpha);
  for (; p + 16 <= n; p += 16)
    _mm512_storeu_ps(y + p, _mm512_fmadd_ps(a, _mm512_loadu_ps(x + p), _mm512_loadu_ps(y + p)));
#endif
  for (; p < n; ++p) y[p] += alpha * x[p];
}

#if defined(__AVX512F__)
// o[0, 16 NV) += sum over keys j of p[j] * v[j * ld + (0, 16 NV)]: the
// output columns stay in registers across the block's keys.
template <int NV>
void AddValueColumns(const float* p, int64_t keys, const float* v, int64_t ld, float* o) {
  __m512 acc[NV];
#pragma GCC unroll 8
  for (int c = 0; c < NV; ++c) acc[c] = _mm512_loadu_ps(o + 16 * c);
  for (int64_t j = 0; j < keys; ++j) {
    if (p[j] == 0.0f) continue;  // masked or underflowed: as the reference skips it
    const __m512 a = _mm512_set1_ps(p[j]);
    const float* row = v + j * ld;
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) acc[c] = _mm512_fmadd_ps(a, _mm512_loadu_ps(row + 16 * c), acc[c]);
  }
#pragma GCC unroll 8
  for (int c = 0; c < NV; ++c) _mm512_storeu_ps(o + 16 * c, acc[c]);
}
#endif

// o[0, dv) += sum over keys j of p[j] * v[j * dv + (0, dv)].
void AddValues(const float* p, int64_t keys, const float* v, int64_t dv, float* o) {
  int64_t c = 0;
#if defined(__AVX512F__)
  for (; c + 128 <= dv; c += 128) AddValueColumns<8>(p, keys, v + c, dv, o + c);
  for (; c + 64 <= dv; c += 64) AddValueColumns<4>(p, keys, v + c, dv, o + c);
  for (; c + 16 <= dv; c += 16) AddValueColumns<1>(p, keys, v + c, dv, o + c);
#endif
  if (c == dv) return;
  for (int64_t j = 0; j < keys; ++j)
    if (p[j] != 0.0f) Axpy(p[j], v + j * dv + c, o + c, dv - c);
}

// The rows of a key block still in global memory: where the next block's
// K and V rows start, and how many the compute of this one prefetches.
struct KeyRows {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t k_row = 0, v_row = 0, keys = 0;
};

// At most this much of the next block is prefetched while a block computes:
// the block's compute is a fraction of its copy, and more would push the
// local buffer's K and V out of L2.
constexpr int64_t kPrefetchBytes = 256 << 10;

void PrefetchRow(const float* row, int64_t floats) {
#if defined(__AVX512F__)
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t at = 0; at < 4 * floats; at += 64) _mm_prefetch(p + at, _MM_HINT_T1);
#else
  (void)row;
  (void)floats;
#endif
}

// Copies `rows` rows of `width` floats of a view (row r, column c at
// base[r * row + c * col]) into dst, `width` floats apart.
int64_t CopyRows(const float* base, int64_t row, int64_t col, int64_t rows, int64_t width,
                 float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = base + r * row;
    float* out = dst + r * width;
    if (col == 1)
      std::memcpy(out, src, width * sizeof(float));
    else
      for (int64_t c = 0; c < width; ++c) out[c] = src[c * col];
  }
  return static_cast<int64_t>(sizeof(float)) * rows * width;
}

// One thread's decode work in its local buffer: per item, the running
// maxima, sums and unnormalised output rows of its key range.
class DecodeRunner {
 public:
  DecodeRunner(const AttentionDesc& d, const AttentionTiling& t, RunMode mode)
      : d_(d),
        bc_(std::min(t.bc, d.seq_kv)),
        rows_(MaxTileRows(d, t)),
        mode_(mode),
        local_(static_cast<size_t>(DecodeLocalBytes(d, t))) {
    q_ = local_.Take(rows_ * d.head_dim);
    k_ = local_.Take(bc_ * d.head_dim);
    v_ = local_.Take(bc_ * d.value_dim);
    s_ = local_.Take(rows_ * bc_);
    o_ = local_.Take(rows_ * d.value_dim);
    m_ = local_.Take(rows_);
    sum_ = local_.Take(rows_);
    if (d.mask == MaskKind::kAdditive) mask_ = local_.Take(rows_ * bc_);
    if (mode == RunMode::kComputeOnly) {  // never copied: ordinary values
      std::fill(q_, q_ + rows_ * d.head_dim, 0.05f);
      std::fill(k_, k_ + bc_ * d.head_dim, 0.05f);
      std::fill(v_, v_ + bc_ * d.value_dim, 0.5f);
      if (mask_) std::fill(mask_, mask_ + rows_ * bc_, 0.0f);
    }
  }

  // Runs `item`; its partial result is then in o(), m(), sum(). `next`:
  // the item this thread runs after it, whose first block the last one
  // prefetches.
  void Run(const DecodeItem& item, const DecodeItem* next) {
    CopyQ(item);
    std::fill(m_, m_ + item.rows, -INFINITY);
    std::fill(sum_, sum_ + item.rows, 0.0f);
    std::fill(o_, o_ + item.rows * d_.value_dim, 0.0f);
    for (int64_t j0 = item.k0; j0 < item.k1; j0 += bc_) {
      const int64_t cols = std::min(bc_, item.k1 - j0);
      CopyKeysAndValues(item, j0, cols);
      if (mode_ == RunMode::kCopyOnly) continue;
      Scores(item, j0, cols, mode_ == RunMode::kFull ? RowsAfter(item, j0, next) : KeyRows{});
      for (int64_t i = 0; i < item.rows; ++i) {
        float* p = s_ + i * bc_;
        OnlineSoftmaxRow(p, cols, &m_[i], &sum_[i], o_ + i * d_.value_dim, d_.value_dim);
        AddValues(p, cols, v_, d_.value_dim, o_ + i * d_.value_dim);
      }
    }
  }

  const float* o() const { return o_; }
  const float* m() const { return m_; }
  const float* sum() const { return sum_; }
  KernelStats stats;

 private:
  void CopyQ(const DecodeItem& it) {
    if (mode_ == RunMode::kComputeOnly) return;
    const AttentionView& q = d_.q;
    const float* base = q.data + it.b * q.batch + it.h * q.head + it.i0 * q.row;
    stats.bytes_global_to_local += CopyRows(base, q.row, q.col, it.rows, d_.head_dim, q_);
    for (int64_t p = 0; p < it.rows * d_.head_dim; ++p) q_[p] *= d_.scale;
  }

  void CopyKeysAndValues(const DecodeItem& it, int64_t j0, int64_t cols) {
    if (mode_ == RunMode::kComputeOnly) return;
    const AttentionView &k = d_.k, &v = d_.v;
    stats.bytes_global_to_local += CopyRows(k.data + it.b * k.batch + it.h * k.head + j0 * k.row,
                                            k.row, k.col, cols, d_.head_dim, k_);
    stats.bytes_global_to_local += CopyRows(v.data + it.b * v.batch + it.h * v.head + j0 * v.row,
                                            v.row, v.col, cols, d_.value_dim, v_);
    if (mask_) {
      const AttentionView& mk = d_.mask_data;
      stats.bytes_global_to_local +=
          CopyRows(mk.data + it.b * mk.batch + it.h * mk.head + it.i0 * mk.row + j0 * mk.col,
                   mk.row, mk.col, it.rows, cols, mask_);
    }
  }

  // The block after the one at j0 (of `item`, else the first of `next`):
  // what the compute of this one prefetches, while the copies wait for it.
  // Only rows that lie contiguously (a view's col == 1) are prefetched.
  KeyRows RowsAfter(const DecodeItem& item, int64_t j0, const DecodeItem* next) const {
    const AttentionView &k = d_.k, &v = d_.v;
    if (k.col != 1 || v.col != 1) return {};
    const DecodeItem* it = &item;
    int64_t start = j0 + bc_;
    if (start >= item.k1) {
      if (next == nullptr) return {};
      it = next;
      start = next->k0;
    }
    const int64_t row_bytes = static_cast<int64_t>(sizeof(float)) * (d_.head_dim + d_.value_dim);
    KeyRows r;
    r.k = k.data + it->b * k.batch + it->h * k.head + start * k.row;
    r.v = v.data + it->b * v.batch + it->h * v.head + start * v.row;
    r.k_row = k.row;
    r.v_row = v.row;
    r.keys = std::min({bc_, it->k1 - start, kPrefetchBytes / row_bytes});
    return r;
  }

  // Scaled scores of the block, masked: -inf past the causal diagonal, the
  // additive mask's block (copied with K and V, `cols` apart) added. The
  // first row's pass prefetches `ahead`, a row of K and V a key.
  void Scores(const DecodeItem& it, int64_t j0, int64_t cols, const KeyRows& ahead) {
    const int64_t offset = d_.seq_kv - d_.seq_q;
    for (int64_t i = 0; i < it.rows; ++i) {
      float* s = s_ + i * bc_;
      const float* q = q_ + i * d_.head_dim;
      for (int64_t j = 0; j < cols; ++j) {
        if (i == 0 && j < ahead.keys) {
          PrefetchRow(ahead.k + j * ahead.k_row, d_.head_dim);
          PrefetchRow(ahead.v + j * ahead.v_row, d_.value_dim);
        }
        s[j] = Dot(q, k_ + j * d_.head_dim, d_.head_dim);
      }
      if (d_.mask == MaskKind::kCausal)
        for (int64_t j = std::max<int64_t>(0, it.i0 + i + offset + 1 - j0); j < cols; ++j)
          s[j] = -INFINITY;
      if (mask_)
        for (int64_t j = 0; j < cols; ++j) s[j] += mask_[i * cols + j];
    }
  }

  const AttentionDesc& d_;
  int64_t bc_, rows_;
  RunMode mode_;
  LocalBuffer local_;
  float *q_, *k_, *v_, *s_, *o_, *m_, *sum_, *mask_ = nullptr;
};

std::vector<DecodeItem> DecodeItems(const AttentionDesc& d, const AttentionTiling& t,
                                    int64_t splits) {
  std::vector<DecodeItem> items;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t i0 = 0; i0 < d.seq_q; i0 += t.br) {
        const int64_t rows = std::min(t.br, d.seq_q - i0), end = AttentionKeyEnd(d, i0, rows);
        // Ranges of whole key blocks, as even as the blocks allow.
        const int64_t bc = std::min(t.bc, d.seq_kv), blocks = CeilDiv(end, bc);
        for (int64_t s = 0; s < splits; ++s) {
          const int64_t k0 = std::min(end, blocks * s / splits * bc),
                        k1 = std::min(end, blocks * (s + 1) / splits * bc);
          items.push_back({b, h, i0, rows, k0, s + 1 == splits ? end : k1});
        }
      }
  return items;
}

// An item's output rows into O, scaled by 1 / sum.
void WriteRows(const AttentionDesc& d, const DecodeItem& it, const float* o, const float* sum,
               RunMode mode, KernelStats* stats) {
  if (mode == RunMode::kComputeOnly) return;
  float* base = d.o + it.b * d.o_batch + it.h * d.o_head + it.i0 * d.o_row;
  for (int64_t i = 0; i < it.rows; ++i) {
    const float inv = mode == RunMode::kCopyOnly || sum[i] == 0 ? 0.0f : 1.0f / sum[i];
    for (int64_t c = 0; c < d.value_dim; ++c) base[i * d.o_row + c] = o[i * d.value_dim + c] * inv;
  }
  stats->bytes_local_to_global += static_cast<int64_t>(sizeof(float)) * it.rows * d.value_dim;
}

// A split item's partial result, kept in global memory until every split
// of its query tile is done: rows x (value_dim output, max, sum).
struct Partials {
  int64_t stride;  // floats per item
  std::vector<float> data;
  float* o(size_t item) { return data.data() + item * stride; }
};

void CombineSplits(const AttentionDesc& d, const std::vector<DecodeItem>& items, int64_t splits,
                   Partials& parts, RunMode mode, KernelStats* stats) {
  const int64_t dv = d.value_dim;
  for (size_t first = 0; first < items.size(); first += splits) {
    const DecodeItem& it = items[first];
    const int64_t rows = it.rows;
    std::vector<float> o(rows * dv, 0.0f), m(rows, -INFINITY), sum(rows, 0.0f);
    for (int64_t s = 0; s < splits; ++s) {
      const float* part = parts.o(first + s);
      const float* pm = part + rows * dv;
      for (int64_t i = 0; i < rows; ++i) m[i] = std::max(m[i], pm[i]);
    }
    for (int64_t s = 0; s < splits; ++s) {
      const float* part = parts.o(first + s);
      const float *pm = part + rows * dv, *ps = pm + rows;
      for (int64_t i = 0; i < rows; ++i) {
        if (pm[i] == -INFINITY) continue;  // a range this row sees no key of
        const float w = FastExp(pm[i] - m[i]);
        sum[i] += w * ps[i];
        Axpy(w, part + i * dv, o.data() + i * dv, dv);
      }
    }
    if (mode != RunMode::kComputeOnly)
      stats->bytes_global_to_local +=
          static_cast<int64_t>(sizeof(float)) * splits * rows * (dv + 2);
    WriteRows(d, it, o.data(), sum.data(), mode, stats);
  }
}

}  // namespace

int64_t DecodeKeySplits(const AttentionDesc& d, const AttentionTiling& t, int threads) {
  const int64_t tiles = d.batch * d.heads * CeilDiv(d.seq_q, t.br);
  if (tiles >= threads) return 1;
  const int64_t blocks = CeilDiv(d.seq_kv, std::min(t.bc, d.seq_kv));
  return std::clamp<int64_t>(CeilDiv(threads, tiles), 1, blocks);
}

int64_t DecodeLocalBytes(const AttentionDesc& d, const AttentionTiling& t) {
  const int64_t rows = MaxTileRows(d, t), bc = std::min(t.bc, d.seq_kv);
  const int64_t mask = d.mask == MaskKind::kAdditive ? rows * bc : 0;
  const int64_t floats = rows * d.head_dim + bc * (d.head_dim + d.value_dim) + rows * bc +
                         rows * d.value_dim + 2 * rows + mask;
  return static_cast<int64_t>(sizeof(float)) * floats + 8 * 64;
}

KernelStats RunAttentionDecode(const AttentionDesc& d, const AttentionTiling& t,
                               const KernelConfig& config, RunMode mode) {
  const int64_t splits = DecodeKeySplits(d, t, config.threads);
  const std::vector<DecodeItem> items = DecodeItems(d, t, splits);
  const int64_t count = static_cast<int64_t>(items.size());
  Partials parts{MaxTileRows(d, t) * (d.value_dim + 2), {}};
  if (splits > 1) parts.data.resize(static_cast<size_t>(count * parts.stride));
  KernelStats stats = RunThreadShares(config.threads, [&](int th) {
    DecodeRunner runner(d, t, mode);
    for (int64_t i = count * th / config.threads; i < count * (th + 1) / config.threads; ++i) {
      const DecodeItem& it = items[i];
      const int64_t last = count * (th + 1) / config.threads - 1;
      runner.Run(it, i < last ? &items[i + 1] : nullptr);
      if (splits == 1) {
        WriteRows(d, it, runner.o(), runner.sum(), mode, &runner.stats);
      } else {
        float* part = parts.o(i);
        const int64_t dv = d.value_dim;
        std::memcpy(part, runner.o(), sizeof(float) * it.rows * dv);
        std::memcpy(part + it.rows * dv, runner.m(), sizeof(float) * it.rows);
        std::memcpy(part + it.rows * (dv + 1), runner.sum(), sizeof(float) * it.rows);
        if (mode != RunMode::kComputeOnly)
          runner.stats.bytes_local_to_global +=
              static_cast<int64_t>(sizeof(float)) * it.rows * (dv + 2);
      }
      ++runner.stats.tiles;
    }
    return runner.stats;
  });
  if (splits > 1) CombineSplits(d, items, splits, parts, mode, &stats);
  return stats;
}

}  // namespace fusetune::kernels

#if defined(__AVX512F__)
FT_SIMD_MATH_END
#endif
