#include "fusion_space/tiling_move.h"

#include <map>
#include <optional>
#include <set>
#include <string>

namespace fusetune::fusion_space {

namespace {

// Old length -> new length for the dimensions that changed unambiguously.
std::map<int64_t, int64_t> ChangedLengths(std::span<const int64_t> from,
                                          std::span<const int64_t> to) {
  std::map<int64_t, std::optional<int64_t>> seen;
  std::set<int64_t> unchanged;
  for (size_t i = 0; i < from.size() && i < to.size(); ++i) {
    if (from[i] == to[i]) {
      unchanged.insert(from[i]);
      continue;
    }
    auto [it, added] = seen.emplace(from[i], to[i]);
    if (!added && it->second != to[i]) it->second.reset();  // changed two ways
  }
  std::map<int64_t, int64_t> changed;
  for (const auto& [old_length, new_length] : seen)
    if (new_length && !unchanged.count(old_length) && old_length > 1 && *new_length > 0)
      changed.emplace(old_length, *new_length);
  return changed;
}

}  // namespace

Tiling ScaleWholeBlocks(const Tiling& tiling, std::span<const int64_t> from,
                        std::span<const int64_t> to) {
  if (from.size() != to.size()) return tiling;
  const std::map<int64_t, int64_t> changed = ChangedLengths(from, to);
  if (changed.empty()) return tiling;
  nlohmann::json fields = TilingToJson(tiling);
  if (!fields.is_object()) return tiling;
  bool any = false;
  for (auto& [name, value] : fields.items()) {
    if (name == "mr" || name == "nr" || !value.is_number_integer()) continue;
    if (auto it = changed.find(value.get<int64_t>()); it != changed.end()) {
      value = it->second;
      any = true;
    }
  }
  Tiling scaled;
  if (!any || !TilingFromJson(TilingTemplate(tiling), fields, &scaled)) return tiling;
  return scaled;
}

}  // namespace fusetune::fusion_space
