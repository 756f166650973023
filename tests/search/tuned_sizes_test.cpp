// The sizes a model was tuned at, read back from its jobs' specs
// (search/tuned_sizes.h), for jobs written by TuningJob and by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "db/database.h"
#include "search/tuned_sizes.h"

namespace fusetune::search {
namespace {

class TunedSizesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("fusetune_tuned_sizes_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db");
    std::filesystem::remove(path_);
    auto opened = db::MakeSqliteDatabase(path_.string());
    ASSERT_TRUE(opened.ok()) << opened.error().message();
    database_ = std::move(*opened);
  }
  void TearDown() override {
    database_.reset();
    for (const char* suffix : {"", "-wal", "-shm"})
      std::filesystem::remove(path_.string() + suffix);
  }
  void AddJob(const std::string& spec, const std::string& state = "done") {
    db::JobEntry job;
    job.spec = spec;
    job.state = state;
    auto id = database_->CreateJob(job);
    ASSERT_TRUE(id.ok()) << id.error().message();
    ASSERT_TRUE(database_->UpdateJob(*id, state, "{}").ok());
  }
  std::map<std::string, std::vector<int64_t>> Sizes(const std::string& key) {
    auto sizes = TunedSizes(*database_, key);
    EXPECT_TRUE(sizes.ok()) << sizes.error().message();
    return sizes.ok() ? *sizes : std::map<std::string, std::vector<int64_t>>{};
  }

  std::filesystem::path path_;
  std::unique_ptr<db::Database> database_;
};

TEST_F(TunedSizesTest, EachDimensionsValuesOverTheModelsJobsAscendingAndOnce) {
  AddJob(R"({"model_key": "aa", "dims": {"seq": 64, "past": 511}})");
  AddJob(R"({"model_key": "aa", "dims": {"seq": 16, "past": 511}})");
  AddJob(R"({"model_key": "aa", "dims": {"seq": 256, "past": 2047}})", "interrupted");
  using Sizes = std::map<std::string, std::vector<int64_t>>;
  EXPECT_EQ(this->Sizes("aa"), (Sizes{{"past", {511, 2047}}, {"seq", {16, 64, 256}}}));
}

TEST_F(TunedSizesTest, OtherModelsFailedJobsAndOldSpecsDoNotCount) {
  AddJob(R"({"model_key": "aa", "dims": {"seq": 8}})");
  AddJob(R"({"model_key": "bb", "dims": {"seq": 32}})");  // another model
  AddJob(R"({"model_key": "aa", "dims": {"seq": 99}})", "failed");
  AddJob(R"({"model": "x.onnx", "graph_key": "1234"})");  // written before sizes were
  AddJob("not json");
  AddJob(R"({"model_key": "aa", "dims": {"seq": -3, "n": "4"}})");  // not sizes
  using Sizes = std::map<std::string, std::vector<int64_t>>;
  EXPECT_EQ(this->Sizes("aa"), (Sizes{{"seq", {8}}}));
  EXPECT_TRUE(this->Sizes("cc").empty());
}

}  // namespace
}  // namespace fusetune::search
