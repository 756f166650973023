// Fused attention against the reference executor's MatMul/Softmax/MatMul
// chain: masks none, causal and additive; Q, K, V read from one packed QKV
// tensor; random shapes (1, primes, non-multiples of the micro-tile) and
// tilings with a fixed seed; the decode path (a few queries) the same way.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "common/rng.h"
#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/estimate.h"
#include "kernels/microkernel.h"
#include "tests/graph/test_util.h"

namespace fusetune::kernels {
namespace {

using ::fusetune::testing::F32;
using ::fusetune::testing::Parse;

struct Case {
  int64_t b, h, sq, skv, d;
  MaskKind mask;
};

// Reference on separate [B, H, S, D] tensors; the mask is an explicit tensor.
graph::Tensor Reference(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                        const std::vector<float>& v, const std::vector<float>& mask, float scale) {
  graph::Graph g = Parse(fmt::format(
      "graph g opset 17 {{ input q: f32[{0}, {1}, {2}, {4}]  input k: f32[{0}, {1}, {3}, {4}]"
      "  input v: f32[{0}, {1}, {3}, {4}]  input m: f32[1, {1}, {2}, {3}]\n"
      "kt = Transpose(k) {{perm=[0, 1, 3, 2]}}  s = MatMul(q, kt)\n"
      "sc = Constant() {{value=f32[] [{5}]}}  ss = Mul(s, sc)  sm = Add(ss, m)\n"
      "p = Softmax(sm) {{axis=-1}}  o = MatMul(p, v)  output o }}",
      c.b, c.h, c.sq, c.skv, c.d, scale));
  auto r = graph::RunReference(g, {{"q", F32({c.b, c.h, c.sq, c.d}, q)},
                                   {"k", F32({c.b, c.h, c.skv, c.d}, k)},
                                   {"v", F32({c.b, c.h, c.skv, c.d}, v)},
                                   {"m", F32({1, c.h, c.sq, c.skv}, mask)}});
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  return r.ok() ? r->outputs.at("o") : graph::Tensor();
}

// Runs case c with tiling t on `threads` threads (Q, K, V from one packed
// QKV tensor when seq_q == seq_kv) and returns the largest absolute error
// against the reference; `stats` gets the kernel's counts.
double ErrorAgainstReference(Rng& rng, const Case& c, const AttentionTiling& t, int threads,
                             KernelStats* stats) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  // One packed tensor [B, S, 3, H, D] as a fused QKV projection writes it
  // (seq_q == seq_kv there); otherwise separate [B, S, H, D] tensors.
  const bool packed = c.sq == c.skv;
  std::vector<float> qkv(c.b * c.skv * 3 * c.h * c.d), qs(c.b * c.sq * c.h * c.d);
  for (float& x : qkv) x = static_cast<float>(rng.Normal());
  for (float& x : qs) x = static_cast<float>(rng.Normal());
  auto at = [&](int which, int64_t b, int64_t h, int64_t s, int64_t p) -> float& {
    if (which == 0 && !packed) return qs[((b * c.sq + s) * c.h + h) * c.d + p];
    return qkv[(((b * c.skv + s) * 3 + which) * c.h + h) * c.d + p];
  };
  std::vector<float> q(c.b * c.h * c.sq * c.d), k(c.b * c.h * c.skv * c.d), v(k.size());
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t p = 0; p < c.d; ++p) {
        for (int64_t s = 0; s < c.sq; ++s)
          q[((b * c.h + h) * c.sq + s) * c.d + p] = at(0, b, h, s, p);
        for (int64_t s = 0; s < c.skv; ++s) {
          k[((b * c.h + h) * c.skv + s) * c.d + p] = at(1, b, h, s, p);
          v[((b * c.h + h) * c.skv + s) * c.d + p] = at(2, b, h, s, p);
        }
      }
  std::vector<float> mask(c.h * c.sq * c.skv, 0.0f);
  for (int64_t h = 0; h < c.h; ++h)
    for (int64_t i = 0; i < c.sq; ++i)
      for (int64_t j = 0; j < c.skv; ++j) {
        float& m = mask[(h * c.sq + i) * c.skv + j];
        if (c.mask == MaskKind::kCausal && j > i + c.skv - c.sq) m = -INFINITY;
        if (c.mask == MaskKind::kAdditive) m = static_cast<float>(rng.Normal() * 2);
      }
  std::vector<float> o(c.b * c.sq * c.h * c.d, NAN);  // [B, S, H, D], as attention outputs are
  AttentionDesc d;
  d.batch = c.b;
  d.heads = c.h;
  d.seq_q = c.sq;
  d.seq_kv = c.skv;
  d.head_dim = d.value_dim = c.d;
  const int64_t row = 3 * c.h * c.d;
  const float* q_base = packed ? qkv.data() : qs.data();
  d.q = {q_base, c.sq * (packed ? row : c.h * c.d), c.d, packed ? row : c.h * c.d, 1};
  d.k = {qkv.data() + c.h * c.d, c.skv * row, c.d, row, 1};
  d.v = {qkv.data() + 2 * c.h * c.d, c.skv * row, c.d, row, 1};
  d.o = o.data();
  d.o_batch = c.sq * c.h * c.d;
  d.o_head = c.d;
  d.o_row = c.h * c.d;
  d.scale = scale;
  d.mask = c.mask;
  d.mask_data = {mask.data(), 0, c.sq * c.skv, c.skv, 1};
  KernelConfig config;
  config.threads = threads;
  auto run = RunAttention(d, t, config);
  EXPECT_TRUE(run.ok()) << run.error().ToString();
  if (!run.ok()) return INFINITY;
  *stats = *run;
  const graph::Tensor want = Reference(c, q, k, v, mask, scale);
  double err = 0;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t s = 0; s < c.sq; ++s)
        for (int64_t p = 0; p < c.d; ++p)
          err = std::max(err, std::abs(double(o[((b * c.sq + s) * c.h + h) * c.d + p]) -
                                       want.data<float>()[((b * c.h + h) * c.sq + s) * c.d + p]));
  return err;
}

