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

// The copies a test makes, in a folder of its own removed when the test ends
// (the suite runs in parallel processes and leaves nothing in the temp folder).
class TempCopies {
 public:
  TempCopies()
      : dir_(std::filesystem::temp_directory_path() /
             ("fusetune_model_file_" + std::to_string(getpid()))) {
    std::filesystem::create_directories(dir_);
  }
  ~TempCopies() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TempCopies(const TempCopies&) = delete;
  TempCopies& operator=(const TempCopies&) = delete;

  // `from`'s bytes, then `extra`, as the file `name` in the folder.
  std::string CopyTo(const std::string& from, const std::string& name, const std::string& extra) {
    const auto path = dir_ / name;
    std::ifstream in(from, std::ios::binary);
    std::ofstream out(path, std::ios::binary);
    out << in.rdbuf() << extra;
    return path.string();
  }

 private:
  std::filesystem::path dir_;
};

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
  TempCopies copies;
  auto a = ReadModelFileFacts(original);
  auto moved = ReadModelFileFacts(copies.CopyTo(original, "moved.onnx", ""));
  // An unknown field appended: the same graph, other bytes (another export).
  auto other =
      ReadModelFileFacts(copies.CopyTo(original, "other.onnx", std::string("\xa0\x06\x01", 3)));
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
  TempCopies copies;
  const std::string junk = copies.CopyTo("/dev/null", "junk.onnx", "not a model");
  auto bad = ReadModelFileFacts(junk);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kParse);
  EXPECT_NE(bad.error().message().find(junk), std::string::npos);
}

}  // namespace
}  // namespace fusetune::graph
