#include "target/target.h"

#include <fmt/format.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/hash.h"

namespace fusetune::target {

const std::vector<std::string>& KnownIsaFlags() {
  static const std::vector<std::string> flags = {
      "sse4_2",   "avx",      "avx2",        "fma",         "f16c",    "avx512f",
      "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni", "amx_tile"};
  return flags;
}

namespace {

#if defined(__x86_64__)
// The CPU's brand string and the ISA flags kernels care about, as Linux
// reports them in /proc/cpuinfo ("model name" and "flags"), read with CPUID:
// reading /proc/cpuinfo costs about 0.1 ms, most of a compile's index load.
// As Linux does, a vector extension counts only when the OS saves its
// registers (XCR0), so a kernel booted without AVX-512 state has no avx512f.
struct CpuidRegs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};
CpuidRegs Cpuid(unsigned leaf, unsigned subleaf = 0) {
  CpuidRegs r;
  __cpuid_count(leaf, subleaf, r.a, r.b, r.c, r.d);
  return r;
}
// XCR0, or 0 when the OS has not enabled XSAVE (leaf 1 ECX bit 27).
uint64_t EnabledStateComponents(const CpuidRegs& leaf1) {
  if (!((leaf1.c >> 27) & 1)) return 0;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

std::string CpuBrand() {
  if (Cpuid(0x80000000).a < 0x80000004) return "";
  char text[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    const CpuidRegs r = Cpuid(0x80000002 + i);
    std::memcpy(text + 16 * i, &r, 16);
  }
  std::string brand(text);
  const size_t first = brand.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return brand.substr(first, brand.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string> CpuIsa() {
  const unsigned max_leaf = Cpuid(0).a;
  const CpuidRegs l1 = Cpuid(1);
  const CpuidRegs l7 = max_leaf >= 7 ? Cpuid(7) : CpuidRegs{};
  const CpuidRegs l7s1 = max_leaf >= 7 && l7.a >= 1 ? Cpuid(7, 1) : CpuidRegs{};
  const uint64_t xcr0 = EnabledStateComponents(l1);
  const bool ymm = (xcr0 & 0x6) == 0x6;           // SSE and AVX state
  const bool zmm = ymm && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool amx = (xcr0 & 0x60000) == 0x60000;   // XTILECFG, XTILEDATA
  auto bit = [](unsigned reg, int b) { return ((reg >> b) & 1) != 0; };
  const std::pair<const char*, bool> flags[] = {{"sse4_2", bit(l1.c, 20)},
                                                {"avx", ymm && bit(l1.c, 28)},
                                                {"avx2", ymm && bit(l7.b, 5)},
                                                {"fma", ymm && bit(l1.c, 12)},
                                                {"f16c", ymm && bit(l1.c, 29)},
                                                {"avx512f", zmm && bit(l7.b, 16)},
                                                {"avx512bw", zmm && bit(l7.b, 30)},
                                                {"avx512vl", zmm && bit(l7.b, 31)},
                                                {"avx512_bf16", zmm && bit(l7s1.a, 5)},
                                                {"avx512_vnni", zmm && bit(l7.c, 11)},
                                                {"amx_tile", amx && bit(l7.d, 24)}};
  std::vector<std::string> isa;
  for (const auto& [name, present] : flags)
    if (present) isa.push_back(name);
  return isa;
}
#else
// The first value of `key` in /proc/cpuinfo ("model name", "flags").
std::string CpuInfoField(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    return value;
  }
  return "";
}
std::string CpuBrand() { return CpuInfoField("model name"); }
std::vector<std::string> CpuIsa() {
  std::set<std::string> flags;
  std::istringstream words(CpuInfoField("flags"));
  for (std::string w; words >> w;) flags.insert(w);
  std::vector<std::string> isa;
  for (const std::string& want : KnownIsaFlags())
    if (flags.count(want)) isa.push_back(want);
  return isa;
}
#endif

int64_t CacheBytes(int name) {
  const long v = sysconf(name);
  return v > 0 ? v : 0;
}

// The first line of a small sysfs file, or "" when it cannot be read.
std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The last-level cache that cpu0 shares, as the kernel reports it ("32768K").
// glibc's sysconf derives the L3 from CPUID, which under a hypervisor can
// describe the whole host socket (320 MiB on a Zen 4 guest whose cores share
// 32 MiB), so sysfs comes first and sysconf only where sysfs is missing.
int64_t L3Bytes() {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
    const std::string level = ReadFirstLine(dir + "level");
    if (level.empty()) break;
    if (level != "3") continue;
    const std::string size = ReadFirstLine(dir + "size");
    char* end = nullptr;
    const long long value = std::strtoll(size.c_str(), &end, 10);
    if (value <= 0 || end == size.c_str()) break;
    const int64_t scale = *end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : 1;
    return static_cast<int64_t>(value) * scale;
  }
  return CacheBytes(_SC_LEVEL3_CACHE_SIZE);
}

}  // namespace

uint64_t TargetFingerprint::hash() const {
  uint64_t h = HashBytes(cpu_model.data(), cpu_model.size());
  for (const std::string& f : isa) h = HashCombine(h, HashBytes(f.data(), f.size()));
  for (int64_t v : {static_cast<int64_t>(logical_cpus), l1d_bytes, l2_bytes, l3_bytes})
    h = HashCombine(h, static_cast<uint64_t>(v));
  return HashCombine(h, HashBytes(fusetune_version.data(), fusetune_version.size()));
}

std::string TargetFingerprint::HashString() const { return HashToHex(hash()); }

const char* CacheProtocolName(CacheProtocol caches) {
  switch (caches) {
    case CacheProtocol::kFlushed: return "flushed";
    case CacheProtocol::kWarm: return "warm";
    case CacheProtocol::kColdWeights: return "cold-weights";
  }
  return "flushed";
}

std::optional<CacheProtocol> CacheProtocolFromName(std::string_view name) {
  for (CacheProtocol p : {CacheProtocol::kFlushed, CacheProtocol::kWarm, CacheProtocol::kColdWeights})
    if (name == CacheProtocolName(p)) return p;
  return std::nullopt;
}

namespace {

// Flushed keeps the bare hash, so databases from before the protocols
// existed (all flushed) stay valid.
const char* KeySuffix(CacheProtocol caches) {
  switch (caches) {
    case CacheProtocol::kFlushed: return "";
    case CacheProtocol::kWarm: return "-warm";
    case CacheProtocol::kColdWeights: return "-coldw";
  }
  return "";
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string PrecisionPolicy::ToString() const {
  return mixed ? fmt::format("mixed (error budget {:g})", error_budget) : "f32";
}

namespace {

constexpr std::string_view kMixedMark = "-mixed";

std::string PrecisionSuffix(const PrecisionPolicy& p) {
  return p.mixed ? fmt::format("{}{:g}", kMixedMark, p.error_budget) : "";
}

}  // namespace

std::string TargetKey(const TargetFingerprint& f, CacheProtocol caches,
                      const PrecisionPolicy& precision) {
  return f.HashString() + PrecisionSuffix(precision) + KeySuffix(caches);
}

PrecisionPolicy PrecisionPolicyOfTargetKey(const std::string& target_key) {
  const size_t at = target_key.find(kMixedMark);
  if (at == std::string::npos) return {};
  PrecisionPolicy p;
  p.mixed = true;
  p.error_budget = std::strtod(target_key.c_str() + at + kMixedMark.size(), nullptr);
  return p;
}

CacheProtocol CacheProtocolOfTargetKey(const std::string& target_key) {
  for (CacheProtocol p : {CacheProtocol::kWarm, CacheProtocol::kColdWeights})
    if (EndsWith(target_key, KeySuffix(p))) return p;
  return CacheProtocol::kFlushed;
}

namespace {

TargetFingerprint DetectTargetUncached() {
  TargetFingerprint f;
  f.cpu_model = CpuBrand();
  f.isa = CpuIsa();
  f.logical_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  f.l1d_bytes = CacheBytes(_SC_LEVEL1_DCACHE_SIZE);
  f.l2_bytes = CacheBytes(_SC_LEVEL2_CACHE_SIZE);
  f.l3_bytes = L3Bytes();
  f.fusetune_version = FUSETUNE_VERSION;
  return f;
}

}  // namespace

TargetFingerprint DetectTarget() {
  // Read once per process: /proc/cpuinfo is parsed twice (60 us here, a
  // twentieth of a compile's budget), and the machine does not change.
  static const TargetFingerprint detected = DetectTargetUncached();
  return detected;
}

bool TargetFingerprint::Has(std::string_view flag) const {
  return std::find(isa.begin(), isa.end(), flag) != isa.end();
}

std::string ThisMachineKey(CacheProtocol caches, const PrecisionPolicy& precision) {
  return TargetKey(DetectTarget(), caches, precision);
}

std::string FlushedKeyOf(const std::string& target_key) {
  const size_t dash = target_key.find('-');  // the hash is hex digits
  return dash == std::string::npos ? target_key : target_key.substr(0, dash);
}

nlohmann::json FingerprintToJson(const TargetFingerprint& f) {
  return {{"cpu_model", f.cpu_model},
          {"isa", f.isa},
          {"logical_cpus", f.logical_cpus},
          {"l1d_bytes", f.l1d_bytes},
          {"l2_bytes", f.l2_bytes},
          {"l3_bytes", f.l3_bytes},
          {"fusetune_version", f.fusetune_version},
          {"hash", f.HashString()}};
}

}  // namespace fusetune::target
