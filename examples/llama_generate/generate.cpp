// A generation loop through fusetune's library: a LLaMA-style model reads a
// prompt (prefill), then writes one token at a time (greedy) against the KV
// cache the decode executable keeps in place, and prints prompt and decode
// tokens/s. The tokens and logits are checked against PyTorch's own loop.
//
//   llama_generate DIR [--db tune.db] [--steps N] [--capacity C] [--threads T]
//
// DIR holds what export_llama.py writes: prefill.onnx (ids [1, seq] ->
// logits and the prompt's cache), decode.onnx (ids [1, 1], pos [1] and the
// cache -> logits and the cache with the new row), prompt.npy and PyTorch's
// torch_tokens.npy / torch_logits.npy. Without --db each graph runs fusetune's
// untuned (greedy) plan. Exits 1 when the outputs differ from PyTorch's.
#include <fusetune/fusetune.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

// A C-ordered little-endian .npy file of f4 or i8 elements, as floats.
bool LoadNpy(const std::string& path, std::vector<int64_t>* shape, std::vector<float>* values) {
  std::ifstream in(path, std::ios::binary);
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) return false;
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 2);
    header_len = n;
  } else {
    in.read(reinterpret_cast<char*>(&header_len), 4);
  }
  std::string header(header_len, ' ');
  in.read(header.data(), header_len);
  const bool f4 = header.find("'<f4'") != std::string::npos;
  if ((!f4 && header.find("'<i8'") == std::string::npos) ||
      header.find("'fortran_order': False") == std::string::npos)
    return false;
  shape->clear();
  const size_t open = header.find('(', header.find("'shape'"));
  int64_t count = 1;
  for (size_t i = open + 1; header[i] != ')';) {
    if (!std::isdigit(static_cast<unsigned char>(header[i]))) {
      ++i;
      continue;
    }
    char* end = nullptr;
    shape->push_back(std::strtoll(header.c_str() + i, &end, 10));
    count *= shape->back();
    i = static_cast<size_t>(end - header.c_str());
  }
  values->resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    if (f4) {
      in.read(reinterpret_cast<char*>(&(*values)[i]), 4);
    } else {
      int64_t v = 0;
      in.read(reinterpret_cast<char*>(&v), 8);
      (*values)[i] = static_cast<float>(v);
    }
  }
  return static_cast<bool>(in);
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The index of the largest of `n` values from `row`.
int64_t ArgMax(const float* row, int64_t n) { return std::max_element(row, row + n) - row; }

template <typename T>
T Check(fusetune::Expected<T> result, const char* what) {
  if (!result.ok()) {
    std::fprintf(stderr, "llama_generate: %s: %s\n", what, result.error().c_str());
    std::exit(2);
  }
  return std::move(result.value());
}

