// Test models for fusion_space/ and runtime/ tests: the PyTorch exports of
// scripts/gen_models.py, imported with the standard passes.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/onnx_io.h"
#include "graph/passes.h"
#include "kernels/traffic.h"
#include "tests/graph/test_util.h"

namespace fusetune::testing {

inline graph::Graph LoadTestModel(const std::string& name) {
  auto g = graph::ImportOnnxFile(TestData(name + ".onnx"));
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message());
  if (!g.ok()) return graph::Graph{};
  Status st = graph::RunStandardPasses(*g);
  EXPECT_TRUE(st.ok());
  return std::move(*g);
}

// A 256 KiB local buffer on 2 threads: smaller tiling spaces than the
// machine's, so that tests enumerate them quickly.
inline kernels::KernelConfig SmallKernelConfig() {
  kernels::KernelConfig c;
  c.local_buffer_bytes = 256 * 1024;
  c.threads = 2;
  return c;
}

inline const std::vector<std::string>& AllTestModels() {
  static const std::vector<std::string> kModels = {"mlp",
                                                   "encoder_postln_op13",
                                                   "encoder_postln_op17",
                                                   "encoder_3layer_op13",
                                                   "decoder_preln_op14",
                                                   "decoder_preln_op17",
                                                   "llama_op17",
                                                   "encoder_external_op17"};
  return kModels;
}

}  // namespace fusetune::testing
