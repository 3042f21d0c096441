#include "kvfold/status.h"

#include <gtest/gtest.h>

namespace kvfold {
namespace {

TEST(StatusTest, OkAndErrorsCarryCodeAndMessage) {
  EXPECT_TRUE(Status::OK().ok());
  EXPECT_EQ(Status::OK().ToString(), "OK");
  Status s = Status::CursorExpired("cursor 5 expired");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsCursorExpired());
  EXPECT_EQ(s.ToString(), "CursorExpired: cursor 5 expired");
  EXPECT_EQ(s.WithContext("watch").message(), "watch: cursor 5 expired");
  EXPECT_TRUE(Status::OK().WithContext("x").ok());
}

TEST(StatusTest, StatusOrHoldsValueOrError) {
  StatusOr<int> v = 7;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 7);
  StatusOr<int> e = Status::NotFound("k");
  EXPECT_FALSE(e.ok());
  EXPECT_TRUE(e.status().IsNotFound());
  // An OK status is not a value: it must not pass for one.
  StatusOr<int> bad = Status::OK();
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace kvfold
