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
