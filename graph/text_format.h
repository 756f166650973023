// A readable text form of graphs, so that tests state graphs and expected
// rewrites in a few lines:
//
//   graph mlp opset 17 {
//     input x: f32[B=2, 16]            # B names a symbolic dimension
//     const w: f32[16, 8]              # no values: seeded random from the name
//     const b: f32[8] = [0, 1, 2, 3, 4, 5, 6, 7]
//     const shape: i64[2] = [2, 8]
//     h = MatMul(x, w)
//     y = Add(h, b)
//     s0, s1 = Split(y) {axis=1, split=[4, 4]}
//     z = Gelu(s0) {approximate="tanh"}
//     output z
//   }
//
// Attribute values: 3 (int), 3.0 / 1e-5 (float), "s" (string), [1, 2] (ints),
// [1.0, 2.5] (floats), ["a"] (strings), f32[2] [1, 2] (tensor). An omitted
// optional input is written _. Names that are not plain identifiers are
// quoted. '#' starts a comment.
#pragma once

#include <set>
#include <string>

#include "common/status.h"
#include "graph/graph.h"

namespace fusetune::graph {

struct TextParseOptions {
  bool infer_shapes = true;     // run shape inference after parsing
  bool fold_constants = false;  // tests of folding need the unfolded graph
  // Constants printed without values (a comment with their size and hash)
  // are filled with seeded random values; false leaves them without storage
  // (Tensor::ShapeOnly), for readers of structure and shapes only, to whom
  // the fill of a layer's weights would cost milliseconds per graph.
  bool constant_data = true;
};

Result<Graph> ParseGraphText(const std::string& text, const TextParseOptions& options = {});

struct TextPrintOptions {
  // Constants with at most this many elements print their values; larger
  // ones print a comment with their element count and content hash, unless
  // listed in `inline_values`.
  int64_t max_inline_elements = 16;
  std::set<ValueId> inline_values;
  bool print_types = false;  // annotate node outputs with their inferred type
};

std::string PrintGraphText(const Graph& graph, const TextPrintOptions& options = {});

}  // namespace fusetune::graph
