// ShapeInstances (compiler/shape_instances.h): one executable over changing
// sizes. A run at a new size gets a program made for it, which computes
// what the reference executor computes at that size; a size met before is
// picked without compiling; the least recently used instance goes past the
// capacity; a dimension that is no input's, and inputs that disagree on a
// size, are errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compiler/shape_instances.h"
#include "graph/reference_executor.h"
#include "tests/graph/test_util.h"

namespace fusetune::compiler {
namespace {

std::string Model(int64_t rows) {
  return fmt::format(R"(graph g {{ input x: f32[rows={0}, 64]  input y: f32[rows={0}, 64]
    const w: f32[64, 32]  s = Add(x, y)  h = MatMul(s, w)  r = Relu(h)  output r }})",
                     rows);
}

struct Counting {
  int compiles = 0;
  std::unique_ptr<TuningIndex> index = TuningIndex::Empty({});
  ShapeInstances::Instantiate Instantiate() {
    return [this](const ShapeInstances::Dims& dims) {
      ++compiles;
      return CompiledModel::Compile(testing::Parse(Model(dims.at("rows"))), {}, *index, {});
    };
  }
  std::unique_ptr<ShapeInstances> Make(size_t capacity) {
    auto first = Instantiate()({{"rows", 4}});
    EXPECT_TRUE(first.ok());
    auto s =
        ShapeInstances::Make(std::move(*first), {{"rows", 4}}, {"rows"}, Instantiate(), capacity);
    EXPECT_TRUE(s.ok()) << s.error().message();
    return std::move(*s);
  }
};

// Picks the instance for `rows` rows and checks its outputs.
void RunAt(ShapeInstances& s, int64_t rows) {
  const std::vector<int64_t> shape = {rows, 64};
  auto picked = s.Pick([&](const std::string&) { return &shape; });
  ASSERT_TRUE(picked.ok()) << picked.error().message();
  EXPECT_EQ(s.dims().at("rows"), rows);
  const graph::Graph& g = (*picked)->graph();
  const graph::TensorMap feeds = graph::RandomFeeds(g, 5);
  auto got = (*picked)->program().Run(feeds);
  ASSERT_TRUE(got.ok()) << got.error().message();
  auto want = graph::RunReference(g, feeds);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(got->at("r").dims(), (graph::Dims{rows, 32}));
  EXPECT_LE(testing::ScaledError(got->at("r"), want->outputs.at("r")), 1e-4);
}

TEST(ShapeInstances, ANewSizeGetsItsOwnProgramAndAKnownOneIsPicked) {
  Counting c;
  auto s = c.Make(16);
  RunAt(*s, 4);
  EXPECT_EQ(c.compiles, 1);  // the first instance
  RunAt(*s, 97);
  RunAt(*s, 3);
  EXPECT_EQ(c.compiles, 3);
  RunAt(*s, 97);
  RunAt(*s, 4);
  EXPECT_EQ(c.compiles, 3);
  EXPECT_EQ(s->size(), 3u);
}

TEST(ShapeInstances, TheLeastRecentlyUsedGoesPastTheCapacity) {
  Counting c;
  auto s = c.Make(2);
  RunAt(*s, 5);  // holds 4, 5
  RunAt(*s, 4);  // 5 is now the least recently used
  RunAt(*s, 6);  // evicts 5
  EXPECT_EQ(s->size(), 2u);
  RunAt(*s, 4);
  EXPECT_EQ(c.compiles, 3);
  RunAt(*s, 5);  // made again
  EXPECT_EQ(c.compiles, 4);
}

TEST(ShapeInstances, BadDimensionsAndDisagreeingInputsAreErrors) {
  Counting c;
  auto first = c.Instantiate()({{"rows", 4}});
  ASSERT_TRUE(first.ok());
  auto bad = ShapeInstances::Make(std::move(*first), {{"rows", 4}}, {"cols"}, c.Instantiate());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("'cols' is not a symbolic dimension"), std::string::npos);
  EXPECT_NE(bad.error().message().find("rows"), std::string::npos) << bad.error().message();

  auto s = c.Make(16);
  const std::vector<int64_t> x = {5, 64}, y = {6, 64};
  auto picked = s->Pick([&](const std::string& input) { return input == "x" ? &x : &y; });
  ASSERT_FALSE(picked.ok());
  EXPECT_NE(picked.error().message().find("where another input gave"), std::string::npos)
      << picked.error().message();
  // 0 is a size (a KV cache of no rows; the import checks where it may be),
  // a negative one is not.
  const std::vector<int64_t> negative = {-1, 64};
  picked = s->Pick([&](const std::string&) { return &negative; });
  ASSERT_FALSE(picked.ok());
  EXPECT_NE(picked.error().message().find("a size is never negative"), std::string::npos)
      << picked.error().message();
}

}  // namespace
}  // namespace fusetune::compiler
