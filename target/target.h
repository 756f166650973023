// target/: the machine's identity, on the ground floor so that every module
// that stores, looks up or predicts per machine (db users, the cost model,
// the compiler, the CLI) reads it without reaching into measure/. Map:
// target/README.md. This file: the fingerprint stored with every record (so
// records from another machine are never mixed in), the ISA features
// kernels care about, how a measurement treats the caches, and the one rule
// that turns them into the key records are stored and looked up under.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace fusetune::target {

struct TargetFingerprint {
  std::string cpu_model;         // CPUID brand string (/proc/cpuinfo "model name" elsewhere)
  std::vector<std::string> isa;  // the ISA flags kernels care about, named as Linux names them
  int logical_cpus = 0;
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // per core (L1, L2), shared (L3)
  std::string fusetune_version;
  // Hash of all the above: equal hashes, comparable measurements.
  uint64_t hash() const;
  std::string HashString() const;  // 16 hex digits
  // Whether `flag` ("avx512f", "avx512_bf16", ...) is among `isa`.
  bool Has(std::string_view flag) const;
};

// The ISA flags a fingerprint records, in this order: those the kernels or
// their variants choose by. A vector extension counts only where the OS
// saves its registers, as Linux reports it.
const std::vector<std::string>& KnownIsaFlags();

TargetFingerprint DetectTarget();  // read once per process

// How a measurement treats the caches. Flushed: every tensor is evicted
// before each run, so weights and activations come from DRAM (the default: a
// deployment that runs many models or layers between two runs of this one).
// Warm: the caches are left as the previous run left them, as in a loop over
// one model whose weights fit the last-level cache. Cold weights: constants
// and pre-packed weights are evicted, activations are left warm, as a group
// sees them inside a model whose weights do not fit the last-level cache
// (ResNet-50's 102 MB): its input was just written by the group before it,
// its weights were last read a whole model ago. The three rank tilings and
// algorithms differently (a group measured warm keeps megabytes of weights
// in L3 that stream from DRAM in the model), so their records live under
// different target keys and are never compared.
enum class CacheProtocol { kFlushed, kWarm, kColdWeights };
const char* CacheProtocolName(CacheProtocol caches);  // "flushed", "warm", "cold-weights"
// The protocol of a name CacheProtocolName gives; nullopt for any other text.
std::optional<CacheProtocol> CacheProtocolFromName(std::string_view name);

// Which precisions kernels may compute in (kernels/precision.h): f32 only,
// the default, or mixed: a fused group may compute in bf16 as long as the
// model's outputs stay within `error_budget` of the f32 reference (the
// largest error relative to each output's largest magnitude, as
// measurements verify). Mixed records are faster and less exact, measured
// with the budget as their tolerance, so they live under a key of their own,
// budget included (docs/PRECISION.md).
struct PrecisionPolicy {
  bool mixed = false;
  double error_budget = 0;  // mixed only; > 0
  bool operator==(const PrecisionPolicy&) const = default;
  std::string ToString() const;  // "f32", "mixed (error budget 0.01)"
};

// The target key records are stored and looked up under: the fingerprint's
// hash for flushed caches in f32, with "-mixed<budget>" appended for a mixed
// precision policy, then "-warm" or "-coldw" for the other cache protocols
// ("7dcd332f7e56e76c-mixed0.01-warm"). The only place the rule is written.
std::string TargetKey(const TargetFingerprint& f, CacheProtocol caches,
                      const PrecisionPolicy& precision = {});
// TargetKey(DetectTarget(), ...): the key of the machine this process runs on.
std::string ThisMachineKey(CacheProtocol caches, const PrecisionPolicy& precision = {});
// The protocol a stored target key was measured under (its suffix).
CacheProtocol CacheProtocolOfTargetKey(const std::string& target_key);
// The precision policy of a stored target key.
PrecisionPolicy PrecisionPolicyOfTargetKey(const std::string& target_key);
// The flushed f32 key of the same machine (the fingerprint's hash alone):
// the calibration of a machine depends on neither, so a key of another
// protocol or precision without one reads this key's.
std::string FlushedKeyOf(const std::string& target_key);

nlohmann::json FingerprintToJson(const TargetFingerprint& f);

}  // namespace fusetune::target
