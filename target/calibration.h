// The calibration record: what a machine reaches (its roofline, L2
// bandwidth, a kernel launch's cost, the local buffer), measured once per
// machine by measure::Calibrate and stored in the tuning database beside its
// target key, so that kernels are reported as a fraction of what this
// machine reaches and the cost model can tell one machine from another.
// Only the record and its JSON form live here; measuring it needs the
// runtime, so it lives in measure/ (measure/calibrate.h).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "target/target.h"

namespace fusetune::target {

struct Roofline {
  int threads = 0;
  double fma_gflops_1t = 0, fma_gflops = 0;             // 1 thread, `threads` threads
  double bf16_dot_gflops = 0;  // `threads` threads; 0 without the instruction (or not measured)
  double read_gbps = 0, copy_gbps = 0, triad_gbps = 0;  // DRAM, `threads` threads
  std::string ToString() const;
};

struct Calibration {
  TargetFingerprint target;
  Roofline roofline;
  double l2_read_gbps = 0;        // all threads, arrays resident in their L2
  double launch_overhead_us = 0;  // one tiny kernel run through the executor, median
  int64_t local_buffer_bytes = 0;
  int threads = 0;
};

nlohmann::json CalibrationToJson(const Calibration& c);

}  // namespace fusetune::target
