// Which micro-tile shapes a tiling space offers: the thin ones (fewer than 6
// rows; kernels/microkernel.cpp) only to GEMMs of at most 8 rows, where a
// decode step streams its weights; the wide ones everywhere.
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
  }
  return shapes;
}

std::set<Shape> AllShapes(bool thin) {
  std::set<Shape> shapes;
  for (auto [mr, nr] : kernels::MicroTileShapes())
    if (thin || mr >= 6) shapes.emplace(mr, nr);
  return shapes;
}

std::string WithRows(std::string text, int rows) {
  text.replace(text.find("ROWS"), 4, std::to_string(rows));
  return text;
}

constexpr const char* kMlpOfRows = R"(graph g { input x: f32[ROWS, 64]  const w: f32[64, 96]
  const b: f32[96]  h = MatMul(x, w)  y = Add(h, b)  output y })";

TEST(MicroChoice, ThinTilesOnlyForGemmsOfAFewRows) {
  ASSERT_GT(AllShapes(true).size(), AllShapes(false).size()) << "no thin micro-tile is built";
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

}  // namespace
}  // namespace fusetune::fusion_space
