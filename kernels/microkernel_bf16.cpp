#include "kernels/microkernel_bf16.h"

#include <fmt/format.h>

#include <immintrin.h>

#include <cstring>

#include "kernels/microkernel.h"
#include "kernels/microkernel_avx512.h"
#include "kernels/precision.h"

namespace fusetune::kernels {

namespace {

// Where row i's k-pair q of A lies: row-major with leading dimension lda,
// or packed in k-pairs (microkernel_bf16.h's fn_packed_a).
template <int MR, bool kPackedA>
inline const Bf16* PairOf(const Bf16* a, int64_t lda, int64_t q, int i) {
  return kPackedA ? a + (q * MR + i) * 2 : a + i * lda + 2 * q;
}

template <int MR, int NR, bool kPackedA = false>
void PortableBf16(int64_t kpairs, const Bf16* a, int64_t lda, const Bf16* bp, float* c, int64_t ldc,
                  bool accumulate) {
  float acc[MR][NR] = {};
  for (int64_t q = 0; q < kpairs; ++q) {
    const Bf16* b = bp + q * NR * 2;
    for (int i = 0; i < MR; ++i) {
      const Bf16* pair = PairOf<MR, kPackedA>(a, lda, q, i);
      const float a0 = Bf16ToFloat(pair[0]), a1 = Bf16ToFloat(pair[1]);
      for (int j = 0; j < NR; ++j)
        acc[i][j] += a0 * Bf16ToFloat(b[2 * j]) + a1 * Bf16ToFloat(b[2 * j + 1]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

template <int MR, int NR, bool kPackedA = false>
void PortableBf16Copy(int64_t kpairs, const Bf16* a, int64_t lda, const Bf16* bp, float* c,
                      int64_t ldc, bool accumulate, const float* copy_src, float* copy_dst,
                      int64_t copy_floats) {
  PortableBf16<MR, NR, kPackedA>(kpairs, a, lda, bp, c, ldc, accumulate);
  if (copy_floats > 0) std::memcpy(copy_dst, copy_src, copy_floats * sizeof(float));
}

// MR rows x NV vectors of 16 float sums. Per k-pair: NV loads of 32 bf16
// from the B panel, MR broadcasts of one A pair (32 bits), MR x NV
// vdpbf16ps: the same register blocking as the f32 kernel at twice the
// multiply-adds per instruction.
template <int MR, int NV, bool kCopy, bool kPackedA>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void Bf16Core(
    int64_t kpairs, const Bf16* a, int64_t lda, const Bf16* bp, float* c, int64_t ldc,
    bool accumulate, const float* copy_src, float* copy_dst, int64_t copy_floats) {
  avx512_internal::CarriedCopy copy(kpairs, copy_src, copy_dst, kCopy ? copy_floats : 0);
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t q = 0; q < kpairs; ++q) {
    __m512bh b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      b[v] = (__m512bh)_mm512_load_si512(bp + (q * NV * 16 + v * 16) * 2);
    if constexpr (kCopy) copy.Step(q);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      int32_t pair;
      std::memcpy(&pair, PairOf<MR, kPackedA>(a, lda, q, i), 4);
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, b[v]);
    }
  }
  if constexpr (kCopy) copy.Finish();
  avx512_internal::StoreTile<MR, NV>(acc, c, ldc, accumulate);
}

template <int MR, int NV, bool kPackedA = false>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void Bf16Kernel(int64_t kpairs,
                                                                       const Bf16* a, int64_t lda,
                                                                       const Bf16* bp, float* c,
                                                                       int64_t ldc,
                                                                       bool accumulate) {
  Bf16Core<MR, NV, false, kPackedA>(kpairs, a, lda, bp, c, ldc, accumulate, nullptr, nullptr, 0);
}

template <int MR, int NV, bool kPackedA = false>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void Bf16KernelCopy(
    int64_t kpairs, const Bf16* a, int64_t lda, const Bf16* bp, float* c, int64_t ldc,
    bool accumulate, const float* copy_src, float* copy_dst, int64_t copy_floats) {
  Bf16Core<MR, NV, true, kPackedA>(kpairs, a, lda, bp, c, ldc, accumulate, copy_src, copy_dst,
                                   copy_floats);
}

#define FT_BF16_PORTABLE(mr, nr)                                        \
  Bf16MicroKernel {                                                     \
    mr, nr, "portable", PortableBf16<mr, nr>, PortableBf16Copy<mr, nr>, \
        PortableBf16<mr, nr, true>, PortableBf16Copy<mr, nr, true>      \
  }
#define FT_BF16_AVX512(mr, nv)                                              \
  Bf16MicroKernel {                                                         \
    mr, nv * 16, "avx512_bf16", Bf16Kernel<mr, nv>, Bf16KernelCopy<mr, nv>, \
        Bf16Kernel<mr, nv, true>, Bf16KernelCopy<mr, nv, true>              \
  }

const std::vector<Bf16MicroKernel>& Portable() {
  static const std::vector<Bf16MicroKernel> k = {
      FT_BF16_PORTABLE(8, 32),  FT_BF16_PORTABLE(6, 32),  FT_BF16_PORTABLE(14, 16),
      FT_BF16_PORTABLE(7, 32),  FT_BF16_PORTABLE(12, 32), FT_BF16_PORTABLE(6, 16),
      FT_BF16_PORTABLE(1, 128), FT_BF16_PORTABLE(2, 64),  FT_BF16_PORTABLE(4, 64)};
  return k;
}

const std::vector<Bf16MicroKernel>& Best() {
  static const std::vector<Bf16MicroKernel> k = [] {
    if (!CpuHasBf16Dot()) return Portable();
    return std::vector<Bf16MicroKernel>{
        FT_BF16_AVX512(8, 2), FT_BF16_AVX512(6, 2),  FT_BF16_AVX512(14, 1),
        FT_BF16_AVX512(7, 2), FT_BF16_AVX512(12, 2), FT_BF16_AVX512(6, 1),
        FT_BF16_AVX512(1, 8), FT_BF16_AVX512(2, 4),  FT_BF16_AVX512(4, 4)};
  }();
  return k;
}

const Bf16MicroKernel* Find(const std::vector<Bf16MicroKernel>& list, int mr, int nr) {
  for (const Bf16MicroKernel& m : list)
    if (m.mr == mr && m.nr == nr) return &m;
  return nullptr;
}

}  // namespace

std::vector<std::pair<int, int>> Bf16MicroTileShapes() {
  std::vector<std::pair<int, int>> shapes;
  for (auto [mr, nr] : MicroTileShapes())
    if (Find(Best(), mr, nr)) shapes.emplace_back(mr, nr);
  return shapes;
}

const Bf16MicroKernel* FindBf16MicroKernel(int mr, int nr) { return Find(Best(), mr, nr); }

std::string NoBf16MicroKernel(int mr, int nr) {
  std::string shapes;
  for (auto [m, n] : Bf16MicroTileShapes()) shapes += fmt::format(" {}x{}", m, n);
  return fmt::format("tiling.mr x tiling.nr: {}x{} has no bf16 micro-kernel; choose one of{}", mr,
                     nr, shapes);
}
const Bf16MicroKernel* FindPortableBf16MicroKernel(int mr, int nr) {
  return Find(Portable(), mr, nr);
}

}  // namespace fusetune::kernels
