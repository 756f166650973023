// Peers measured in the same run, on the same problems:
//   peer/eigen/gemm_then_bias_gelu   Eigen's GEMM (2 OpenMP threads), then a separate bias + GELU
//   pass peer/onednn/gemm_bias_gelu       oneDNN's matmul with bias and a gelu_erf post-op, plain
//   layouts peer/onednn/gemm_bias_gelu_packed_weights   the same with weights reordered to oneDNN's
//                                    preferred layout once, outside the timed loop
// Halide's autoschedulers on attention live in bench_peer_halide.cpp.
#include <Eigen/Core>
#include <cmath>

#include "bench/bench_common.h"
#include "kernels/fast_math.h"

#ifdef FUSETUNE_HAVE_ONEDNN
#include <dnnl.hpp>
#endif

namespace fusetune::bench {

void RegisterHalidePeers();  // bench_peer_halide.cpp, when Halide is found

namespace {

constexpr int64_t kM = 384, kN = 3072, kK = 768;

struct PeerGemmData {
  std::vector<float> a = RandomVector(kM * kK, 1), b = RandomVector(kK * kN, 2, 0.05f),
                     bias = RandomVector(kN, 3), c = std::vector<float>(kM * kN);
};
PeerGemmData& Data() {
  static PeerGemmData data;
  return data;
}

void EigenGemmThenBiasGelu(benchmark::State& state) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  PeerGemmData& d = Data();
  Eigen::setNbThreads(kThreads);
  Eigen::Map<const RowMajor> a(d.a.data(), kM, kK), b(d.b.data(), kK, kN);
  Eigen::Map<RowMajor> c(d.c.data(), kM, kN);
  const double seconds = TimedLoop(state, [&] {
    c.noalias() = a * b;
#pragma omp parallel for num_threads(kThreads)
    for (int64_t i = 0; i < kM; ++i)
      for (int64_t j = 0; j < kN; ++j) {
        const float x = d.c[i * kN + j] + d.bias[j];
        d.c[i * kN + j] = kernels::GeluErf(x);
      }
    return LoopOk();
  });
  ReportFlops(state, 2.0 * kM * kN * kK, seconds);
}

#ifdef FUSETUNE_HAVE_ONEDNN
void OnednnGemmBiasGelu(benchmark::State& state, bool packed_weights) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  PeerGemmData& d = Data();
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const memory::desc a_md({kM, kK}, dt::f32, tag::ab), b_plain({kK, kN}, dt::f32, tag::ab),
      b_md({kK, kN}, dt::f32, packed_weights ? tag::any : tag::ab),
      bias_md({1, kN}, dt::f32, tag::ab), c_md({kM, kN}, dt::f32, tag::ab);
  post_ops ops;
  ops.append_eltwise(1.0f, algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
  primitive_attr attr;
  attr.set_post_ops(ops);
  const matmul::primitive_desc pd(matmul::desc(a_md, b_md, bias_md, c_md), attr, eng);
  matmul prim(pd);
  memory a(a_md, eng, d.a.data()), b_user(b_plain, eng, d.b.data()),
      bias(bias_md, eng, d.bias.data()), c(c_md, eng, d.c.data());
  memory b = b_user;
  if (pd.weights_desc() != b_plain) {  // reorder once, outside the timed loop
    b = memory(pd.weights_desc(), eng);
    reorder(b_user, b).execute(s, b_user, b);
    s.wait();
  }
  const double seconds = TimedLoop(state, [&] {
    prim.execute(
        s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, c}});
    s.wait();
    return LoopOk();
  });
  ReportFlops(state, 2.0 * kM * kN * kK, seconds);
  state.SetLabel(pd.impl_info_str());
}
#endif

}  // namespace

void RegisterPeerBenchmarks() {
  benchmark::RegisterBenchmark("peer/eigen/gemm_then_bias_gelu", EigenGemmThenBiasGelu)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
#ifdef FUSETUNE_HAVE_ONEDNN
  benchmark::RegisterBenchmark("peer/onednn/gemm_bias_gelu",
                               [](benchmark::State& s) { OnednnGemmBiasGelu(s, false); })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("peer/onednn/gemm_bias_gelu_packed_weights",
                               [](benchmark::State& s) { OnednnGemmBiasGelu(s, true); })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
#endif
#ifdef FUSETUNE_HAVE_HALIDE
  RegisterHalidePeers();
#endif
}

}  // namespace fusetune::bench
