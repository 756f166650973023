// Moving a tuned tiling to another size of the same group structure (shape
// buckets: a group tuned at 32 rows serving 40).
//
// The nearest legal tiling keeps a block that covered a whole dimension at
// the tuned size at its old length: an mc of 32 on 32 rows runs 40 rows as
// a block of 32 and one of 8, where the tilings tuned for 40 rows take one
// block of 40. So a block that was a whole changed dimension becomes the
// new length first; legality is the caller's (TilingSpace::Nearest).
#pragma once

#include <cstdint>
#include <span>

#include "fusion_space/tiling_space.h"

namespace fusetune::fusion_space {

// `from` and `to`: the tuned and the new shape's ShapeSignature
// (graph/workload_key.h), position by position. A block field (not a
// micro-tile's mr or nr) equal to a dimension that changed, from -> to,
// becomes `to`; a length that changed two ways, or also appears unchanged
// (a head size equal to the old sequence), is left alone: which dimension
// the block covered is not known.
Tiling ScaleWholeBlocks(const Tiling& tiling, std::span<const int64_t> from,
                        std::span<const int64_t> to);

}  // namespace fusetune::fusion_space
