#include <gtest/gtest.h>

#include "common/log.h"
#include "common/status.h"

namespace fusetune {
namespace {

Result<int> Half(int x) {
  if (x % 2) return Error(ErrorCode::kInvalidArgument, "odd value " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  FT_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(Status, ResultCarriesValueOrError) {
  auto ok = Quarter(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 2);
  auto bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message(), "odd value 3");
}

TEST(Status, ContextIsPrepended) {
  Error e(ErrorCode::kParse, "bad token");
  EXPECT_EQ(e.WithContext("model.onnx").message(), "model.onnx: bad token");
  EXPECT_EQ(e.ToString(), "parse error: bad token");
}

TEST(Status, ReturnIfErrorPropagates) {
  auto f = [](bool fail) -> Status {
    FT_RETURN_IF_ERROR(fail ? Status(Error(ErrorCode::kIo, "disk")) : Status::Ok());
    return Status::Ok();
  };
  EXPECT_TRUE(f(false).ok());
  EXPECT_EQ(f(true).error().code(), ErrorCode::kIo);
}

TEST(StatusDeathTest, CheckAbortsWithLocation) {
  EXPECT_DEATH(FT_CHECK(1 + 1 == 3, "arithmetic"), "internal check failed.*arithmetic");
}

TEST(Log, ParsesLevels) {
  LogLevel level;
  EXPECT_TRUE(ParseLogLevel("debug", &level));
  EXPECT_EQ(level, LogLevel::kDebug);
  EXPECT_FALSE(ParseLogLevel("verbose", &level));
}

}  // namespace
}  // namespace fusetune
