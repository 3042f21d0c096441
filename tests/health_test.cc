// Liveness and readiness as judged from a watch's metrics.

#include "kvfold/health.h"

#include <gtest/gtest.h>

namespace kvfold {
namespace {

TEST(HealthTest, ReadyOnlyOnceCaughtUpWithAHeadReadAndWithinTheLag) {
  WatchMetrics m;
  m.RecordCursor(5);  // a restart: the fold's cursor, no head read yet
  EXPECT_TRUE(JudgeAlive(m.Snapshot(), {}).ok);
  EXPECT_FALSE(m.Snapshot().caught_up);
  EXPECT_FALSE(JudgeReady(m.Snapshot(), {}).ok);
  m.RecordStreamLast(10);
  const HealthVerdict behind = JudgeReady(m.Snapshot(), {});
  EXPECT_FALSE(behind.ok);
  EXPECT_EQ(behind.reason, "not caught up yet: 5 messages behind the stream's head");
  m.RecordCursor(10);
  EXPECT_TRUE(JudgeReady(m.Snapshot(), {}).ok) << JudgeReady(m.Snapshot(), {}).reason;
  // Behind again, for longer than the lag allows.
  m.RecordStreamLast(20);
  HealthOptions strict;
  strict.max_lag = std::chrono::milliseconds(0);
  WatchStats later = m.Snapshot();
  later.lag_seconds = 0.5;
  EXPECT_FALSE(JudgeReady(later, strict).ok);
  EXPECT_TRUE(JudgeReady(later, {}).ok) << "0.5 s is within the default 10 s";
}

// On a busy bucket the head moves on while the cursor catches up: reaching
// the head first read is enough; a delivery's hint (which can overstate
// the head) never sets it, and a repair or a cursor that went back starts
// the catching up over.
TEST(HealthTest, CaughtUpAimsAtTheFirstHeadReadAndStartsOverAfterARepair) {
  WatchMetrics m;
  m.RecordStreamLast(50, /*read=*/false);  // a hint: not a target
  m.RecordStreamLast(10);
  m.RecordStreamLast(12);
  m.RecordCursor(10);
  EXPECT_TRUE(m.Snapshot().caught_up) << "lag 2, but the first head read is reached";
  m.RecordRepaired();
  EXPECT_FALSE(m.Snapshot().caught_up);
  m.RecordStreamLast(20);
  m.RecordCursor(19);
  EXPECT_FALSE(m.Snapshot().caught_up);
  m.RecordCursor(20);
  EXPECT_TRUE(m.Snapshot().caught_up);
  m.RecordCursor(3);  // a recreated stream
  EXPECT_FALSE(m.Snapshot().caught_up);
  m.RecordStreamLast(3);
  EXPECT_TRUE(m.Snapshot().caught_up);
}

TEST(HealthTest, SilenceIsDeathExceptInARepair) {
  WatchStats s;
  s.caught_up = true;
  s.cursor = 3;
  s.last_activity_age_seconds = 61;
  const HealthVerdict dead = JudgeAlive(s, {});
  EXPECT_FALSE(dead.ok);
  EXPECT_NE(dead.reason.find("61.0 s"), std::string::npos) << dead.reason;
  EXPECT_FALSE(JudgeReady(s, {}).ok);
  s.repairing = true;
  EXPECT_TRUE(JudgeAlive(s, {}).ok);
  EXPECT_FALSE(JudgeReady(s, {}).ok);
  EXPECT_EQ(JudgeReady(s, {}).reason, "a repair is rewriting the fold");
}

}  // namespace
}  // namespace kvfold
