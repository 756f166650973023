#include "kernels/microkernel.h"
#include "kernels/microkernel_avx512.h"

#include <fmt/format.h>

#include <immintrin.h>

#include <cstring>
#include <string>

namespace fusetune::kernels {

namespace {

// ---- portable ------------------------------------------------------------------------

// A's element (i, p) is at a[i * row_stride + p * col_stride]: packed panels
// have strides (1, MR), row-major blocks (lda, 1).
template <int MR, int NR>
void PortableKernel(int64_t kc, const float* ap, int64_t row_stride, int64_t col_stride,
                    const float* bp, float* c, int64_t ldc, bool accumulate) {
  float acc[MR][NR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* b = bp + p * NR;
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] += ap[i * row_stride + p * col_stride] * b[j];
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

// ---- AVX-512: MR rows x NV vectors of 16 floats -------------------------------------

template <int MR, int NV, bool kCopy>
__attribute__((target("avx512f,fma"))) void Avx512Core(int64_t kc, const float* ap,
                                                       int64_t row_stride, int64_t col_stride,
                                                       const float* bp, float* c, int64_t ldc,
                                                       bool accumulate, const float* copy_src,
                                                       float* copy_dst, int64_t copy_floats) {
  avx512_internal::CarriedCopy copy(kc, copy_src, copy_dst, kCopy ? copy_floats : 0);
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    __m512 b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = _mm512_load_ps(bp + p * NV * 16 + v * 16);
    if constexpr (kCopy) copy.Step(p);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(ap[i * row_stride + p * col_stride]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
    }
  }
  if constexpr (kCopy) copy.Finish();
  avx512_internal::StoreTile<MR, NV>(acc, c, ldc, accumulate);
}

template <int MR, int NV>
__attribute__((target("avx512f,fma"))) void Avx512Kernel(int64_t kc, const float* ap,
                                                         int64_t row_stride, int64_t col_stride,
                                                         const float* bp, float* c, int64_t ldc,
                                                         bool accumulate) {
  Avx512Core<MR, NV, false>(kc, ap, row_stride, col_stride, bp, c, ldc, accumulate, nullptr,
                            nullptr, 0);
}

// ---- AVX2: MR rows x NV vectors of 8 floats ---------------------------------------------

template <int MR, int NV>
__attribute__((target("avx2,fma"))) void Avx2Kernel(int64_t kc, const float* ap, int64_t row_stride,
                                                    int64_t col_stride, const float* bp, float* c,
                                                    int64_t ldc, bool accumulate) {
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    __m256 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = _mm256_load_ps(bp + p * NV * 8 + v * 8);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(ap + i * row_stride + p * col_stride);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(a, b[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* dst = c + i * ldc + v * 8;
      const __m256 r = accumulate ? _mm256_add_ps(_mm256_loadu_ps(dst), acc[i][v]) : acc[i][v];
      _mm256_storeu_ps(dst, r);
    }
}

// Entry points with the strides fixed at compile time, so that the address
// arithmetic folds: a packed panel, or a row-major block with leading dimension lda.
template <typename K, K kernel, int MR>
void Packed(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, bool accumulate) {
  kernel(kc, ap, 1, MR, bp, c, ldc, accumulate);
}
template <typename K, K kernel>
void Rows(int64_t kc, const float* a, int64_t lda, const float* bp, float* c, int64_t ldc,
          bool accumulate) {
  kernel(kc, a, lda, 1, bp, c, ldc, accumulate);
}
// Without a copy-carrying kernel (AVX2, portable): compute, then copy.
template <typename K, K kernel>
void RowsThenCopy(int64_t kc, const float* a, int64_t lda, const float* bp, float* c, int64_t ldc,
                  bool accumulate, const float* copy_src, float* copy_dst, int64_t copy_floats) {
  kernel(kc, a, lda, 1, bp, c, ldc, accumulate);
  if (copy_floats > 0) std::memcpy(copy_dst, copy_src, copy_floats * sizeof(float));
}
template <typename K, K kernel, int MR>
void PackedThenCopy(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
                    bool accumulate, const float* copy_src, float* copy_dst, int64_t copy_floats) {
  kernel(kc, ap, 1, MR, bp, c, ldc, accumulate);
  if (copy_floats > 0) std::memcpy(copy_dst, copy_src, copy_floats * sizeof(float));
}
template <int MR, int NV>
__attribute__((target("avx512f,fma"))) void Avx512PackedCopy(int64_t kc, const float* ap,
                                                             const float* bp, float* c, int64_t ldc,
                                                             bool accumulate, const float* copy_src,
                                                             float* copy_dst, int64_t copy_floats) {
  Avx512Core<MR, NV, true>(kc, ap, 1, MR, bp, c, ldc, accumulate, copy_src, copy_dst, copy_floats);
}
template <int MR, int NV>
__attribute__((target("avx512f,fma"))) void Avx512RowsCopy(int64_t kc, const float* a, int64_t lda,
                                                           const float* bp, float* c, int64_t ldc,
                                                           bool accumulate, const float* copy_src,
                                                           float* copy_dst, int64_t copy_floats) {
  Avx512Core<MR, NV, true>(kc, a, lda, 1, bp, c, ldc, accumulate, copy_src, copy_dst, copy_floats);
}
using Generic = void (*)(int64_t, const float*, int64_t, int64_t, const float*, float*, int64_t,
                         bool);
#define FT_MICRO(isa, fn, mr, nr)                                                       \
  MicroKernel {                                                                         \
    mr, nr, isa, Packed<Generic, fn, mr>, Rows<Generic, fn>, RowsThenCopy<Generic, fn>, \
        PackedThenCopy<Generic, fn, mr>                                                 \
  }
#define FT_MICRO_AVX512(mr, nv)                                                               \
  MicroKernel {                                                                               \
    mr, nv * 16, "avx512", Packed<Generic, Avx512Kernel<mr, nv>, mr>,                         \
        Rows<Generic, Avx512Kernel<mr, nv>>, Avx512RowsCopy<mr, nv>, Avx512PackedCopy<mr, nv> \
  }

bool HasAvx512() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"); }
bool HasAvx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

const std::vector<MicroKernel>& Portable() {
  static const std::vector<MicroKernel> k = {
      FT_MICRO("portable", (PortableKernel<8, 32>), 8, 32),
      FT_MICRO("portable", (PortableKernel<6, 32>), 6, 32),
      FT_MICRO("portable", (PortableKernel<14, 16>), 14, 16),
      FT_MICRO("portable", (PortableKernel<6, 16>), 6, 16),
      FT_MICRO("portable", (PortableKernel<4, 24>), 4, 24),
      FT_MICRO("portable", (PortableKernel<7, 32>), 7, 32),
      FT_MICRO("portable", (PortableKernel<12, 32>), 12, 32),
      FT_MICRO("portable", (PortableKernel<1, 128>), 1, 128),
      FT_MICRO("portable", (PortableKernel<2, 64>), 2, 64),
      FT_MICRO("portable", (PortableKernel<4, 64>), 4, 64),
  };
  return k;
}

const std::vector<MicroKernel>& Best() {
  static const std::vector<MicroKernel> k = [] {
    std::vector<MicroKernel> list;
    if (HasAvx512()) {
      list.push_back(FT_MICRO_AVX512(8, 2));
      list.push_back(FT_MICRO_AVX512(6, 2));
      list.push_back(FT_MICRO_AVX512(14, 1));
      // 7 rows: a 14x14 map's 7 x 7 Winograd tiles (conv_winograd.cpp) in whole slivers.
      list.push_back(FT_MICRO_AVX512(7, 2));
      // 24 sums in registers: per k step 12 broadcasts and 2 loads feed 24
      // multiply-adds (8x32: 10 for 16), which is what the bf16 kernel of the
      // same shape needs to keep both dot-product pipes busy.
      list.push_back(FT_MICRO_AVX512(12, 2));
      // Thin tiles for GEMMs of a few rows (a decode step's, which stream
      // their weights): an 8-row tile computes 8 rows for 1 there, and its
      // multiply-adds crowd out the loads that stream the weights in. Wide
      // enough for 8 independent sums (an FMA's latency times its rate).
      list.push_back(FT_MICRO_AVX512(1, 8));
      list.push_back(FT_MICRO_AVX512(2, 4));
      list.push_back(FT_MICRO_AVX512(4, 4));
    }
    if (HasAvx2()) {
      list.push_back(FT_MICRO("avx2", (Avx2Kernel<6, 2>), 6, 16));
      list.push_back(FT_MICRO("avx2", (Avx2Kernel<4, 3>), 4, 24));
    }
    for (const MicroKernel& p : Portable()) {
      bool covered = false;
      for (const MicroKernel& m : list) covered = covered || (m.mr == p.mr && m.nr == p.nr);
      if (!covered) list.push_back(p);
    }
    return list;
  }();
  return k;
}

const MicroKernel* Find(const std::vector<MicroKernel>& list, int mr, int nr) {
  for (const MicroKernel& m : list)
    if (m.mr == mr && m.nr == nr) return &m;
  return nullptr;
}

}  // namespace

std::vector<std::pair<int, int>> MicroTileShapes() {
  std::vector<std::pair<int, int>> shapes;
  for (const MicroKernel& m : Best()) shapes.emplace_back(m.mr, m.nr);
  return shapes;
}

const MicroKernel* FindMicroKernel(int mr, int nr) { return Find(Best(), mr, nr); }

bool IsThinMicroTile(int mr, int nr) {
  return (mr == 1 && nr == 128) || (mr == 2 && nr == 64) || (mr == 4 && nr == 64);
}

bool HasVectorThinMicroTile(int mr, int nr) {
  const MicroKernel* m = FindMicroKernel(mr, nr);
  return IsThinMicroTile(mr, nr) && m && std::string(m->isa) != "portable";
}
const MicroKernel* FindPortableMicroKernel(int mr, int nr) { return Find(Portable(), mr, nr); }

Status CheckMicroTileAndBuffer(int mr, int nr, int64_t local_bytes, const KernelConfig& config,
                               const std::function<std::string()>& blocks) {
  auto bad = [](const std::string& msg) { return Status(Error(ErrorCode::kInvalidArgument, msg)); };
  if (!FindMicroKernel(mr, nr)) {
    std::string shapes;
    for (auto [m, n] : MicroTileShapes()) shapes += fmt::format(" {}x{}", m, n);
    return bad(fmt::format(
        "tiling.mr x tiling.nr: {}x{} is not a micro-tile shape; choose one of{}", mr, nr, shapes));
  }
  if (config.threads < 1)
    return bad(fmt::format("config.threads: {} must be positive", config.threads));
  if (local_bytes > static_cast<int64_t>(config.local_buffer_bytes))
    return bad(fmt::format("tiling: needs {} bytes of local buffer ({}), capacity is {}",
                           local_bytes, blocks(), config.local_buffer_bytes));
  return Status::Ok();
}

bool MicroTileAndBufferFit(int mr, int nr, int64_t local_bytes, const KernelConfig& config) {
  return FindMicroKernel(mr, nr) != nullptr && config.threads >= 1 &&
         local_bytes <= static_cast<int64_t>(config.local_buffer_bytes);
}

}  // namespace fusetune::kernels
