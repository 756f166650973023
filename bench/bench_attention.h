// The attention problem shared by fusetune's and the peers' benchmarks:
// 12 heads x 384 tokens x 64, Q, K, V and O as [heads, seq, dim].
#pragma once

#include <cstdint>
#include <vector>

namespace fusetune::bench {

struct AttentionData {
  int64_t heads = 12, seq = 384, dim = 64;
  std::vector<float> q, k, v, o, scores, causal_mask;
  AttentionData();
};
AttentionData& SharedAttentionData();
double AttentionFlops(const AttentionData& data, bool causal);

}  // namespace fusetune::bench
