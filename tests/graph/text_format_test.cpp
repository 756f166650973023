#include <gtest/gtest.h>

#include "graph/text_format.h"
#include "graph/workload_key.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

using testing::Parse;

const char* kMlp = R"(
graph mlp opset 17 {
  input x: f32[B=2, 4]
  const w: f32[4, 3]
  const b: f32[3] = [0.5, -1, 2]
  h = MatMul(x, w)
  y = Add(h, b)
  r = Relu(y)
  s0, s1 = Split(r) {axis=1, split=[1, 2]}
  output s0, s1
}
)";

TEST(TextFormat, ParsesAndInfersTypes) {
  Graph g = Parse(kMlp);
  ASSERT_EQ(g.nodes.size(), 4u);
  EXPECT_EQ(g.opset, 17);
  EXPECT_EQ(g.type(*g.FindValue("y")).dims, (Dims{2, 3}));
  EXPECT_EQ(g.type(*g.FindValue("s1")).dims, (Dims{2, 2}));
  EXPECT_EQ(g.type(*g.FindValue("x")).ToString(), "f32[B=2, 4]");
  EXPECT_EQ(g.type(*g.FindValue("h")).symbols.at(0), "B");  // symbolic dims propagate
}

TEST(TextFormat, PrintParseRoundTrip) {
  Graph g = Parse(kMlp);
  TextPrintOptions print;
  print.max_inline_elements = 1000;
  const std::string text = PrintGraphText(g, print);
  Graph again = Parse(text);
  EXPECT_EQ(PrintGraphText(again, print), text);
  const TensorMap feeds = RandomFeeds(g, 3);
  EXPECT_EQ(testing::ScaledError(testing::RunFirst(again, feeds), testing::RunFirst(g, feeds)),
            0.0);
}

// Shape-only parsing (constants printed without values get no storage) keeps
// the types and the structure key: what the compiler's shape buckets read.
TEST(TextFormat, ShapeOnlyConstantsKeepTypesAndTheStructureKey) {
  TextParseOptions shapes;
  shapes.constant_data = false;
  auto g = ParseGraphText(kMlp, shapes);
  ASSERT_TRUE(g.ok()) << g.error().ToString();
  const Value& w = g->value(*g->FindValue("w"));
  EXPECT_FALSE(w.constant->defined());
  EXPECT_EQ(w.type.dims, (Dims{4, 3}));
  EXPECT_TRUE(g->value(*g->FindValue("b")).constant->defined());  // printed with values
  Graph full = Parse(kMlp);
  EXPECT_EQ(g->type(*g->FindValue("s1")).dims, full.type(*full.FindValue("s1")).dims);
  EXPECT_EQ(CanonicalizeGraph(*g, KeyScope::kStructure).key,
            CanonicalizeGraph(full, KeyScope::kStructure).key);
}

TEST(TextFormat, AttributesOfEveryKind) {
  Graph g = Parse(R"(graph g {
    input x: f32[2, 3]
    y = Gelu(x) {approximate="tanh"}
    t = Transpose(y) {perm=[1, 0]}
    c = Constant() {value=f32[2] [1.5, 2]}
    l = LeakyRelu(t) {alpha=0.2}
    output l, c
  })");
  const Node& gelu = g.nodes[0];
  EXPECT_EQ(gelu.attrs.GetString("approximate").value(), "tanh");
  EXPECT_EQ(g.nodes[1].attrs.GetInts("perm").value(), (std::vector<int64_t>{1, 0}));
  EXPECT_FLOAT_EQ(g.nodes[3].attrs.GetFloat("alpha").value(), 0.2f);
}

TEST(TextFormat, QuotesNamesThatAreNotIdentifiers) {
  Graph g = Parse(R"(graph g {
    input "onnx::in/0": f32[2]
    "/layer/Relu_output_0" = Relu("onnx::in/0")
    output "/layer/Relu_output_0"
  })");
  const std::string text = PrintGraphText(g);
  EXPECT_NE(text.find("\"/layer/Relu_output_0\" = Relu(\"onnx::in/0\")"), std::string::npos)
      << text;
}

TEST(TextFormat, ErrorsNameTheLine) {
  auto r = ParseGraphText("graph g {\n  input x: f32[2]\n  y = Relu(z)\n  output y\n}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("line 3"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("'z'"), std::string::npos);
  auto bad_type = ParseGraphText("graph g { input x: f31[2] output x }");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.error().message().find("unknown dtype 'f31'"), std::string::npos);
  auto no_output = ParseGraphText("graph g { input x: f32[2] }");
  EXPECT_FALSE(no_output.ok());
}

}  // namespace
}  // namespace fusetune::graph
