#include "target/calibration.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace fusetune::target {

std::string Roofline::ToString() const {
  return fmt::format(
      "FP32 FMA peak {:.1f} GFLOP/s on 1 thread, {:.1f} on {}; BF16 dot peak {:.1f}; DRAM read "
      "{:.1f} GB/s, copy {:.1f}, triad {:.1f}",
      fma_gflops_1t, fma_gflops, threads, bf16_dot_gflops, read_gbps, copy_gbps, triad_gbps);
}

nlohmann::json CalibrationToJson(const Calibration& c) {
  const Roofline& r = c.roofline;
  return {{"target", FingerprintToJson(c.target)},
          {"threads", c.threads},
          {"fma_gflops_1_thread", r.fma_gflops_1t},
          {"fma_gflops", r.fma_gflops},
          {"bf16_dot_gflops", r.bf16_dot_gflops},
          {"dram_read_gbps", r.read_gbps},
          {"dram_copy_gbps", r.copy_gbps},
          {"dram_triad_gbps", r.triad_gbps},
          {"l2_read_gbps", c.l2_read_gbps},
          {"launch_overhead_us", c.launch_overhead_us},
          {"local_buffer_bytes", c.local_buffer_bytes}};
}

}  // namespace fusetune::target