// Q, K, V and O as contiguous [heads][s][dim] arrays, no mask.
AttentionDesc ContiguousHeads(const float* q, const float* k, const float* v, float* o,
                              int64_t heads, int64_t s, int64_t dim) {
  AttentionDesc d;
  d.heads = heads;
  d.seq_q = d.seq_kv = s;
  d.head_dim = d.value_dim = dim;
  d.q = {q, 0, s * dim, dim, 1};
  d.k = {k, 0, s * dim, dim, 1};
  d.v = {v, 0, s * dim, dim, 1};
  d.o = o;
  d.o_head = s * dim;
  d.o_row = dim;
  return d;
}

TEST(Attention, MatchesReferenceFromPackedQkv) {
  Rng rng(31);
  const int64_t seqs[] = {1, 5, 16, 31, 64, 97};
  const int64_t dims[] = {1, 8, 13, 64};
  for (int trial = 0; trial < 36; ++trial) {
    Case c{rng.Between(1, 2),  rng.Between(1, 3),  seqs[rng.Below(6)],
           seqs[rng.Below(6)], dims[rng.Below(4)], static_cast<MaskKind>(trial % 3)};
    if (c.mask == MaskKind::kCausal) c.skv = std::max(c.skv, c.sq);  // every query sees a key
    const auto shapes = MicroTileShapes();
    AttentionTiling t;
    std::tie(t.mr, t.nr) = shapes[rng.Below(shapes.size())];
    t.br = rng.Between(1, 80);
    t.bc = rng.Between(1, 80);
    const int threads = static_cast<int>(rng.Between(1, 3));
    KernelStats stats;
    EXPECT_LE(ErrorAgainstReference(rng, c, t, threads, &stats), 2e-5)
        << c.b << "x" << c.h << "x" << c.sq << "x" << c.skv << "x" << c.d << " "
        << MaskKindName(c.mask) << " " << t.ToString();
    if (c.sq > kDecodeMaxQueries) {  // the decode path's key splits write partial rows too
      EXPECT_EQ(stats.bytes_local_to_global, 4 * c.b * c.h * c.sq * c.d);
    }
  }
}

