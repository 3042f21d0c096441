#include "core/window.h"

#include <gtest/gtest.h>

namespace kvfold::core {
namespace {

StreamState Stream(uint64_t first, uint64_t last, std::string created = "t1") {
  StreamState s;
  s.first_seq = first;
  s.last_seq = last;
  s.created = std::move(created);
  return s;
}

TEST(WindowTest, ResumableWhenNextSequenceIsRetained) {
  EXPECT_TRUE(CheckWindow("b", Stream(1, 10), 5, "t1").ok());
  EXPECT_TRUE(CheckWindow("b", Stream(6, 10), 5, "t1").ok());   // first == C+1
  EXPECT_TRUE(CheckWindow("b", Stream(11, 10), 10, "t1").ok()); // empty tail
}

TEST(WindowTest, ExpiredWhenRetentionPassedTheCursor) {
  Status s = CheckWindow("b", Stream(7, 10), 5, "t1");
  ASSERT_TRUE(s.IsCursorExpired());
  EXPECT_NE(s.message().find("retains sequences from 7"), std::string::npos);
  EXPECT_NE(s.message().find("needs everything from 6"), std::string::npos);
}

TEST(WindowTest, ExpiredWhenStreamWentBackward) {
  Status s = CheckWindow("b", Stream(1, 4), 5, "t1");
  ASSERT_TRUE(s.IsCursorExpired());
  EXPECT_NE(s.message().find("ends at sequence 4"), std::string::npos);
}

TEST(WindowTest, ExpiredWhenStreamWasRecreated) {
  Status s = CheckWindow("b", Stream(1, 100), 5, "t2");
  EXPECT_TRUE(s.IsCursorExpired());
  EXPECT_NE(s.message().find("recreated"), std::string::npos);
  // Identity matters even without a cursor.
  EXPECT_TRUE(CheckWindow("b", Stream(1, 100), std::nullopt, "t2").IsCursorExpired());
}

TEST(WindowTest, StateSyncNeedsNoWindow) {
  EXPECT_TRUE(CheckWindow("b", Stream(50, 100), std::nullopt, "").ok());
  EXPECT_TRUE(CheckWindow("b", Stream(50, 100), std::nullopt, "t1").ok());
}

}  // namespace
}  // namespace kvfold::core
