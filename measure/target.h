// The target: what machine measurements come from (a fingerprint stored with
// every record, so records from another machine are never mixed in) and its
// calibration (peak compute, bandwidths, kernel launch cost, local buffer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "measure/roofline.h"

namespace fusetune::measure {

struct TargetFingerprint {
  std::string cpu_model;         // /proc/cpuinfo "model name"
  std::vector<std::string> isa;  // the ISA flags kernels care about (avx2, avx512f, ...)
  int logical_cpus = 0;
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // per core (L1, L2), shared (L3)
  std::string fusetune_version;
  // Hash of all the above: equal hashes, comparable measurements.
  uint64_t hash() const;
  std::string HashString() const;  // 16 hex digits
};

TargetFingerprint DetectTarget();  // read once per process

// How a measurement treats the caches. Flushed: every tensor is evicted
// before each run, so weights come from DRAM (the default: a deployment that
// runs many models or layers between two runs of this one). Warm: the caches
// are left as the previous run left them, as in a loop over one model whose
// weights fit the last-level cache. The two rank tilings differently, so
// their records live under different target keys and are never compared.
enum class CacheProtocol { kFlushed, kWarm };
const char* CacheProtocolName(CacheProtocol caches);  // "flushed", "warm"
// The protocol a `--warm` flag (or `warm_caches` option) asks for.
inline CacheProtocol CacheProtocolFor(bool warm) {
  return warm ? CacheProtocol::kWarm : CacheProtocol::kFlushed;
}

// The target key records are stored and looked up under: the fingerprint's
// hash for flushed caches, with "-warm" appended for warm ones.
std::string TargetKey(const TargetFingerprint& f, CacheProtocol caches);
// The protocol a stored target key was measured under (its "-warm" suffix).
CacheProtocol CacheProtocolOfTargetKey(const std::string& target_key);

struct Calibration {
  TargetFingerprint target;
  Roofline roofline;
  double l2_read_gbps = 0;        // all threads, arrays resident in their L2
  double launch_overhead_us = 0;  // one tiny kernel run through the executor, median
  int64_t local_buffer_bytes = 0;
  int threads = 0;
};

// Takes a few seconds: peak FMA on 1 and `threads` threads, DRAM read, copy
// and triad, L2 read, and the executor's per-launch cost.
Calibration Calibrate(int threads);

nlohmann::json FingerprintToJson(const TargetFingerprint& f);
nlohmann::json CalibrationToJson(const Calibration& c);

}  // namespace fusetune::measure
