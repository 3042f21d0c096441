#include "watch/async_committer.h"

#include <gtest/gtest.h>

#include <memory>

namespace kvfold {
namespace {

FoldCommit Batch(const std::string& key, uint64_t revision) {
  FoldCommit c;
  c.entries[key] = Entry{revision, false, "v"};
  c.cursor = revision;
  return c;
}

// Start hands back the batch before the one it starts (written, so its
// nodes may be used again), never the one in flight; a batch given back by
// Take is not handed back twice.
TEST(AsyncCommitterTest, StartHandsBackTheBatchBeforeNotTheOneInFlight) {
  for (const bool background : {false, true}) {
    std::unique_ptr<Fold> fold = NewMemoryFold();
    AsyncCommitter committer(*fold, background);
    EXPECT_TRUE(committer.Start(Batch("a", 1)).entries.empty()) << background;
    ASSERT_TRUE(committer.Wait().ok());
    FoldCommit before = committer.Start(Batch("b", 2));
    EXPECT_EQ(before.entries.count("a"), 1u) << background;
    EXPECT_EQ(committer.batch().entries.count("b"), 1u) << background;
    ASSERT_TRUE(committer.Wait().ok());
    FoldCommit taken = committer.Take();
    EXPECT_EQ(taken.entries.count("b"), 1u) << background;
    EXPECT_TRUE(committer.Start(Batch("c", 3)).entries.empty()) << background;
    ASSERT_TRUE(committer.Wait().ok());
    auto meta = fold->ReadMeta();
    ASSERT_TRUE(meta.ok());
    EXPECT_EQ(meta->cursor, 3u) << background;
  }
}

}  // namespace
}  // namespace kvfold