// Decode shapes (a few queries against many keys) take the decode path:
// the same results, with the keys split across threads when there are
// fewer (batch, head, query tile) items than threads.
TEST(AttentionDecode, MatchesReferenceWithAndWithoutKeySplits) {
  Rng rng(47);
  const int64_t queries[] = {1, 2, 5, 8}, keys[] = {1, 7, 64, 300, 1000};
  // Value rows of 128, 64 and 16 floats are added in registers, the rest
  // (13, 200's last 8) element by element.
  const int64_t dims[] = {1, 13, 64, 80, 128, 200};
  for (int trial = 0; trial < 48; ++trial) {
    Case c{rng.Between(1, 2),  rng.Between(1, 3),  queries[rng.Below(4)],
           keys[rng.Below(5)], dims[rng.Below(6)], static_cast<MaskKind>(trial % 3)};
    if (c.mask == MaskKind::kCausal) c.skv = std::max(c.skv, c.sq);
    AttentionTiling t;
    t.br = rng.Between(1, 8);
    t.bc = rng.Between(1, 128);
    const int threads = static_cast<int>(rng.Between(1, 4));
    KernelStats stats;
    EXPECT_LE(ErrorAgainstReference(rng, c, t, threads, &stats), 2e-5)
        << c.h << "x" << c.sq << "x" << c.skv << "x" << c.d << " " << MaskKindName(c.mask) << " "
        << t.ToString() << " threads " << threads;
  }
}

// One head, one query, two threads: the keys are split in two ranges, each
// read once; the partial rows go out and come back for the combination.
TEST(AttentionDecode, SplitKeysAreReadOnceAndTheSplitsCombine) {
  const int64_t s = 256, dim = 32;
  std::vector<float> q(dim), k(s * dim), v(s * dim), o(dim), o_one(dim);
  for (int64_t i = 0; i < s * dim; ++i) {
    k[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
    v[i] = 0.02f * static_cast<float>(i % 11);
  }
  for (int64_t i = 0; i < dim; ++i) q[i] = 0.1f * static_cast<float>(i % 5);
  AttentionDesc d = ContiguousHeads(q.data(), k.data(), v.data(), o.data(), 1, s, dim);
  d.seq_q = 1;
  d.q = {q.data(), 0, dim, dim, 1};
  AttentionTiling t;
  t.bc = 64;
  KernelConfig two;
  two.threads = 2;
  EXPECT_EQ(DecodeKeySplits(d, t, 2), 2);
  auto split = RunAttention(d, t, two);
  ASSERT_TRUE(split.ok()) << split.error().ToString();
  EXPECT_EQ(split->bytes_global_to_local, 4 * (2 * dim + 2 * s * dim + 2 * (dim + 2)));
  EXPECT_EQ(split->bytes_local_to_global, 4 * (2 * (dim + 2) + dim));
  KernelConfig one;
  one.threads = 1;
  d.o = o_one.data();
  auto whole = RunAttention(d, t, one);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->bytes_global_to_local, 4 * (dim + 2 * s * dim));
  for (int64_t i = 0; i < dim; ++i) EXPECT_NEAR(o[i], o_one[i], 1e-6) << i;
  EXPECT_LE(DecodeLocalBytes(d, t), AttentionLocalBytes(d, t));
  // The run modes: copies without arithmetic move the same bytes, the
  // arithmetic alone none.
  auto copy = RunAttention(d, t, two, RunMode::kCopyOnly);
  auto compute = RunAttention(d, t, two, RunMode::kComputeOnly);
  ASSERT_TRUE(copy.ok() && compute.ok());
  EXPECT_EQ(copy->bytes_global_to_local, split->bytes_global_to_local);
  EXPECT_EQ(compute->bytes_global_to_local + compute->bytes_local_to_global, 0);
}

