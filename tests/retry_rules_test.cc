// The retry rules the watch loop and repair share: core::CommitRetry and
// core::Backoff.

#include <gtest/gtest.h>

#include "core/backoff.h"
#include "core/commit_retry.h"

namespace kvfold::core {
namespace {

using std::chrono::milliseconds;

TEST(CommitRetryTest, WaitsLongerPerFailureInARowAndGivesUpAtTheLimit) {
  CommitRetry retry(3);
  const Status io = Status::IOError("disk");
  EXPECT_TRUE(retry.Failed(io, "commit").ok());
  EXPECT_EQ(retry.Delay(), milliseconds(100));
  EXPECT_TRUE(retry.Failed(io, "commit").ok());
  EXPECT_EQ(retry.Delay(), milliseconds(200));
  Status last = retry.Failed(io, "commit", "; the fold keeps cursor 7");
  EXPECT_TRUE(last.IsIOError());
  EXPECT_EQ(last.message(), "commit failed 3 consecutive times; the fold keeps cursor 7: disk");
}

TEST(CommitRetryTest, OnlyFailuresInARowCount) {
  CommitRetry retry(2);
  const Status io = Status::IOError("disk");
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(retry.Failed(io, "commit").ok()) << i;
    EXPECT_EQ(retry.Succeeded(), 1);
  }
  EXPECT_EQ(retry.failures(), 0);
}

TEST(CommitRetryTest, TheWaitIsCappedAndABugIsNeverRetried) {
  CommitRetry retry(100);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(retry.Failed(Status::IOError("disk"), "c").ok());
  EXPECT_EQ(retry.Delay(), milliseconds(2000));
  CommitRetry fresh(100);
  Status bug = fresh.Failed(Status::Internal("counts do not match"), "commit");
  EXPECT_EQ(bug.code(), Status::Code::kInternal);
  EXPECT_EQ(bug.message(), "counts do not match");
}

TEST(BackoffTest, DoublesToItsMaximumHonoursACapAndResets) {
  Backoff b(milliseconds(100), milliseconds(450));
  EXPECT_EQ(b.Next(), milliseconds(100));
  EXPECT_EQ(b.Next(), milliseconds(200));
  EXPECT_EQ(b.Next(), milliseconds(400));
  EXPECT_EQ(b.Next(), milliseconds(450));
  EXPECT_EQ(b.Next(), milliseconds(450));
  EXPECT_EQ(b.Next(milliseconds(50)), milliseconds(50));
  EXPECT_EQ(b.Next(), milliseconds(100)) << "doubles from the capped wait";
  b.Reset();
  EXPECT_EQ(b.Next(), milliseconds(100));
}

}  // namespace
}  // namespace kvfold::core
