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

WindowFault Check(const StreamState& s, std::optional<uint64_t> frontier,
                  const std::string& created, std::string* why = nullptr) {
  std::string ignored;
  return CheckWindow("b", s, frontier, created, why != nullptr ? why : &ignored);
}

TEST(WindowTest, ResumableWhenNextSequenceIsRetained) {
  EXPECT_EQ(Check(Stream(1, 10), 5, "t1"), WindowFault::kNone);
  EXPECT_EQ(Check(Stream(6, 10), 5, "t1"), WindowFault::kNone);    // first == C+1
  EXPECT_EQ(Check(Stream(11, 10), 10, "t1"), WindowFault::kNone);  // empty tail
}

TEST(WindowTest, ExpiredWhenRetentionPassedTheCursor) {
  std::string why;
  ASSERT_EQ(Check(Stream(7, 10), 5, "t1", &why), WindowFault::kExpired);
  EXPECT_NE(why.find("retains sequences from 7"), std::string::npos);
  EXPECT_NE(why.find("needs everything from 6"), std::string::npos);
}

TEST(WindowTest, RecreatedWhenStreamWentBackward) {
  std::string why;
  ASSERT_EQ(Check(Stream(1, 4), 5, "t1", &why), WindowFault::kRecreated);
  EXPECT_NE(why.find("ends at sequence 4"), std::string::npos);
}

TEST(WindowTest, RecreatedWhenIdentityDiffers) {
  std::string why;
  EXPECT_EQ(Check(Stream(1, 100), 5, "t2", &why), WindowFault::kRecreated);
  EXPECT_NE(why.find("recreated"), std::string::npos);
  // Identity matters even without a cursor.
  EXPECT_EQ(Check(Stream(1, 100), std::nullopt, "t2"), WindowFault::kRecreated);
}

TEST(WindowTest, StateSyncNeedsNoWindow) {
  EXPECT_EQ(Check(Stream(50, 100), std::nullopt, ""), WindowFault::kNone);
  EXPECT_EQ(Check(Stream(50, 100), std::nullopt, "t1"), WindowFault::kNone);
}

}  // namespace
}  // namespace kvfold::core
