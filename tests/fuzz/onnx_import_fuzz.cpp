// libFuzzer harness: ONNX import (graph/onnx_io.h) from bytes, then the
// standard passes on what imports. External data resolves in an empty folder.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "graph/onnx_io.h"
#include "graph/passes.h"

namespace {

const std::string& EmptyDir() {
  static const std::string dir = [] {
    const auto path = std::filesystem::temp_directory_path() / "fusetune_fuzz_onnx_empty";
    std::filesystem::create_directories(path);
    return path.string();
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fusetune::graph::ImportOptions options;
  // The seed corpus's symbolic dimensions (tests/fuzz/make_onnx_seeds.py).
  options.dim_bindings = {{"batch", 1}, {"seq", 4}};
  auto graph = fusetune::graph::ImportOnnxBytes(bytes, EmptyDir(), "fuzz.onnx", options);
  if (graph.ok()) (void)fusetune::graph::RunStandardPasses(*graph);
  return 0;
}
