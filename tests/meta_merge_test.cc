// The metadata merge rule both fold backends apply (fold_test.cc runs the
// backends themselves through the same cases end to end).

#include "core/meta_merge.h"

#include <gtest/gtest.h>

namespace kvfold {
namespace {

FoldMeta Stored() {
  FoldMeta m;
  m.cursor = 10;
  m.cursor_time_ns = 1000;
  m.marker_ttl_ns = 5;
  m.bucket = "b";
  m.scope = std::vector<std::string>{"a."};
  m.stream_created = "t0";
  m.seeding = "";
  m.last_repair = "r";
  m.live_keys = 3;
  m.entries = 4;
  m.max_revision = 9;
  return m;
}

TEST(MetaMergeTest, UnsetFieldsKeepTheirValuesAndCountsAreNotTouched) {
  FoldMeta m = Stored();
  ASSERT_TRUE(core::MergeCommitMeta(FoldCommit(), &m).ok());
  EXPECT_EQ(m, Stored());
}

TEST(MetaMergeTest, SetFieldsReplaceTheirValues) {
  FoldMeta m = Stored();
  FoldCommit c;
  c.cursor = 12;
  c.cursor_time_ns = 2000;
  c.marker_ttl_ns = 7;
  c.bucket = "b2";
  c.scope = std::vector<std::string>{"b."};
  c.stream_created = "t1";
  c.seeding = "id";
  c.last_repair = "r2";
  ASSERT_TRUE(core::MergeCommitMeta(c, &m).ok());
  EXPECT_EQ(m.cursor, 12u);
  EXPECT_EQ(m.cursor_time_ns, 2000);
  EXPECT_EQ(m.marker_ttl_ns, 7);
  EXPECT_EQ(m.bucket, "b2");
  EXPECT_EQ(m.scope, std::vector<std::string>{"b."});
  EXPECT_EQ(m.stream_created, "t1");
  EXPECT_EQ(m.seeding, "id");
  EXPECT_EQ(m.last_repair, "r2");
  EXPECT_EQ(m.live_keys, 3u);
  EXPECT_EQ(m.max_revision, 9u);
}

TEST(MetaMergeTest, ACursorThatMovesWithoutAnAnchorLeavesTheAnchorUnknown) {
  FoldMeta m = Stored();
  FoldCommit same;
  same.cursor = 10;
  ASSERT_TRUE(core::MergeCommitMeta(same, &m).ok());
  EXPECT_EQ(m.cursor_time_ns, 1000);  // the same cursor keeps its anchor
  FoldCommit moved;
  moved.cursor = 11;
  ASSERT_TRUE(core::MergeCommitMeta(moved, &m).ok());
  EXPECT_EQ(m.cursor_time_ns, 0);
}

TEST(MetaMergeTest, ABackwardCursorIsRefusedUnlessRebasedOntoANewStream) {
  FoldMeta m = Stored();
  FoldCommit back;
  back.cursor = 3;
  back.bucket = "changed";
  Status s = core::MergeCommitMeta(back, &m);
  EXPECT_TRUE(s.IsFailedPrecondition()) << s.ToString();
  EXPECT_EQ(m, Stored()) << "a refused merge changes nothing";
  back.rebase = true;  // without a new stream_created a rebase is no rebase
  EXPECT_TRUE(core::MergeCommitMeta(back, &m).IsFailedPrecondition());
  back.stream_created = "t1";
  ASSERT_TRUE(core::MergeCommitMeta(back, &m).ok());
  EXPECT_EQ(m.cursor, 3u);
}

TEST(MetaMergeTest, TheEvictionMemoIsPermanentExceptOnARebase) {
  FoldMeta m = Stored();
  FoldCommit set;
  set.eviction_observed = true;
  ASSERT_TRUE(core::MergeCommitMeta(set, &m).ok());
  EXPECT_TRUE(m.eviction_observed);
  FoldCommit clear;
  clear.eviction_observed = false;
  ASSERT_TRUE(core::MergeCommitMeta(clear, &m).ok());
  EXPECT_TRUE(m.eviction_observed);
  clear.rebase = true;
  clear.stream_created = "t1";
  clear.cursor = 0;
  ASSERT_TRUE(core::MergeCommitMeta(clear, &m).ok());
  EXPECT_FALSE(m.eviction_observed);
  EXPECT_EQ(m.eviction_cause, "");
}

TEST(MetaMergeTest, TheEvictionMemoKeepsItsFirstCause) {
  FoldMeta m = Stored();
  FoldCommit set;
  set.eviction_observed = true;
  set.eviction_cause = "unmarked age";
  ASSERT_TRUE(core::MergeCommitMeta(set, &m).ok());
  EXPECT_EQ(m.eviction_cause, "unmarked age");
  set.eviction_cause = "volume";
  ASSERT_TRUE(core::MergeCommitMeta(set, &m).ok());
  EXPECT_EQ(m.eviction_cause, "unmarked age");
  FoldMeta unknown = Stored();
  FoldCommit bare;  // a cause-less memo (an older exporter's artifact)
  bare.eviction_observed = true;
  ASSERT_TRUE(core::MergeCommitMeta(bare, &unknown).ok());
  EXPECT_EQ(unknown.eviction_cause, kEvictionCauseUnknown);
}

}  // namespace
}  // namespace kvfold
