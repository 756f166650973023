#include "measure/calibrate.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "fusion_space/space.h"
#include "measure/roofline.h"
#include "runtime/executor.h"

namespace fusetune::measure {

namespace {

// A graph of one Relu over 16 floats: the smallest kernel the executor runs.
graph::Graph TinyGraph() {
  graph::Graph g;
  g.name = "launch_probe";
  graph::TensorType t;
  t.dims = {16};
  const graph::ValueId x = g.AddInput("x", t);
  graph::Node relu;
  relu.op_type = "Relu";
  relu.inputs = {x};
  const graph::ValueId y = g.AddValue("y");
  g.value(y).type = t;
  g.value(y).has_type = true;
  relu.outputs = {y};
  g.AddNode(relu);
  g.outputs = {y};
  return g;
}

double LaunchOverheadMicros(int threads) {
  graph::Graph g = TinyGraph();
  kernels::KernelConfig config;
  config.threads = threads;
  fusion_space::FusionSpace space(g, config);
  auto exe = runtime::KernelProgram::Compile(space, space.Unfused());
  if (!exe.ok()) return -1;
  graph::TensorMap feeds{{"x", graph::Tensor(graph::DataType::kFloat32, {16})}};
  std::vector<double> us;
  for (int i = 0; i < 300; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (!(*exe)->Run(feeds).ok()) return -1;
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

}  // namespace

target::Calibration Calibrate(int threads) {
  target::Calibration c;
  c.target = target::DetectTarget();
  c.threads = threads;
  c.roofline = MeasureRoofline(threads);
  // Half of each thread's L2, swept enough times to move ~1 GB.
  const size_t per_thread =
      static_cast<size_t>(std::max<int64_t>(c.target.l2_bytes, 256 << 10) / 2);
  const size_t bytes = per_thread * static_cast<size_t>(threads);
  const int passes = static_cast<int>(std::max<size_t>(1, (size_t{1} << 30) / bytes));
  c.l2_read_gbps = MeasureBandwidth(StreamKind::kRead, threads, bytes, passes);
  c.launch_overhead_us = LaunchOverheadMicros(threads);
  c.local_buffer_bytes = static_cast<int64_t>(kernels::DefaultLocalBufferBytes());
  return c;
}

}  // namespace fusetune::measure