struct Args {
  std::string dir, db;
  int64_t steps = 32, capacity = 256;
  int threads = 2;
};

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: llama_generate DIR [--db DB] [--steps N] [--capacity C] "
               "[--threads T]\n");
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--db" && has_value)
      a.db = argv[++i];
    else if (arg == "--steps" && has_value)
      a.steps = std::atoll(argv[++i]);
    else if (arg == "--capacity" && has_value)
      a.capacity = std::atoll(argv[++i]);
    else if (arg == "--threads" && has_value)
      a.threads = std::atoi(argv[++i]);
    else if (a.dir.empty() && arg[0] != '-')
      a.dir = arg;
    else
      Usage();
  }
  if (a.dir.empty() || a.steps < 0 || a.capacity < 2 || a.threads < 1) Usage();
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  fusetune::Array prompt, torch_tokens, torch_logits;
  for (auto [file, array] : {std::pair{"prompt.npy", &prompt},
                             {"torch_tokens.npy", &torch_tokens},
                             {"torch_logits.npy", &torch_logits}})
    if (!LoadNpy(args.dir + "/" + file, &array->shape, &array->data)) {
      std::fprintf(stderr, "llama_generate: cannot read %s/%s\n", args.dir.c_str(), file);
      return 2;
    }
  const int64_t prompt_len = prompt.shape.at(1);

  // The prompt's graph at its length; the decode step's at the cache's
  // capacity, the cache kept in place.
  fusetune::CompileOptions options;
  options.database = args.db;
  options.threads = args.threads;
  options.dims = {{"seq", prompt_len}};
  auto prefill =
      Check(Check(fusetune::Compiler::Open(options), "open")->Compile(args.dir + "/prefill.onnx"),
            "compile prefill.onnx");
  options.dims = {{"past", args.capacity - 1}};
  options.kv_cache_in_place = true;
  auto decode =
      Check(Check(fusetune::Compiler::Open(options), "open")->Compile(args.dir + "/decode.onnx"),
            "compile decode.onnx");

  // A first run of each executable pre-packs its weights (once per
  // executable, as a server does when it loads a model): untimed.
  Check(prefill->Run({{"ids", prompt}}), "prefill");
  auto start = std::chrono::steady_clock::now();
  fusetune::ArrayMap out = Check(prefill->Run({{"ids", prompt}}), "prefill");
  const double prefill_s = Seconds(start);
  fusetune::ArrayMap cache;  // the prompt's presents are the decode step's pasts
  for (auto& [name, array] : out)
    if (name.rfind("present_", 0) == 0) cache["past_" + name.substr(8)] = std::move(array);
  const fusetune::Array& logits = out.at("logits");
  const int64_t vocab = logits.shape.back();
  std::vector<float> row(logits.data.end() - vocab, logits.data.end());
  const fusetune::ArrayMap first_step = {
      {"ids", {{1, 1}, {static_cast<float>(ArgMax(row.data(), vocab))}}},
      {"pos", {{1}, {static_cast<float>(prompt_len)}}}};
  Check(decode->LoadCache(cache), "load the prompt's cache");
  Check(decode->Run(first_step), "decode step");
  Check(decode->LoadCache(cache), "load the prompt's cache");  // the warm-up's row dropped
  std::vector<int64_t> tokens;
  double worst = 0;  // logits' error against PyTorch's, relative to their scale
  int64_t checked = 0, differing = -1;
  start = std::chrono::steady_clock::now();
  double checking_s = 0;
  for (int64_t i = 0; i < args.steps; ++i) {
    const int64_t token = ArgMax(row.data(), vocab);
    tokens.push_back(token);
    if (i < torch_tokens.shape.at(0)) {  // outside the timed loop's figures
      const auto check_start = std::chrono::steady_clock::now();
      const float* want = &torch_logits.data[static_cast<size_t>(i * vocab)];
      double err = 0, scale = 1e-30;
      for (int64_t v = 0; v < vocab; ++v) {
        err = std::max(err, static_cast<double>(std::fabs(row[v] - want[v])));
        scale = std::max(scale, static_cast<double>(std::fabs(want[v])));
      }
      worst = std::max(worst, err / scale);
      if (differing < 0 && static_cast<float>(token) != torch_tokens.data[i]) differing = i;
      ++checked;
      checking_s += Seconds(check_start);
    }
    fusetune::ArrayMap step =
        Check(decode->Run({{"ids", {{1, 1}, {static_cast<float>(token)}}},
                           {"pos", {{1}, {static_cast<float>(prompt_len + i)}}}}),
              "decode step");
    row = std::move(step.at("logits").data);
  }
  const double decode_s = Seconds(start) - checking_s;

  std::printf("model     %s (vocab %lld), cache of %lld rows kept in place\n", args.dir.c_str(),
              static_cast<long long>(vocab), static_cast<long long>(decode->cache_capacity()));
  std::printf("prompt    %lld tokens in %.2f ms: %.1f tokens/s\n",
              static_cast<long long>(prompt_len), prefill_s * 1e3, prompt_len / prefill_s);
  std::printf("decode    %lld tokens in %.2f ms: %.1f tokens/s (%.3f ms a token)\n",
              static_cast<long long>(args.steps), decode_s * 1e3, args.steps / decode_s,
              decode_s * 1e3 / std::max<int64_t>(args.steps, 1));
  std::printf("tokens    ");
  for (int64_t t : tokens) std::printf("%lld ", static_cast<long long>(t));
  std::printf("\n");
  const bool same_tokens = differing < 0;
  std::printf(
      "check     %lld steps against PyTorch: logits max error %.2e of their scale, "
      "tokens %s\n",
      static_cast<long long>(checked), worst,
      same_tokens ? "equal" : ("differ from step " + std::to_string(differing)).c_str());
  return worst <= 1e-3 && same_tokens ? 0 : 1;
}
