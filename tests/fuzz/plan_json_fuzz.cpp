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
fusetune::fusion_space::FusionSpace& Space() {
  static fusetune::graph::Graph graph = [] {
    auto g = fusetune::graph::ImportOnnxFile(FUSETUNE_SOURCE_DIR "/examples/encoder_small.onnx");
    if (!g.ok() || !fusetune::graph::RunStandardPasses(*g).ok()) {
      std::fprintf(stderr, "plan_json_fuzz: cannot load examples/encoder_small.onnx\n");
      std::abort();
    }
    return std::move(*g);
  }();
  static fusetune::fusion_space::FusionSpace space(graph, fusetune::kernels::KernelConfig{});
  return space;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> keys;
  (void)fusetune::fusion_space::PlanFromJsonText(Space(), text, &keys);
  const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded()) (void)fusetune::fusion_space::PlanFromJson(Space(), doc);
  (void)fusetune::fusion_space::SingleGroupTiling(text);
  return 0;
}
