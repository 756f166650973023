#include "test_util.h"

#include <cmath>

namespace fusetune::testing {

graph::Graph Parse(const std::string& text, bool fold) {
  graph::TextParseOptions options;
  options.fold_constants = fold;
  auto g = graph::ParseGraphText(text, options);
  EXPECT_TRUE(g.ok()) << g.error().ToString();
  if (!g.ok()) return graph::Graph();
  return std::move(*g);
}

graph::Tensor F32(graph::Dims dims, std::vector<float> values) {
  return graph::Tensor::FromVector<float>(graph::DataType::kFloat32, dims, values);
}
graph::Tensor Pattern(graph::Dims dims, int mod, double off, double scale) {
  graph::Tensor t(graph::DataType::kFloat32, dims);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>(((i % mod) - off) * scale);
  return t;
}

std::string ParseError(const std::string& text) {
  auto r = graph::ParseGraphText(text);
  return r.ok() ? "" : r.error().message();
}

graph::Tensor I64(graph::Dims dims, std::vector<int64_t> values) {
  return graph::Tensor::FromVector<int64_t>(graph::DataType::kInt64, dims, values);
}

std::vector<float> Values(const graph::Tensor& t) {
  std::vector<float> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<float>(t.GetAsDouble(i));
  return v;
}

graph::Tensor RunFirst(const graph::Graph& graph, const graph::TensorMap& feeds) {
  auto r = graph::RunReference(graph, feeds);
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  if (!r.ok()) return graph::Tensor();
  return r->outputs.at(graph.value(graph.outputs[0]).name);
}

double ScaledError(const graph::Tensor& a, const graph::Tensor& b) {
  EXPECT_EQ(a.dims(), b.dims());
  if (a.dims() != b.dims()) return INFINITY;
  double max_err = 0, scale = 1e-12;
  for (int64_t i = 0; i < a.numel(); ++i) {
    max_err = std::max(max_err, std::abs(a.GetAsDouble(i) - b.GetAsDouble(i)));
    scale = std::max(scale, std::abs(b.GetAsDouble(i)));
  }
  return max_err / scale;
}

std::string TestData(const std::string& file) {
  return std::string(FUSETUNE_TESTDATA_DIR) + "/" + file;
}

graph::Tensor Uniform(graph::Dims dims, double lo, double hi, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(lo, hi);
  graph::Tensor t(graph::DataType::kFloat32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(dist(rng));
  return t;
}

int CountOps(const graph::Graph& g, const std::string& op_type) {
  int n = 0;
  for (const graph::Node& node : g.nodes) n += node.op_type == op_type;
  return n;
}

}  // namespace fusetune::testing
