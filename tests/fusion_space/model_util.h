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

// Three convs (a residual in the second), a max pool reading the second's
// output (pools read NCHW only), the third's output and the pool's the
// graph's outputs: where activation layouts agree and where they must not
// (fusion_space's layout choice, runtime's layout plan).
inline constexpr const char* kLayoutCnn = R"(graph layouts opset 17 {
  input x: f32[1, 16, 12, 12]
  const w0: f32[32, 16, 3, 3]
  const b0: f32[32]
  const w1: f32[32, 32, 3, 3]
  const w2: f32[32, 32, 1, 1]
  c0 = Conv(x, w0, b0) {pads=[1, 1, 1, 1]}
  r0 = Relu(c0)
  c1 = Conv(r0, w1) {pads=[1, 1, 1, 1]}
  a1 = Add(c1, r0)
  r1 = Relu(a1)
  c2 = Conv(r1, w2)
  p = MaxPool(r1) {kernel_shape=[2, 2], strides=[2, 2]}
  output c2
  output p
})";

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
