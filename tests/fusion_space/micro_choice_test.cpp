// Which micro-tile shapes a tiling space offers: the thin ones
// (kernels/microkernel.h) only to GEMMs of at most 8 rows, where a decode
// step streams its weights, and only with a vector kernel; the others
// everywhere.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "fusion_space/space.h"
#include "kernels/microkernel.h"
#include "tests/graph/test_util.h"

namespace fusetune::fusion_space {
namespace {

using Shape = std::pair<int, int>;

std::set<Shape> ShapesOffered(const TilingSpace& space) {
  std::set<Shape> shapes;
  for (const Tiling& t : space.Enumerate()) {
    if (auto* g = std::get_if<kernels::GemmTiling>(&t)) shapes.emplace(g->mr, g->nr);
    if (auto* a = std::get_if<kernels::AttentionTiling>(&t)) shapes.emplace(a->mr, a->nr);
    if (auto* c = std::get_if<kernels::ConvTiling>(&t)) shapes.emplace(c->mr, c->nr);
  }
  return shapes;
}

std::set<Shape> AllShapes(bool thin) {
  std::set<Shape> shapes;
  for (auto [mr, nr] : kernels::MicroTileShapes())
    if (!kernels::IsThinMicroTile(mr, nr) || (thin && kernels::HasVectorThinMicroTile(mr, nr)))
      shapes.emplace(mr, nr);
  return shapes;
}

std::string WithRows(std::string text, int rows) {
  text.replace(text.find("ROWS"), 4, std::to_string(rows));
  return text;
}

constexpr const char* kMlpOfRows = R"(graph g { input x: f32[ROWS, 64]  const w: f32[64, 96]
  const b: f32[96]  h = MatMul(x, w)  y = Add(h, b)  output y })";

TEST(MicroChoice, ThinTilesOnlyForGemmsOfAFewRows) {
  for (auto [mr, nr] : {std::pair{1, 128}, std::pair{2, 64}, std::pair{4, 64}}) {
    EXPECT_TRUE(kernels::IsThinMicroTile(mr, nr));
    EXPECT_NE(kernels::FindMicroKernel(mr, nr), nullptr) << mr << "x" << nr;
  }
  for (auto [mr, nr] : {std::pair{8, 32}, std::pair{4, 24}, std::pair{6, 16}})
    EXPECT_FALSE(kernels::IsThinMicroTile(mr, nr)) << mr << "x" << nr;
  kernels::KernelConfig config;
  for (int rows : {1, 8, 9, 64}) {
    graph::Graph g = testing::Parse(WithRows(kMlpOfRows, rows));
    FusionSpace space(g, config);
    EXPECT_EQ(ShapesOffered(space.Tilings({0, 1})), AllShapes(rows <= 8)) << rows << " rows";
  }
}

constexpr const char* kAttentionOfRows = R"(graph g { input q: f32[1, 2, ROWS, 16]
  input k: f32[1, 2, 48, 16]  input v: f32[1, 2, 48, 16]
  kt = Transpose(k) {perm=[0, 1, 3, 2]}  s = MatMul(q, kt)
  p = Softmax(s) {axis=-1}  o = MatMul(p, v)  output o })";

TEST(MicroChoice, AttentionKeepsTheWideTiles) {
  kernels::KernelConfig config;
  for (int rows : {4, 48}) {
    graph::Graph g = testing::Parse(WithRows(kAttentionOfRows, rows));
    FusionSpace space(g, config);
    std::vector<int32_t> all(g.nodes.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
    EXPECT_EQ(ShapesOffered(space.Tilings(all)), AllShapes(false)) << rows << " queries";
  }
}

// A 1x1 conv of one pixel is a GEMM of one row, but a conv's space keeps the
// wide tiles (the conv templates are tuned for images).
TEST(MicroChoice, ConvKeepsTheWideTiles) {
  graph::Graph g = testing::Parse(R"(graph g { input x: f32[1, 32, 1, 1]
    const w: f32[64, 32, 1, 1]  y = Conv(x, w)  output y })");
  FusionSpace space(g, kernels::KernelConfig{});
  const std::set<Shape> offered = ShapesOffered(space.Tilings({0}));
  ASSERT_FALSE(offered.empty());
  for (auto [mr, nr] : offered) EXPECT_FALSE(kernels::IsThinMicroTile(mr, nr)) << mr << "x" << nr;
}

}  // namespace
}  // namespace fusetune::fusion_space