// Tiles are dealt to threads by head: with one key block per head, each
// thread packs a head's K and V once, however many query tiles it runs.
TEST(Attention, KeysAndValuesArePackedOncePerHeadAndThread) {
  const int64_t heads = 4, s = 64, dim = 16;
  std::vector<float> q(heads * s * dim), k(q.size()), v(q.size()), o(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = 0.01f * static_cast<float>(i % 13);
    k[i] = 0.02f * static_cast<float>(i % 7);
    v[i] = 0.03f * static_cast<float>(i % 5);
  }
  AttentionDesc d = ContiguousHeads(q.data(), k.data(), v.data(), o.data(), heads, s, dim);
  AttentionTiling t;
  t.br = 16;
  t.bc = 64;
  KernelConfig two;
  two.threads = 2;
  auto stats = RunAttention(d, t, two);
  ASSERT_TRUE(stats.ok()) << stats.error().ToString();
  EXPECT_EQ(stats->bytes_global_to_local, 4 * heads * (s * dim + 2 * s * dim));
  EXPECT_EQ(EstimateAttention(d, t, 2).bytes_in, static_cast<double>(stats->bytes_global_to_local));
  std::vector<float> one_thread(o.size());
  d.o = one_thread.data();
  KernelConfig one;
  one.threads = 1;
  ASSERT_TRUE(RunAttention(d, t, one).ok());
  EXPECT_EQ(o, one_thread);  // the same tiles, computed the same way
}

// Q is read once; K and V once per query tile, unless the panels still hold
// that head's key block from the thread's previous tile.
TEST(Attention, TrafficIsQOnceAndKvOncePerQueryTile) {
  const int64_t s = 64, dim = 16;
  std::vector<float> q(s * dim, 0.1f), k(s * dim, 0.2f), v(s * dim, 0.3f), o(s * dim);
  AttentionDesc d = ContiguousHeads(q.data(), k.data(), v.data(), o.data(), 1, s, dim);
  AttentionTiling t;
  t.br = 16;
  t.bc = 32;
  KernelConfig one;
  one.threads = 1;
  auto full = RunAttention(d, t, one);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->bytes_global_to_local, 4 * (s * dim + 4 * 2 * s * dim));
  d.mask = MaskKind::kCausal;  // key blocks above the diagonal are skipped
  auto causal = RunAttention(d, t, one);
  ASSERT_TRUE(causal.ok());
  // Keys 0-31, packed for the second query tile, are still in the panels
  // when the third tile starts: not packed again.
  EXPECT_EQ(causal->bytes_global_to_local, 4 * (s * dim + (16 + 32 + 48 + 64 - 32) * 2 * dim));
  auto copy = RunAttention(d, t, one, RunMode::kCopyOnly);
  auto compute = RunAttention(d, t, one, RunMode::kComputeOnly);
  ASSERT_TRUE(copy.ok() && compute.ok());
  EXPECT_EQ(copy->bytes_global_to_local, causal->bytes_global_to_local);
  EXPECT_EQ(compute->bytes_global_to_local + compute->bytes_local_to_global, 0);
  t.br = 1 << 16;
  EXPECT_NE(RunAttention(d, t, one).error().message().find("local buffer"), std::string::npos);
  d.mask = MaskKind::kAdditive;
  EXPECT_NE(RunAttention(d, AttentionTiling(), one).error().message().find("mask_data"),
            std::string::npos);
}

}  // namespace
}  // namespace fusetune::kernels
