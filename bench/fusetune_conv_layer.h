// fusetune's convolution template on one layer of onednn_conv's tables, for
// `onednn_conv --fusetune`: every algorithm that applies, each at the best
// of a grid of tilings (channel blocks, position blocks, reduction slices,
// micro-tiles), with pre-packed weights and the layer's post-ops as the
// template's epilogue (bias; ReLU, ReLU6 as a clip, a residual added before
// the ReLU). Timed like oneDNN in the same process: wall clock, warm
// caches, best and median of `runs` back-to-back calls of the best tiling.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/conv.h"

namespace fusetune::bench {

enum class LayerPost { kNone, kRelu, kRelu6, kSum, kSumRelu };

struct LayerSpec {
  int cin = 0, cout = 0, hw = 0, k = 1, stride = 1, groups = 1;
  LayerPost post = LayerPost::kNone;
};

struct AlgorithmTiming {
  kernels::ConvAlgorithm algorithm = kernels::ConvAlgorithm::kIm2colGemm;
  kernels::ConvTiling tiling;
  double best_ms = 0, median_ms = 0;
  int tilings_tried = 0;
};

// One entry per algorithm that applies to the layer and has a legal tiling,
// in ConvAlgorithm order. `layouts`: the grid also runs each tiling in
// every input and output layout the algorithm takes (else NCHW only).
// `cold_weights`: the best tiling's timed runs each start with the caches
// evicted and the activations touched again (EvictCachesKeeping), as a
// layer meets them inside a model whose weights exceed the last-level
// cache; the grid itself is searched warm.
std::vector<AlgorithmTiming> TimeFusetuneLayer(const LayerSpec& layer, int threads, int runs,
                                               bool layouts = false, bool cold_weights = false);

// Writes 64 MiB of scratch (more than this machine's last-level cache), then
// reads `keep` regions back in: weights cold, activations warm.
void EvictCachesKeeping(const std::vector<std::pair<const void*, size_t>>& keep);

}  // namespace fusetune::bench
