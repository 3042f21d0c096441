#include "kvfold/scope.h"

#include <gtest/gtest.h>

namespace kvfold {
namespace {

TEST(KeyRulesTest, AcceptsAdr6Keys) {
  for (const char* k : {"a", "a.b", "A-Z_0=9/x", "config.routes.eu-1"}) {
    EXPECT_TRUE(ValidateKey(k).ok()) << k;
  }
}

TEST(KeyRulesTest, RefusesBadKeysNamingTheFault) {
  EXPECT_FALSE(ValidateKey("").ok());
  EXPECT_NE(ValidateKey(".a").message().find("starts with '.'"), std::string::npos);
  EXPECT_NE(ValidateKey("a.").message().find("ends with '.'"), std::string::npos);
  EXPECT_NE(ValidateKey("a..b").message().find(".."), std::string::npos);
  EXPECT_NE(ValidateKey("a b").message().find("' '"), std::string::npos);
  EXPECT_FALSE(ValidateKey("a*").ok());
  EXPECT_FALSE(ValidateKey("a>").ok());
}

TEST(KeyRulesTest, PrefixMayEndWithDot) {
  EXPECT_TRUE(ValidatePrefix("").ok());
  EXPECT_TRUE(ValidatePrefix("a.").ok());
  EXPECT_TRUE(ValidatePrefix("use").ok());
  EXPECT_FALSE(ValidatePrefix(".a").ok());
  EXPECT_FALSE(ValidatePrefix("a..").ok());
  EXPECT_FALSE(ValidatePrefix("a*").ok());
}

TEST(ScopeTest, DefaultIsWholeBucket) {
  Scope s;
  EXPECT_TRUE(s.IsWholeBucket());
  EXPECT_TRUE(s.Contains("anything"));
  EXPECT_EQ(s.ToString(), "[<whole bucket>]");
}

TEST(ScopeTest, MakesPrefixesDisjointAndSorted) {
  auto s = Scope::Make({"b.", "a.x", "a.", "b.", "c"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->prefixes(), (std::vector<std::string>{"a.", "b.", "c"}));
  auto whole = Scope::Make({"a.", ""});
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(whole->IsWholeBucket());
}

TEST(ScopeTest, ContainsIsBytePrefix) {
  auto s = *Scope::Make({"user", "cfg."});
  EXPECT_TRUE(s.Contains("user"));
  EXPECT_TRUE(s.Contains("users.x"));
  EXPECT_TRUE(s.Contains("cfg.a"));
  EXPECT_FALSE(s.Contains("cfg"));
  EXPECT_FALSE(s.Contains("use"));
  EXPECT_FALSE(s.Contains("x.user"));
}

TEST(ScopeTest, RefusesBadPrefix) {
  auto s = Scope::Make({"ok.", "bad prefix"});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.status().IsInvalidArgument());
  EXPECT_NE(s.status().message().find("bad prefix"), std::string::npos);
}

TEST(ScopeTest, CoveredBy) {
  auto narrow = *Scope::Make({"a.b.", "c."});
  auto wide = *Scope::Make({"a.", "c."});
  EXPECT_TRUE(narrow.CoveredBy(wide));
  EXPECT_FALSE(wide.CoveredBy(narrow));
  EXPECT_TRUE(narrow.CoveredBy(Scope()));
  EXPECT_FALSE(Scope().CoveredBy(wide));
}

}  // namespace
}  // namespace kvfold
