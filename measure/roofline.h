// measure/: on-device measurement (issue 5). Map of the module:
// measure/README.md (what it offers, one line per file). This file: the
// machine's roofline, measured in-process, so that kernels can be reported as a
// fraction of what this machine reaches rather than of a datasheet figure.
//   MeasureFmaPeak       FP32 FMA throughput of independent register chains
//   MeasureBf16DotPeak   the same for the bf16 dot-product instruction
//   MeasureBandwidth     streaming read (one or two streams a thread), copy and triad
//                        over buffers far larger than L3
#pragma once

#include <cstddef>
#include <string>

#include "target/calibration.h"

namespace fusetune::measure {

// GFLOP/s of FP32 fused multiply-adds on `threads` threads (2 flops per FMA),
// with the widest vectors this build targets; best of several runs.
double MeasureFmaPeak(int threads);
// GFLOP/s of bf16 dot products with float sums (vdpbf16ps: 4 flops per lane),
// 0 on a CPU without them.
double MeasureBf16DotPeak(int threads);

enum class StreamKind {
  kRead,   // sum of an array, one or two streams a thread (the better): bytes read
  kCopy,   // b = a: bytes read + bytes written
  kTriad,  // a = b + s * c: bytes read + bytes written
};
// GB/s (1e9 bytes/s) moved by `threads` threads over arrays of `bytes` each,
// each thread sweeping its slice `passes` times (arrays that fit a cache need
// several passes to outweigh the start of the threads); best of several runs.
double MeasureBandwidth(StreamKind kind, int threads, size_t bytes = size_t{256} << 20,
                        int passes = 1);

target::Roofline MeasureRoofline(int threads);

}  // namespace fusetune::measure
