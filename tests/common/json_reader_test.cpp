#include "common/json_reader.h"

#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

namespace fusetune {
namespace {

// The document the reader walks, rebuilt as nlohmann::json (null on error);
// `views`: keys and strings read as views (copied before the next read).
nlohmann::json Rebuild(JsonReader& r, bool views = false) {
  switch (r.Peek()) {
    case JsonReader::Kind::kObject: {
      nlohmann::json out = nlohmann::json::object();
      r.BeginObject();
      std::string key;
      std::string_view view;
      while (views ? r.NextKey(&view) : r.NextKey(&key)) {
        if (views) key = view;
        out[key] = Rebuild(r, views);
      }
      return out;
    }
    case JsonReader::Kind::kArray: {
      nlohmann::json out = nlohmann::json::array();
      r.BeginArray();
      while (r.NextElement()) out.push_back(Rebuild(r, views));
      return out;
    }
    case JsonReader::Kind::kString: {
      std::string s;
      std::string_view view;
      if (views && r.ReadString(&view)) s = view;
      if (!views) r.ReadString(&s);
      return s;
    }
    case JsonReader::Kind::kNumber: {
      int64_t i = 0;
      double d = 0;
      bool integer = false;
      r.ReadNumber(&i, &d, &integer);
      return integer ? nlohmann::json(i) : nlohmann::json(d);
    }
    case JsonReader::Kind::kBool: {
      bool b = false;
      r.ReadBool(&b);
      return b;
    }
    case JsonReader::Kind::kNull:
      r.ReadNull();
      return nullptr;
    case JsonReader::Kind::kInvalid:
      r.Skip();  // records the error
      return nullptr;
  }
  return nullptr;
}

TEST(JsonReader, ReadsWhatNlohmannReads) {
  const std::vector<std::string> texts = {
      R"({"a": 1, "b": [true, false, null], "c": {"d": "e"}, "f": -12.5e-1, "g": []})",
      R"( [ 0, -0, 9223372036854775807, -9223372036854775808, 1e3, 0.25, {} ] )",
      R"({"esc": "q\"b\\s\/n\nt\tu\u00e9\ud83d\ude00", "empty": ""})",
      R"("just a string")",
      R"({"format":"fusetune-plan","groups":[{"nodes":[0,1],"tiling":{"tile":4096}}]})",
  };
  for (bool views : {false, true})
    for (const std::string& text : texts) {
      JsonReader r(text);
      const nlohmann::json rebuilt = Rebuild(r, views);
      ASSERT_TRUE(r.ok()) << text << ": " << r.error();
      EXPECT_TRUE(r.AtEnd()) << text;
      EXPECT_EQ(rebuilt, nlohmann::json::parse(text)) << text << (views ? " (views)" : "");
    }
}

TEST(JsonReader, SkipPassesOverAnyValue) {
  JsonReader r(R"({"skip": {"x": [1, [2, {"y": "z"}]], "w": null}, "keep": 7})");
  ASSERT_TRUE(r.BeginObject());
  std::string key;
  int64_t keep = 0;
  while (r.NextKey(&key)) {
    if (key == "keep")
      ASSERT_TRUE(r.ReadInt(&keep));
    else
      ASSERT_TRUE(r.Skip());
  }
  EXPECT_TRUE(r.ok() && r.AtEnd()) << r.error();
  EXPECT_EQ(keep, 7);
}

TEST(JsonReader, MalformedTextGivesAnErrorWithItsOffset) {
  const std::vector<std::string> bad = {
      "",          "{",       R"({"a"})",    R"({"a":1,})", "[1,]",        "[1 2]",
      R"("abc)",   R"("\x")", R"("\ud800")", R"("\udc00")", "1.",          "-",
      "tru",       "nul",     R"({"a":1}})", "01",          "[1e]",        "\"a\tb\"",
      R"({1: 2})", "[1e999]", "+1",          ".5",          R"(["\u12"])", "{\"a\":1 \"b\":2}",
      "[nulls]",
  };
  for (bool views : {false, true})
    for (const std::string& text : bad) {
      JsonReader r(text);
      Rebuild(r, views);
      const bool whole = r.ok() && r.AtEnd();
      EXPECT_FALSE(whole) << "accepted: " << text;
      if (!r.ok()) {
        EXPECT_NE(r.error().find("at byte"), std::string::npos) << r.error();
      }
      EXPECT_TRUE(nlohmann::json::accept(text) == whole) << text;
    }
}

// Random edits of a valid document (ASCII only: the reader does not check
// UTF-8): the reader accepts exactly what nlohmann accepts, and reads the
// same document from it.
TEST(JsonReader, AgreesWithNlohmannOnMutatedText) {
  const std::string seed_text =
      R"({"format": "fusetune-plan", "version": 1, "nodes": 12, "groups": [{"nodes": [0, 1, 2],)"
      R"( "template": "gemm", "tiling": {"mc": 96, "double_buffer": true, "order": "mn"}},)"
      R"( {"nodes": [3], "tiling": {"tile": 4096}, "x": [null, -1.5e3, "a\"b\u0041"]}]})";
  const std::string alphabet = "{}[]:,\"\\ 0123456789-+.eEtrufalsn\t\nabu";
  std::mt19937 rng(5);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = seed_text;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % text.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          text[at] = c;
          break;
        case 1:
          text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        default:
          text.erase(at, 1);
      }
    }
    JsonReader r(text);
    const nlohmann::json rebuilt = Rebuild(r, trial % 2 == 1);  // odd trials read views
    const bool whole = r.ok() && r.AtEnd();
    const nlohmann::json expected = nlohmann::json::parse(text, nullptr, false);
    ASSERT_EQ(whole, !expected.is_discarded()) << text << "\n" << r.error();
    if (whole) {
      ++accepted;
      EXPECT_EQ(rebuilt, expected) << text;
    }
  }
  EXPECT_GT(accepted, 100);  // the edits leave valid documents too
}

TEST(JsonReader, NestingIsBounded) {
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  JsonReader r(deep);
  EXPECT_FALSE(r.Skip());
  EXPECT_NE(r.error().find("256 levels"), std::string::npos) << r.error();
}

TEST(JsonReader, IntegersOutOfRangeAreNotIntegers) {
  JsonReader r("[9223372036854775808, 3.5]");
  ASSERT_TRUE(r.BeginArray() && r.NextElement());
  int64_t i = 0;
  double d = 0;
  bool integer = true;
  ASSERT_TRUE(r.ReadNumber(&i, &d, &integer));
  EXPECT_FALSE(integer);
  EXPECT_DOUBLE_EQ(d, 9223372036854775808.0);
  ASSERT_TRUE(r.NextElement());
  EXPECT_FALSE(r.ReadInt(&i));
  EXPECT_NE(r.error().find("integer"), std::string::npos);
  EXPECT_FALSE(r.NextElement());  // errors stick
}

}  // namespace
}  // namespace fusetune
