// consumer MODEL.onnx DB|- OUT.bin: compiles the model with the installed
// fusetune library, runs it on a fixed input pattern (0.5 sin(i) for every
// input) and writes the first output as raw f32 for the test to compare.
#include <fusetune/fusetune.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: consumer MODEL.onnx DB|- OUT.bin\n");
    return 2;
  }
  fusetune::CompileOptions options;
  if (std::string(argv[2]) != "-") options.database = argv[2];
  auto compiler = fusetune::Compiler::Open(options);
  if (!compiler.ok()) {
    std::fprintf(stderr, "open: %s\n", compiler.error().c_str());
    return 1;
  }
  auto exe = compiler.value()->Compile(argv[1]);
  if (!exe.ok()) {
    std::fprintf(stderr, "compile: %s\n", exe.error().c_str());
    return 1;
  }
  fusetune::ArrayMap inputs;
  for (const std::string& name : exe.value()->input_names()) {
    fusetune::Array a{exe.value()->input_shape(name), {}};
    int64_t n = 1;
    for (int64_t d : a.shape) n *= d;
    for (int64_t i = 0; i < n; ++i) a.data.push_back(0.5f * std::sin(static_cast<float>(i)));
    inputs[name] = std::move(a);
  }
  auto outputs = exe.value()->Run(inputs);
  if (!outputs.ok()) {
    std::fprintf(stderr, "run: %s\n", outputs.error().c_str());
    return 1;
  }
  const auto& report = exe.value()->report();
  std::printf("fusetune %s: %zu kernels (", fusetune::Version(), report.kernels.size());
  for (const auto& [source, n] : report.sources) std::printf(" %s %d", source.c_str(), n);
  std::printf(" ), lookup %.3f ms, lowering %.3f ms\n", report.lookup_ms, report.lowering_ms);
  const fusetune::Array& y = outputs.value().at(exe.value()->output_names().at(0));
  std::ofstream out(argv[3], std::ios::binary);
  out.write(reinterpret_cast<const char*>(y.data.data()),
            static_cast<std::streamsize>(y.data.size() * sizeof(float)));
  // Without the whole-model record the plan is chosen from group records and
  // remembered; a second compiler then takes the remembered plan.
  if (!options.database.empty()) {
    fusetune::CompileOptions per_group = options;
    per_group.use_whole_model_plans = false;
    for (const char* which : {"chosen", "again"}) {
      auto fresh = fusetune::Compiler::Open(per_group);
      if (!fresh.ok()) return 1;
      auto compiled = fresh.value()->Compile(argv[1]);
      if (!compiled.ok()) {
        std::fprintf(stderr, "per-group compile: %s\n", compiled.error().c_str());
        return 1;
      }
      const auto& r = compiled.value()->report();
      std::printf("per group, %s: %s; %s\n", which, r.partition.c_str(), r.remembered.c_str());
    }
  }
  // A bad path is an error value, not a crash.
  auto missing = compiler.value()->Compile("/nonexistent/model.onnx");
  if (missing.ok()) return 1;
  // So are thread counts out of range.
  for (int threads : {0, 257}) {
    fusetune::CompileOptions bad = options;
    bad.threads = threads;
    if (fusetune::Compiler::Open(bad).ok()) return 1;
  }
  return out ? 0 : 1;
}
