// Helpers shared by the ops_*.cpp files (private to graph/).
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <fmt/format.h>
#include <array>

#include "graph/op_registry.h"

namespace fusetune::graph::ops {

// Normalises a possibly negative axis against `rank`; error when out of range.
Result<int64_t> NormalizeAxis(const InferContext& ctx, int64_t axis, int64_t rank);
int64_t WrapAxis(int64_t axis, int64_t rank);  // for kernels, after inference checked it

// Numpy-style multidirectional broadcasting.
Result<Dims> BroadcastDims(const InferContext& ctx, const std::vector<const Dims*>& shapes);
// The broadcast of two shapes already known to be compatible (kernels).
Dims BroadcastPair(const Dims& a, const Dims& b);
// Element strides of `in` read as if broadcast to `out` (0 on broadcast axes).
std::vector<int64_t> BroadcastStrides(const Dims& in, const Dims& out);

// The input as f32 (shared when it already is), and back to `dtype`.
Tensor AsF32(const Tensor& t);
Tensor FromF32(Tensor t, DataType dtype);

// Runs body(out_offset, count, offsets, inner_strides) for each contiguous run
// along the last output axis, in parallel when the work is large enough.
template <size_t N, typename Body>
void BroadcastLoop(const Dims& out, const std::array<std::vector<int64_t>, N>& strides, Body body) {
  const int64_t rank = static_cast<int64_t>(out.size());
  std::array<int64_t, N> inner_stride{};
  if (rank == 0) {
    std::array<int64_t, N> offsets{};
    body(int64_t{0}, int64_t{1}, offsets, inner_stride);
    return;
  }
  const int64_t inner = out[rank - 1];
  const int64_t total = NumElements(out);
  if (total == 0) return;
  const int64_t outer = total / inner;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][rank - 1];
  auto run_rows = [&](int64_t begin, int64_t end) {
    std::array<int64_t, N> offsets;
    for (int64_t o = begin; o < end; ++o) {
      offsets.fill(0);
      int64_t rem = o;
      for (int64_t d = rank - 2; d >= 0; --d) {
        const int64_t idx = rem % out[d];
        rem /= out[d];
        for (size_t k = 0; k < N; ++k) offsets[k] += idx * strides[k][d];
      }
      body(o * inner, inner, offsets, inner_stride);
    }
  };
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(inner, 1));
  if (outer <= grain) {
    run_rows(0, outer);
  } else {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, outer, grain),
                      [&](const tbb::blocked_range<int64_t>& r) { run_rows(r.begin(), r.end()); });
  }
}

// Parallel loop over [0, n) in chunks when n is large.
template <typename Body>
void ParallelRange(int64_t n, int64_t grain, Body body) {
  if (n <= grain) {
    body(int64_t{0}, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end()); });
}

// An elementwise float op over a tensor of any float dtype: computed in f32,
// returned in `out_dtype`.
template <typename F>
Tensor FloatUnary(const Tensor& in, DataType out_dtype, F f) {
  Tensor x = AsF32(in);
  Tensor out(DataType::kFloat32, x.dims());
  const float* px = x.data<float>();
  float* po = out.data<float>();
  ParallelRange(x.numel(), 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) po[i] = f(px[i]);
  });
  return FromF32(std::move(out), out_dtype);
}

// Single-output type with the given dtype and dims.
inline std::vector<TensorType> One(DataType dtype, Dims dims) {
  TensorType t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  return {t};
}

// Costs.
OpCost NoCost(const Node&, const std::vector<const TensorType*>&,
              const std::vector<const TensorType*>&);
double OutputElements(const std::vector<const TensorType*>& outputs);
double InputElements(const std::vector<const TensorType*>& inputs);

// Reads axes given as an attribute (older opsets) or as a constant input.
Result<std::vector<int64_t>> AxesFromAttrOrInput(const InferContext& ctx, size_t input_index,
                                                 bool* present);
std::vector<int64_t> AxesFromAttrOrInput(const KernelContext& ctx, size_t input_index);

}  // namespace fusetune::graph::ops
