// libFuzzer harness: plan files (fusion_space/plan_json.h) against the bundled
// example model, through both readers (text and document) and the one-group
// tiling reader.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "fusion_space/plan_json.h"
#include "graph/onnx_io.h"
#include "graph/passes.h"

namespace {

// The model every plan is read against, loaded as the CLI loads it.
fusetune::FusionSpace& Space() {
  static fusetune::Graph graph = [] {
    auto g = fusetune::ImportOnnxFile(FUSETUNE_SOURCE_DIR "/examples/encoder_small.onnx");
    if (!g.ok() || !fusetune::RunStandardPasses(*g).ok()) {
      std::fprintf(stderr, "plan_json_fuzz: cannot load examples/encoder_small.onnx\n");
      std::abort();
    }
    return std::move(*g);
  }();
  static fusetune::FusionSpace space(graph, fusetune::kernels::KernelConfig{});
  return space;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> keys;
  (void)fusetune::PlanFromJsonText(Space(), text, &keys);
  const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded()) (void)fusetune::PlanFromJson(Space(), doc);
  (void)fusetune::SingleGroupTiling(text);
  return 0;
}
