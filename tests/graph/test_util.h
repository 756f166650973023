// Helpers for graph tests: parse text graphs, build tensors, compare results.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "graph/reference_executor.h"
#include "graph/text_format.h"

namespace fusetune::testing {

graph::Graph Parse(const std::string& text, bool fold = false);
graph::Tensor F32(graph::Dims dims, std::vector<float> values);
graph::Tensor I64(graph::Dims dims, std::vector<int64_t> values);
// ((i % mod) - off) * scale for element i: inputs an offline PyTorch script
// can reproduce exactly.
graph::Tensor Pattern(graph::Dims dims, int mod, double off, double scale);
// The error of parsing a text graph (inference runs while parsing), "" when it parses.
std::string ParseError(const std::string& text);
std::vector<float> Values(const graph::Tensor& t);  // any dtype, as float
// Runs the graph on `feeds` and returns its first output.
graph::Tensor RunFirst(const graph::Graph& graph, const graph::TensorMap& feeds);
// max |a - b| / max(max |b|, tiny): the error relative to the reference's scale.
double ScaledError(const graph::Tensor& a, const graph::Tensor& b);
std::string TestData(const std::string& file);
// A float tensor of uniform values in [lo, hi).
graph::Tensor Uniform(graph::Dims dims, double lo, double hi, std::mt19937& rng);
// How many of the graph's nodes have this op type.
int CountOps(const graph::Graph& g, const std::string& op_type);

}  // namespace fusetune::testing

#define EXPECT_VALUES_NEAR(tensor, expected, tol)                                  \
  do {                                                                             \
    auto ft_got_ = ::fusetune::testing::Values(tensor);                            \
    std::vector<float> ft_want_ = expected;                                        \
    ASSERT_EQ(ft_got_.size(), ft_want_.size());                                    \
    for (size_t ft_i_ = 0; ft_i_ < ft_got_.size(); ++ft_i_)                        \
      EXPECT_NEAR(ft_got_[ft_i_], ft_want_[ft_i_], tol) << "at element " << ft_i_; \
  } while (0)
