// A model file's key and symbolic dimensions before any is bound
// (graph/model_file.h), on PyTorch's exports (scripts/gen_models.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "graph/model_file.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

using testing::TestData;

std::string CopyTo(const std::string& from, const std::string& name, const std::string& extra) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fusetune_model_file_" + std::to_string(getpid()) + "_" + name);
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(path, std::ios::binary);
  out << in.rdbuf() << extra;
  return path.string();
}

TEST(ModelFileFacts, SymbolicDimensionsInTheOrderTheyFirstAppear) {
  auto facts = ReadModelFileFacts(TestData("encoder_dynamic_op17.onnx"));
  ASSERT_TRUE(facts.ok()) << facts.error().ToString();
  EXPECT_EQ(facts->symbolic_dims, (std::vector<std::string>{"batch", "seq"}));
  EXPECT_EQ(facts->key.size(), 16u);
  auto fixed = ReadModelFileFacts(TestData("mlp.onnx"));
  ASSERT_TRUE(fixed.ok()) << fixed.error().ToString();
  EXPECT_TRUE(fixed->symbolic_dims.empty());
  EXPECT_NE(fixed->key, facts->key);
}

TEST(ModelFileFacts, TheKeyIsOfTheBytesNotThePath) {
  const std::string original = TestData("encoder_dynamic_op17.onnx");
  auto a = ReadModelFileFacts(original);
  auto moved = ReadModelFileFacts(CopyTo(original, "moved.onnx", ""));
  // An unknown field appended: the same graph, other bytes (another export).
  auto other = ReadModelFileFacts(CopyTo(original, "other.onnx", std::string("\xa0\x06\x01", 3)));
  ASSERT_TRUE(a.ok() && moved.ok() && other.ok());
  EXPECT_EQ(a->key, moved->key);
  EXPECT_NE(a->key, other->key);
  EXPECT_EQ(other->symbolic_dims, a->symbolic_dims);
  auto key = ModelFileKey(original);  // the same key without parsing
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, a->key);
}

TEST(ModelFileFacts, AMissingOrMalformedFileIsAnErrorNamingIt) {
  auto missing = ReadModelFileFacts("/nonexistent/model.onnx");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message().find("/nonexistent/model.onnx"), std::string::npos);
  const std::string junk = CopyTo("/dev/null", "junk.onnx", "not a model");
  auto bad = ReadModelFileFacts(junk);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kParse);
  EXPECT_NE(bad.error().message().find(junk), std::string::npos);
}

}  // namespace
}  // namespace fusetune::graph
