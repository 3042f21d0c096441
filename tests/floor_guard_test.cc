// The floor guard's positions and anchors (the watch loop that drives it
// is tested through the simulation and the live tests).

#include "watch/floor_guard.h"

#include <gtest/gtest.h>

namespace kvfold {
namespace {

TEST(FloorGuardTest, ConsecutiveMessagesStayProvenAndAJumpWaitsForACheck) {
  FloorGuard g;
  g.ResetTo(10, 100, false);
  g.Receive(11, 110);
  EXPECT_EQ(g.verified(), 11u);
  EXPECT_EQ(g.Cursor(), 11u);
  EXPECT_EQ(g.CursorAnchor(), 110);
  EXPECT_TRUE(g.Jumps(15));
  g.Receive(15, 150);
  EXPECT_TRUE(g.unverified());
  EXPECT_EQ(g.Cursor(), 11u) << "the cursor stops before an unproven stretch";
  EXPECT_EQ(g.CursorAnchor(), 110);
  g.Receive(16, 160);  // consecutive, but after an unproven stretch
  EXPECT_EQ(g.verified(), 11u);
  g.VerifyReceived();
  EXPECT_EQ(g.Cursor(), 16u);
  EXPECT_EQ(g.CursorAnchor(), 160);
  EXPECT_TRUE(g.AlreadyReceived(16));
  EXPECT_FALSE(g.AlreadyReceived(17));
}

TEST(FloorGuardTest, ALostAnchorHoldsUntilResetTo) {
  FloorGuard g;
  g.ResetTo(10, 100, false);
  EXPECT_TRUE(g.ReceivedInsideWindow(150, 100));
  EXPECT_FALSE(g.ReceivedInsideWindow(300, 100));
  EXPECT_TRUE(g.LoseAnchor());
  EXPECT_FALSE(g.LoseAnchor()) << "only the first loss counts";
  EXPECT_FALSE(g.ReceivedInsideWindow(150, 100));
  g.ResetTo(20, 200, false);
  EXPECT_FALSE(g.anchor_lost());
  EXPECT_TRUE(g.ReceivedInsideWindow(250, 100));
}

TEST(FloorGuardTest, TheRelistFloorHoldsOnlyWhereCurrentValuesStayAndDropsOnANewStream) {
  FloorGuard g;
  g.ResetTo(10, 0, false);
  g.RaiseRelistFloor(50);
  StreamState keeps;
  keeps.discard_new = true;
  keeps.max_msgs = 100;
  StreamState evicts;
  evicts.max_msgs = 100;  // discard old
  EXPECT_EQ(g.Frontier(keeps), 50u);
  EXPECT_EQ(g.Frontier(evicts), 10u);
  g.ResetTo(0, 0, /*new_stream=*/true);
  EXPECT_EQ(g.Frontier(keeps), 0u);
}

TEST(FloorGuardTest, AStateSyncSupersedesWhatRetentionRemovedBefore) {
  FloorGuard g;
  g.ResetTo(std::nullopt, 0, false);
  EXPECT_FALSE(g.Cursor());
  g.StartStateSync(40, 400, /*forget_received=*/false);
  EXPECT_EQ(g.verified(), 39u);
  g.Receive(45, 450);  // a sync jumps over older messages
  g.VerifyReceived();
  EXPECT_EQ(g.Cursor(), 45u);
  g.StartStateSync(60, 600, /*forget_received=*/true);
  EXPECT_FALSE(g.received());
}

TEST(FloorGuardTest, TheWriteRateRisesAtOnceAndFallsByHalves) {
  FloorGuard g;
  EXPECT_LT(g.write_rate(), 0);
  const Clock::TimePoint t0{};
  g.SampleWrites(t0, 0);
  g.SampleWrites(t0 + std::chrono::seconds(1), 1000);
  EXPECT_DOUBLE_EQ(g.write_rate(), 1000);
  g.SampleWrites(t0 + std::chrono::seconds(2), 1000);  // idle
  EXPECT_DOUBLE_EQ(g.write_rate(), 500);
  g.SampleWrites(t0 + std::chrono::seconds(3), 5000);
  EXPECT_DOUBLE_EQ(g.write_rate(), 4000);
}

}  // namespace
}  // namespace kvfold
