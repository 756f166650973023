// Peer: Halide 14's autoschedulers on attention written as one Halide
// pipeline (scores, row max, exponentials, row sum, P x V, normalise), the
// same computation and data as fusetune/attention_12x384x64[_causal]:
//   peer/halide/<autoscheduler>/attention_12x384x64[_causal]
// Each pipeline is scheduled and JIT-compiled once, before its timed loop.
// Adams2019 runs with its built-in weights and a beam of 1 (HL_BEAM_SIZE)
// unless the environment says otherwise, to keep start-up short.
#include <Halide.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>

#include "bench/bench_attention.h"
#include "bench/bench_common.h"

namespace fusetune::bench {
namespace {

using namespace Halide;

struct Compiled {
  std::unique_ptr<Pipeline> pipeline;
  ImageParam q{Float(32), 3, "q"}, k{Float(32), 3, "k"}, v{Float(32), 3, "v"};
  std::string error;
};

// Halide buffers are innermost-first: q(d, i, h).
std::unique_ptr<Compiled> Build(const std::string& scheduler, bool causal) {
  auto c = std::make_unique<Compiled>();
  const AttentionData& a = SharedAttentionData();
  const int S = static_cast<int>(a.seq), D = static_cast<int>(a.dim), H = static_cast<int>(a.heads);
  Var d("d"), i("i"), j("j"), h("h");
  RDom rd(0, D, "rd"), rj(0, S, "rj");
  Func dot("dot"), score("score"), row_max("row_max"), e("e"), row_sum("row_sum"), pv("pv"),
      out("out");
  dot(j, i, h) = 0.0f;
  dot(j, i, h) += c->q(rd, i, h) * c->k(rd, j, h);
  const Expr scaled = dot(j, i, h) * (1.0f / std::sqrt(static_cast<float>(D)));
  score(j, i, h) = causal ? select(j > i, Float(32).min(), scaled) : scaled;
  row_max(i, h) = maximum(score(rj, i, h));
  e(j, i, h) = exp(score(j, i, h) - row_max(i, h));
  row_sum(i, h) = sum(e(rj, i, h));
  pv(d, i, h) = 0.0f;
  pv(d, i, h) += e(rj, i, h) * c->v(d, rj, h);
  out(d, i, h) = pv(d, i, h) / row_sum(i, h);
  for (ImageParam* p : {&c->q, &c->k, &c->v}) p->set_estimates({{0, D}, {0, S}, {0, H}});
  out.set_estimates({{0, D}, {0, S}, {0, H}});
  c->pipeline = std::make_unique<Pipeline>(out);
  const Target target = get_host_target();
  try {
    load_plugin(fmt::format("{}/libautoschedule_{}.so", FUSETUNE_HALIDE_PLUGIN_DIR, scheduler));
    const std::string name = scheduler == "adams2019" ? "Adams2019"
                             : scheduler == "li2018"  ? "Li2018"
                                                      : "Mullapudi2016";
    // 2 cores, 32 MiB last-level cache, the default balance.
    c->pipeline->auto_schedule(name, target, MachineParams(kThreads, 32 << 20, 40));
    c->pipeline->compile_jit(target);
  } catch (const Halide::Error& err) {
    c->error = err.what();
  }
  return c;
}

void RunHalide(benchmark::State& state, const std::string& scheduler, bool causal) {
  static std::map<std::string, std::unique_ptr<Compiled>> cache;
  const std::string key = scheduler + (causal ? "/causal" : "");
  if (!cache.count(key)) cache[key] = Build(scheduler, causal);
  Compiled& c = *cache[key];
  if (!c.error.empty()) {
    state.SkipWithError(c.error.c_str());
    return;
  }
  AttentionData& a = SharedAttentionData();
  const int S = static_cast<int>(a.seq), D = static_cast<int>(a.dim), H = static_cast<int>(a.heads);
  Buffer<float> q(a.q.data(), D, S, H), k(a.k.data(), D, S, H), v(a.v.data(), D, S, H),
      o(a.o.data(), D, S, H);
  c.q.set(q);
  c.k.set(k);
  c.v.set(v);
  const double seconds = TimedLoop(state, [&] {
    c.pipeline->realize(o);
    return LoopOk();
  });
  ReportFlops(state, AttentionFlops(a, causal), seconds);
}

}  // namespace

void RegisterHalidePeers() {
  setenv("HL_BEAM_SIZE", "1", /*overwrite=*/0);
  setenv("HL_NUM_THREADS", "2", 0);
  for (const char* scheduler : {"adams2019", "li2018", "mullapudi2016"})
    for (bool causal : {false, true})
      benchmark::RegisterBenchmark(
          fmt::format("peer/halide/{}/attention_12x384x64{}", scheduler, causal ? "_causal" : "")
              .c_str(),
          [s = std::string(scheduler), causal](benchmark::State& st) { RunHalide(st, s, causal); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
}

}  // namespace fusetune::bench
