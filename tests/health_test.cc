// Liveness and readiness as judged from a watch's metrics.

#include "kvfold/health.h"

#include <gtest/gtest.h>

#include <thread>

namespace kvfold {
namespace {

// Mirror::WaitForRevision proves a revision absent only by the second read
// answered after it began: a heartbeat answers no request and is not one.
TEST(HealthTest, OnlyAnsweredStreamReadsAreCounted) {
  WatchMetrics m;
  m.RecordStreamLast(10);
  m.RecordStreamLast(12, /*read=*/false);  // a delivery's hint
  m.RecordStreamHeartbeat(10);
  EXPECT_EQ(m.Snapshot().stream_reads, 1u);
  EXPECT_EQ(m.Snapshot().read_stream_last_seq, 10u);
  EXPECT_LT(m.Snapshot().last_read_age_seconds, 60.0);
  m.RecordStreamLast(11);
  EXPECT_EQ(m.Snapshot().stream_reads, 2u);
}

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

// Issue 32, 9: a restart on a fold whose cursor is above the head it first
// reads (the bucket was recreated, or this server's view lags) is not
// caught up: the watch has yet to judge which, and a rebuild may follow.
// Ready in between would tell systemd READY=1 before the rebuild, which it
// cannot take back (cli/service_notifier.cc). Mutant
// ready-target-below-cursor.
TEST(HealthTest, AHeadBelowTheCursorIsNoCatchUpTarget) {
  WatchMetrics m;
  m.RecordCursor(3000);   // the fold of the old stream
  m.RecordStreamLast(5);  // the recreated stream's head, read before the window check
  EXPECT_FALSE(m.Snapshot().caught_up);
  EXPECT_FALSE(JudgeReady(m.Snapshot(), {}).ok);
  m.RecordRepairRunning(true);  // the rebuild
  m.RecordCursor(5);
  m.RecordRepairRunning(false);
  m.RecordRepaired();
  EXPECT_FALSE(m.Snapshot().caught_up);
  m.RecordStreamLast(5);
  EXPECT_TRUE(m.Snapshot().caught_up);
  EXPECT_TRUE(JudgeReady(m.Snapshot(), {}).ok) << JudgeReady(m.Snapshot(), {}).reason;

  // A lagging view: caught up once a read reaches the cursor.
  WatchMetrics lagging;
  lagging.RecordCursor(100);
  lagging.RecordStreamLast(90);
  EXPECT_FALSE(lagging.Snapshot().caught_up);
  lagging.RecordStreamLast(100);
  EXPECT_TRUE(lagging.Snapshot().caught_up);
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

// Issue 31, defect 3: a mirror cut off from the server after it caught up
// keeps its cursor at the last head it read, so neither caught_up nor the
// lag moves; retry waits keep it alive. Only a fresh stream read proves the
// fold still follows the stream: none within max_lag, not ready.
TEST(HealthTest, NotReadyOnceNoStreamReadSucceededForTheLagBound) {
  WatchMetrics m;
  m.RecordStreamLast(10);
  m.RecordCursor(10);
  HealthOptions o;
  o.max_lag = std::chrono::milliseconds(200);
  ASSERT_TRUE(JudgeReady(m.Snapshot(), o).ok) << JudgeReady(m.Snapshot(), o).reason;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // The loop turns (retries, a commit of what was received), but reads nothing.
  m.RecordRetryWait();
  m.RecordCommit(true, std::chrono::milliseconds(1));
  m.RecordStreamLast(10, /*read=*/false);
  const WatchStats cut_off = m.Snapshot();
  EXPECT_TRUE(JudgeAlive(cut_off, o).ok);
  EXPECT_TRUE(cut_off.caught_up);
  const HealthVerdict verdict = JudgeReady(cut_off, o);
  EXPECT_FALSE(verdict.ok) << verdict.reason;
  EXPECT_EQ(verdict.reason.rfind("no stream read has succeeded for ", 0), 0u) << verdict.reason;
  m.RecordStreamLast(10);  // the server answers again
  EXPECT_TRUE(JudgeReady(m.Snapshot(), o).ok) << JudgeReady(m.Snapshot(), o).reason;
}

// The rule on its own: the read age bounds readiness like the lag does.
TEST(HealthTest, ReadyRuleBoundsTheAgeOfTheLastStreamRead) {
  WatchStats s;
  s.caught_up = true;
  s.cursor = 7;
  s.last_read_age_seconds = 9.9;
  EXPECT_TRUE(JudgeReady(s, {}).ok) << JudgeReady(s, {}).reason;
  s.last_read_age_seconds = 10.1;
  const HealthVerdict stale = JudgeReady(s, {});
  EXPECT_FALSE(stale.ok);
  EXPECT_EQ(stale.reason,
            "no stream read has succeeded for 10.1 s (limit 10.0 s): the server is unreachable "
            "or does not answer");
  EXPECT_TRUE(JudgeAlive(s, {}).ok) << "cut off is not dead: a restart would not reach it either";
}

// Issue 31, defect 9(a): the end of a repair must not pass through
// "caught up, not repairing" before the fold caught up again: a probe there
// would read ready (and systemd's READY=1 cannot be taken back).
TEST(HealthTest, ARepairEndsNotReadyUntilCaughtUpAgain) {
  WatchMetrics m;
  m.RecordStreamLast(10);
  m.RecordCursor(10);
  ASSERT_TRUE(JudgeReady(m.Snapshot(), {}).ok);
  m.RecordRepairRunning(true);
  EXPECT_FALSE(JudgeReady(m.Snapshot(), {}).ok);
  EXPECT_FALSE(m.Snapshot().caught_up)
      << "a repair that rewrites the fold starts the catch-up over";
  m.RecordStreamLast(10);  // the repair's own read of the stream: no target
  EXPECT_FALSE(m.Snapshot().caught_up);
  // The watch's order when a repair finishes: running false, then repaired.
  m.RecordRepairRunning(false);
  const WatchStats between = m.Snapshot();
  EXPECT_FALSE(between.caught_up);
  EXPECT_FALSE(JudgeReady(between, {}).ok) << JudgeReady(between, {}).reason;
  m.RecordRepaired();
  EXPECT_FALSE(JudgeReady(m.Snapshot(), {}).ok);
  m.RecordStreamLast(12);
  m.RecordCursor(12);
  EXPECT_TRUE(JudgeReady(m.Snapshot(), {}).ok) << JudgeReady(m.Snapshot(), {}).reason;
}

// A repair overtaken before it finished (the next session finds none due)
// ends without RecordRepaired: the head read before it is no target, and
// only a head read after it is.
TEST(HealthTest, AHeadReadBeforeARepairIsNoTargetAfterIt) {
  WatchMetrics m;
  m.RecordCursor(10);
  m.RecordStreamLast(20);  // the target, before the repair
  m.RecordRepairRunning(true);
  m.RecordRepairRunning(false);  // overtaken
  m.RecordCursor(20);
  EXPECT_FALSE(m.Snapshot().caught_up) << "caught up with a head read before the repair";
  m.RecordStreamLast(25);
  m.RecordCursor(25);
  EXPECT_TRUE(m.Snapshot().caught_up);
}

}  // namespace
}  // namespace kvfold
