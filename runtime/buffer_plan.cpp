#include "runtime/buffer_plan.h"

#include <algorithm>

namespace fusetune::runtime {

namespace {
int64_t Align(int64_t n) { return (n + 63) / 64 * 64; }
}  // namespace

BufferPlan PlanBuffers(const std::vector<BufferLifetime>& lifetimes, int64_t steps) {
  BufferPlan plan;
  plan.values = static_cast<int64_t>(lifetimes.size());
  std::vector<int64_t> live(std::max<int64_t>(steps, 1), 0);
  for (const auto& l : lifetimes) {
    plan.no_reuse_bytes += Align(l.bytes);
    for (int64_t s = l.first_step; s <= l.last_step; ++s) live[s] += l.bytes;
  }
  plan.peak_live_bytes = *std::max_element(live.begin(), live.end());

  std::vector<size_t> order(lifetimes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return lifetimes[a].bytes > lifetimes[b].bytes; });
  struct Placed {
    int64_t offset, size, first, last;
  };
  std::vector<Placed> placed, overlapping;
  placed.reserve(order.size());
  for (size_t i : order) {
    const BufferLifetime& l = lifetimes[i];
    const int64_t size = Align(std::max<int64_t>(l.bytes, 1));
    overlapping.clear();
    for (const Placed& p : placed)
      if (p.first <= l.last_step && l.first_step <= p.last) overlapping.push_back(p);
    std::sort(overlapping.begin(), overlapping.end(),
              [](const Placed& a, const Placed& b) { return a.offset < b.offset; });
    int64_t offset = 0;
    for (const Placed& p : overlapping) {
      if (p.offset - offset >= size) break;  // the gap before p fits
      offset = std::max(offset, p.offset + p.size);
    }
    placed.push_back({offset, size, l.first_step, l.last_step});
    plan.offset[l.value] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
  }
  return plan;
}

}  // namespace fusetune::runtime
