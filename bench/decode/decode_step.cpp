// One decode step with the KV cache served in place, timed at a fixed cache
// length (issue 39, point 4): the decode graph of
// examples/llama_generate/export_llama.py (`past` symbolic, positions an
// input) compiled at a capacity of PAST + 1 rows with
// CompileOptions::kv_cache_in_place, the caches loaded with PAST random rows
// before every step and flushed from the caches (untimed), then one step timed: it reads the
// weights and the PAST cached rows and writes one row per cache, where the model run as written
// copies the whole cache into `present` every step.
//
//   decode_step DIR --past P [--db DB] [--runs N] [--threads T]
//               [--layers L] [--heads H] [--head-dim D]
//
// Prints the median step time and its 10th and 90th percentiles.
#include <fusetune/fusetune.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

struct Args {
  std::string dir, db;
  int64_t past = 0, runs = 30, layers = 1, heads = 16, head_dim = 128;
  int threads = 2;
};

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: decode_step DIR --past P [--db DB] [--runs N] [--threads T] "
               "[--layers L] [--heads H] [--head-dim D]\n");
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    auto number = [&] { return std::atoll(argv[++i]); };
    if (arg == "--db" && has_value)
      a.db = argv[++i];
    else if (arg == "--past" && has_value)
      a.past = number();
    else if (arg == "--runs" && has_value)
      a.runs = number();
    else if (arg == "--threads" && has_value)
      a.threads = static_cast<int>(number());
    else if (arg == "--layers" && has_value)
      a.layers = number();
    else if (arg == "--heads" && has_value)
      a.heads = number();
    else if (arg == "--head-dim" && has_value)
      a.head_dim = number();
    else if (a.dir.empty() && arg[0] != '-')
      a.dir = arg;
    else
      Usage();
  }
  if (a.dir.empty() || a.past < 1 || a.runs < 1 || a.threads < 1 || a.layers < 1 || a.heads < 1 ||
      a.head_dim < 1)
    Usage();
  return a;
}

template <typename T>
T Check(fusetune::Expected<T> result, const char* what) {
  if (!result.ok()) {
    std::fprintf(stderr, "decode_step: %s: %s\n", what, result.error().c_str());
    std::exit(2);
  }
  return std::move(result.value());
}

// `past` random rows for every cache (values of a trained model's scale).
fusetune::ArrayMap RandomCache(const Args& a) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  fusetune::ArrayMap cache;
  for (int64_t layer = 0; layer < a.layers; ++layer)
    for (const char* kind : {"k", "v"}) {
      fusetune::Array rows;
      rows.shape = {1, a.heads, a.past, a.head_dim};
      rows.data.resize(static_cast<size_t>(a.heads * a.past * a.head_dim));
      for (float& x : rows.data) x = normal(rng);
      cache["past_" + std::string(kind) + "_" + std::to_string(layer)] = std::move(rows);
    }
  return cache;
}

// Evicts the freshly loaded cache rows from every cache level, as for a
// model too large for them: the step then reads its cache from DRAM, as
// the weights (larger than the last-level cache) are read anyway.
// Read only: dirty lines would leave their write-backs to the timed step.
void FlushCaches() {
  static const std::vector<uint64_t> junk(size_t{256} << 20 >> 3, 1);  // 256 MiB
  uint64_t sum = 0;
  for (uint64_t x : junk) sum += x;
  __asm__ volatile("" : : "r"(sum));  // the reads happen: their sum is used
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  fusetune::CompileOptions options;
  options.database = args.db;
  options.threads = args.threads;
  options.dims = {{"past", args.past}};  // capacity past + 1: one step's new row
  options.kv_cache_in_place = true;
  auto step =
      Check(Check(fusetune::Compiler::Open(options), "open")->Compile(args.dir + "/decode.onnx"),
            "compile decode.onnx");
  const fusetune::ArrayMap cache = RandomCache(args);
  const fusetune::ArrayMap inputs = {{"ids", {{1, 1}, {1.0f}}},
                                     {"pos", {{1}, {static_cast<float>(args.past)}}}};
  // The first run pre-packs the weights (once per executable): untimed.
  Check(step->LoadCache(cache), "load the cache");
  Check(step->Run(inputs), "decode step");
  std::vector<double> ms;
  for (int64_t r = 0; r < args.runs; ++r) {
    Check(step->LoadCache(cache), "load the cache");
    FlushCaches();
    const auto start = std::chrono::steady_clock::now();
    Check(step->Run(inputs), "decode step");
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::printf(
      "decode step at a cache of %lld rows kept in place (capacity %lld): median %.3f ms "
      "over %lld runs (p10 %.3f, p90 %.3f)\n",
      static_cast<long long>(args.past), static_cast<long long>(step->cache_capacity()),
      Percentile(ms, 0.5), static_cast<long long>(args.runs), Percentile(ms, 0.1),
      Percentile(ms, 0.9));
  return 0;
}
