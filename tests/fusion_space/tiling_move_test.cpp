// fusion_space/tiling_move.h: a block that covered a whole dimension that
// changed covers the new length; micro-tiles, unchanged lengths and
// ambiguous ones stay.
#include <gtest/gtest.h>

#include <vector>

#include "fusion_space/tiling_move.h"

namespace fusetune::fusion_space {
namespace {

kernels::GemmTiling Gemm(int64_t mc, int64_t nc, int64_t kc) {
  kernels::GemmTiling t;
  t.mc = mc;
  t.nc = nc;
  t.kc = kc;
  t.mr = 8;
  t.nr = 32;
  return t;
}

TEST(ScaleWholeBlocks, ABlockOfAllTheRowsCoversTheNewRows) {
  const std::vector<int64_t> from = {32, 768}, to = {40, 768};
  const Tiling moved = ScaleWholeBlocks(Gemm(32, 256, 768), from, to);
  const auto& g = std::get<kernels::GemmTiling>(moved);
  EXPECT_EQ(g.mc, 40);
  EXPECT_EQ(g.nc, 256);
  EXPECT_EQ(g.kc, 768);
  EXPECT_EQ(g.mr, 8);
  EXPECT_EQ(g.nr, 32);
}

TEST(ScaleWholeBlocks, MicroTilesAndAmbiguousLengthsStay) {
  // 8 rows became 16: mr 8 is a micro-tile, not a block.
  EXPECT_EQ(std::get<kernels::GemmTiling>(ScaleWholeBlocks(Gemm(8, 32, 64), std::vector<int64_t>{8},
                                                           std::vector<int64_t>{16}))
                .mr,
            8);
  // 64 changed here and stayed there (a head size equal to the old length).
  const std::vector<int64_t> from = {64, 64}, to = {96, 64};
  EXPECT_EQ(std::get<kernels::GemmTiling>(ScaleWholeBlocks(Gemm(64, 32, 64), from, to)).mc, 64);
  // 64 became 96 and 128: which one the block covered is not known.
  const std::vector<int64_t> two_ways_from = {64, 64}, two_ways_to = {96, 128};
  EXPECT_EQ(
      std::get<kernels::GemmTiling>(ScaleWholeBlocks(Gemm(64, 32, 64), two_ways_from, two_ways_to))
          .mc,
      64);
  // Signatures of other lengths: unchanged.
  EXPECT_EQ(
      std::get<kernels::GemmTiling>(
          ScaleWholeBlocks(Gemm(32, 32, 64), std::vector<int64_t>{32}, std::vector<int64_t>{40, 1}))
          .mc,
      32);
}

}  // namespace
}  // namespace fusetune::fusion_space
