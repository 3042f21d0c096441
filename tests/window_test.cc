#include "core/window.h"

#include <gtest/gtest.h>

#include "core/marker_window.h"

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

// The marker window (per-message TTL, SPEC §4).
TEST(MarkerWindowTest, AppliesOnlyWhereTheBucketWritesMarkers) {
  StreamState s;
  EXPECT_FALSE(MarkerWindowNs(s));
  s.allow_msg_ttl = true;  // TTL without markers: nothing to miss in time
  EXPECT_FALSE(MarkerWindowNs(s));
  s.marker_ttl_ns = int64_t{60} * 1000000000;  // a tenth off
  EXPECT_EQ(MarkerWindowNs(s), int64_t{54} * 1000000000);
  s.marker_ttl_ns = 1000000000;  // at least 250 ms off
  EXPECT_EQ(MarkerWindowNs(s), 750000000);
  EXPECT_EQ(QuarterWindow(750000000), std::chrono::milliseconds(187));
  EXPECT_EQ(QuarterWindow(8000000), std::chrono::milliseconds(10));  // at least 10 ms
}

TEST(MarkerWindowTest, InsideOnlyWithAKnownAnchorAndClock) {
  const int64_t w = 1000;
  EXPECT_TRUE(InsideMarkerWindow(5000, 5999, w));
  EXPECT_FALSE(InsideMarkerWindow(5000, 6000, w));
  EXPECT_FALSE(InsideMarkerWindow(0, 10, w));      // anchor unknown
  EXPECT_FALSE(InsideMarkerWindow(5000, 0, w));    // server clock unknown
  EXPECT_TRUE(InsideMarkerWindow(5000, 4000, w));  // a clock step back proves it younger
}

TEST(MarkerWindowTest, ParsesJetStreamTimes) {
  EXPECT_EQ(ParseApiTimeNs("1970-01-01T00:00:01Z"), 1000000000);
  EXPECT_EQ(ParseApiTimeNs("2026-12-01T10:53:33.204078132Z"), int64_t{1796122413204078132});
  EXPECT_EQ(ParseApiTimeNs("2026-12-01T10:53:33.5Z"), int64_t{1796122413500000000});
  EXPECT_EQ(ParseApiTimeNs("0001-01-01T00:00:00Z"), 0);
  EXPECT_FALSE(ParseApiTimeNs(""));
  EXPECT_FALSE(ParseApiTimeNs("2026-12-01 10:53:33Z"));
  EXPECT_FALSE(ParseApiTimeNs("2026-12-01T10:53:33.Z"));
  EXPECT_FALSE(ParseApiTimeNs("2026-12-01T10:53:33.1234567890Z"));
  EXPECT_FALSE(ParseApiTimeNs("2026-12-01T10:53:33+01:00"));
  EXPECT_EQ(FormatTimeNs(int64_t{1796122413204078132}), "2026-12-01T10:53:33.204Z");
  EXPECT_EQ(FormatTimeNs(0), "<unknown>");
}

TEST(MarkerWindowTest, ARaisedTtlCountsOnceTheAnchorPassesIt) {
  StreamState s;
  s.marker_ttl_ns = 2000;
  s.server_time_ns = 100;
  MarkerTtl ttl;
  EXPECT_TRUE(ttl.Observe(s, 50));  // first seen: taken
  EXPECT_EQ(ttl.effective_ns(), 2000);
  s.marker_ttl_ns = 9000;  // raised, seen at 200
  s.server_time_ns = 200;
  EXPECT_FALSE(ttl.Observe(s, 150));
  EXPECT_EQ(ttl.effective_ns(), 2000);
  s.server_time_ns = 300;
  EXPECT_FALSE(ttl.Observe(s, 199));  // still anchored before the raise was seen
  EXPECT_TRUE(ttl.Observe(s, 200));
  EXPECT_EQ(ttl.effective_ns(), 9000);
  s.marker_ttl_ns = 500;  // lowered: at once
  EXPECT_TRUE(ttl.Observe(s, 0));
  EXPECT_EQ(ttl.effective_ns(), 500);
  s.marker_ttl_ns = 0;  // turned off: like a raise
  s.server_time_ns = 400;
  EXPECT_FALSE(ttl.Observe(s, 300));
  EXPECT_EQ(ttl.effective_ns(), 500);
  EXPECT_TRUE(ttl.Observe(s, 400));
  EXPECT_EQ(ttl.effective_ns(), 0);
  EXPECT_EQ(ttl.Apply(s).marker_ttl_ns, 0);
}

// Issue 32, 1: a second change while the first raise is still waited out
// restarts the wait. Markers written between the two carry the middle TTL:
// a position anchored between them is measured with the old (lower) TTL,
// never the newest. Mutant marker-ttl-keep-first-wait takes the newest.
TEST(MarkerWindowTest, ASecondChangeDuringTheWaitRestartsIt) {
  StreamState s;
  s.marker_ttl_ns = 1000;
  s.server_time_ns = 100;
  MarkerTtl ttl;
  EXPECT_TRUE(ttl.Observe(s, 50));
  s.marker_ttl_ns = 10000;  // raised, seen at 200
  s.server_time_ns = 200;
  EXPECT_FALSE(ttl.Observe(s, 150));
  s.marker_ttl_ns = 20000;  // raised again, seen at 300
  s.server_time_ns = 300;
  EXPECT_FALSE(ttl.Observe(s, 250)) << "anchored before the second change was seen";
  EXPECT_EQ(ttl.effective_ns(), 1000);
  s.server_time_ns = 400;
  EXPECT_TRUE(ttl.Observe(s, 300));
  EXPECT_EQ(ttl.effective_ns(), 20000);
}

}  // namespace
}  // namespace kvfold::core
