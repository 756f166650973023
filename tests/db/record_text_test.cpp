// A record's typed status against its stored text: every status survives
// encode -> decode, the text is what databases have always held, and text
// this build cannot read is an explained Error.
#include <gtest/gtest.h>

#include <string>

#include "db/record_text.h"

namespace fusetune::db {
namespace {

TEST(RecordText, EveryStatusRoundTrips) {
  for (RecordStatus s : kAllRecordStatuses) {
    auto back = StatusFromText(StatusToText(s));
    ASSERT_TRUE(back.ok()) << StatusToText(s);
    EXPECT_EQ(*back, s);
  }
  // The stored text is what databases have always held.
  EXPECT_STREQ(StatusToText(RecordStatus::kOk), "ok");
  EXPECT_STREQ(StatusToText(RecordStatus::kFailed), "failed");
  EXPECT_STREQ(StatusToText(RecordStatus::kTimeout), "timeout");
  EXPECT_STREQ(StatusToText(RecordStatus::kWrong), "wrong");
}

TEST(RecordText, UnknownStatusIsAnExplainedError) {
  for (const char* text : {"", "OK", "crashed"}) {
    auto s = StatusFromText(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.error().code(), ErrorCode::kParse);
    EXPECT_NE(s.error().message().find(std::string("'") + text + "'"), std::string::npos)
        << s.error().message();
  }
}

}  // namespace
}  // namespace fusetune::db
