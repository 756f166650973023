#include "common/enum_names.h"

#include <gtest/gtest.h>

namespace fusetune {
namespace {

enum class Colour { kRed, kGreen, kBlue };
constexpr EnumNames<Colour, 3> kColourNames{{{
    {Colour::kRed, "red"},
    {Colour::kGreen, "green"},
    {Colour::kBlue, "blue"},
}}};

TEST(EnumNames, EveryValueRoundTripsThroughItsName) {
  for (Colour c : kColourNames.Values()) EXPECT_EQ(kColourNames.FromName(kColourNames.Name(c)), c);
  static_assert(kColourNames.Values()[2] == Colour::kBlue, "the table's order");
}

TEST(EnumNames, AnUnknownNameIsNoValueAndAnUnknownValueTheFallback) {
  EXPECT_FALSE(kColourNames.FromName("Red").has_value());  // names are exact
  EXPECT_FALSE(kColourNames.FromName("").has_value());
  EXPECT_STREQ(kColourNames.Name(static_cast<Colour>(7)), "?");
  EXPECT_STREQ(kColourNames.Name(static_cast<Colour>(7), "red"), "red");
}

}  // namespace
}  // namespace fusetune
