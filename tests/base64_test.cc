#include "core/base64.h"

#include <gtest/gtest.h>

namespace kvfold::core {
namespace {

TEST(Base64Test, KnownVectorsBothAlphabets) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("\xfb\xff"), "+/8=");
  EXPECT_EQ(Base64UrlEncode("\xfb\xff"), "-_8=");
  EXPECT_EQ(Base64UrlEncode("LATEST"), "TEFURVNU");
}

TEST(Base64Test, DecodesEitherAlphabetAndRefusesJunk) {
  EXPECT_EQ(*Base64Decode("Zm9vYg=="), "foob");
  EXPECT_EQ(*Base64Decode("-_8="), "\xfb\xff");
  EXPECT_EQ(*Base64Decode("+/8="), "\xfb\xff");
  EXPECT_FALSE(Base64Decode("Zm9v!"));
  EXPECT_FALSE(Base64Decode("Z"));
}

}  // namespace
}  // namespace kvfold::core
