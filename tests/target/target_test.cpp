// target/: the machine's fingerprint against what Linux reports, the target
// key rule, and the calibration record's JSON form.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "target/calibration.h"
#include "target/target.h"

namespace fusetune::target {
namespace {

// DetectTarget reads CPUID instead of /proc/cpuinfo (0.1 ms of a compile's
// index load). The ISA flags pick kernels, so they must be what Linux reports
// there: a flag Linux masks (an OS without AVX-512 state) must not count.
// The model name is only a label inside the fingerprint: a virtual machine may
// report one name through CPUID and another in /proc/cpuinfo (a Zen 5 guest:
// "Oxide Virtual Turin-like Processor" against "AMD EPYC"), so it must be
// present and stable, not equal.
TEST(DetectTarget, IsaAgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string flags, line;
  while (std::getline(in, line) && flags.empty()) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (line.rfind("flags", 0) == 0) flags = " " + line.substr(colon + 1) + " ";
  }
  const TargetFingerprint target = DetectTarget();
  std::vector<std::string> expected;
  for (const std::string& f : KnownIsaFlags())
    if (flags.find(" " + f + " ") != std::string::npos) expected.push_back(f);
  EXPECT_EQ(target.isa, expected);
  for (const std::string& f : KnownIsaFlags())
    EXPECT_EQ(target.Has(f), flags.find(" " + f + " ") != std::string::npos) << f;
}

TEST(DetectTarget, ModelNameIsPresentAndStable) {
  const TargetFingerprint target = DetectTarget();
  EXPECT_FALSE(target.cpu_model.empty());
  for (char c : target.cpu_model) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << target.cpu_model;
  EXPECT_EQ(DetectTarget().HashString(), target.HashString());
  EXPECT_GT(target.logical_cpus, 0);
  EXPECT_EQ(target.fusetune_version, FUSETUNE_VERSION);
}

// Flushed records keep the bare fingerprint hash (databases from before the
// cache protocol existed stay valid); warm and cold-weights ones get keys of
// their own.
TEST(TargetKey, SeparatesTheCacheProtocols) {
  const TargetFingerprint target = DetectTarget();
  EXPECT_EQ(TargetKey(target, CacheProtocol::kFlushed), target.HashString());
  EXPECT_EQ(TargetKey(target, CacheProtocol::kWarm), target.HashString() + "-warm");
  EXPECT_EQ(TargetKey(target, CacheProtocol::kColdWeights), target.HashString() + "-coldw");
  EXPECT_STREQ(CacheProtocolName(CacheProtocol::kWarm), "warm");
  EXPECT_STREQ(CacheProtocolName(CacheProtocol::kColdWeights), "cold-weights");
  EXPECT_FALSE(CacheProtocolFromName("cold").has_value());
  EXPECT_FALSE(CacheProtocolFromName("").has_value());
  // The key says which protocol its records were measured under, the name
  // reads back, and each protocol's key leads to the same calibration.
  for (CacheProtocol p : {CacheProtocol::kFlushed, CacheProtocol::kWarm, CacheProtocol::kColdWeights}) {
    EXPECT_EQ(CacheProtocolOfTargetKey(TargetKey(target, p)), p);
    EXPECT_EQ(CacheProtocolFromName(CacheProtocolName(p)), p);
    EXPECT_EQ(ThisMachineKey(p), TargetKey(target, p));
    EXPECT_EQ(FlushedKeyOf(TargetKey(target, p)), target.HashString());
  }
  EXPECT_EQ(CacheProtocolOfTargetKey("-warm"), CacheProtocol::kFlushed);  // no fingerprint
  EXPECT_EQ(CacheProtocolOfTargetKey("-coldw"), CacheProtocol::kFlushed);
  EXPECT_EQ(CacheProtocolOfTargetKey("target"), CacheProtocol::kFlushed);
}

// A mixed precision policy is part of the key, budget included, before the
// cache protocol's suffix: each reads back, and both lead to the machine's
// calibration key.
TEST(TargetKey, CarriesThePrecisionPolicy) {
  const TargetFingerprint target = DetectTarget();
  const PrecisionPolicy mixed{true, 0.01};
  EXPECT_EQ(TargetKey(target, CacheProtocol::kFlushed, {}), target.HashString());
  EXPECT_EQ(TargetKey(target, CacheProtocol::kWarm, mixed), target.HashString() + "-mixed0.01-warm");
  for (CacheProtocol p : {CacheProtocol::kFlushed, CacheProtocol::kWarm, CacheProtocol::kColdWeights})
    for (const PrecisionPolicy& policy : {PrecisionPolicy{}, mixed, PrecisionPolicy{true, 2.5e-3}}) {
      const std::string key = TargetKey(target, p, policy);
      EXPECT_EQ(CacheProtocolOfTargetKey(key), p) << key;
      EXPECT_EQ(PrecisionPolicyOfTargetKey(key), policy) << key;
      EXPECT_EQ(FlushedKeyOf(key), target.HashString()) << key;
    }
  EXPECT_EQ(mixed.ToString(), "mixed (error budget 0.01)");
  EXPECT_EQ(PrecisionPolicy{}.ToString(), "f32");
}

TEST(TargetFingerprint, CacheSizesAreThoseOfOneCoreAndItsSharedLevel) {
  const TargetFingerprint target = DetectTarget();
  // L1 <= L2 <= L3 where all are known; the L3 is the level the cores share,
  // not a hypervisor's description of the whole host socket (sysfs first).
  if (target.l1d_bytes > 0 && target.l2_bytes > 0) {
    EXPECT_LE(target.l1d_bytes, target.l2_bytes);
  }
  if (target.l2_bytes > 0 && target.l3_bytes > 0) {
    EXPECT_LE(target.l2_bytes, target.l3_bytes);
  }
  std::ifstream level("/sys/devices/system/cpu/cpu0/cache/index3/level");
  std::ifstream size("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string l, s;
  if (std::getline(level, l) && l == "3" && std::getline(size, s) && !s.empty() &&
      s.back() == 'K') {
    EXPECT_EQ(target.l3_bytes, std::stoll(s) * 1024) << s;
  }
}

TEST(Calibration, JsonCarriesTheRoofAndTheFingerprint) {
  Calibration c;
  c.target = DetectTarget();
  c.threads = 2;
  c.roofline.fma_gflops = 230;
  c.roofline.read_gbps = 30;
  c.l2_read_gbps = 200;
  const nlohmann::json j = CalibrationToJson(c);
  EXPECT_EQ(j["threads"], 2);
  EXPECT_DOUBLE_EQ(j["fma_gflops"].get<double>(), 230);
  EXPECT_DOUBLE_EQ(j["dram_read_gbps"].get<double>(), 30);
  EXPECT_EQ(j["target"]["hash"], c.target.HashString());
}

}  // namespace
}  // namespace fusetune::target
