#include "watch/commit_pipeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace kvfold {
namespace {

Status Proven() { return Status::OK(); }

// Puts `key` at the next revision after the pending cursor.
void PutNext(CommitPipeline& pipeline, const std::string& key) {
  const uint64_t seq = pipeline.pending().cursor().value_or(0) + 1;
  pipeline.pending().Put(key, Entry{seq, false, "v"});
  pipeline.pending().AdvanceTo(seq);
}

CommitPipelineOptions Options(bool background) {
  CommitPipelineOptions o;
  o.background = background;
  o.batch_size = 100;
  o.batch_bytes = 1 << 20;
  o.sync_run_bytes = 1 << 20;
  return o;
}

// The nodes of a written batch are kept for the next one only while
// something is pending: a commit that leaves nothing pending (the watch
// idles) frees them.
TEST(CommitPipelineTest, ACommitWithNothingPendingDropsTheSpareNodes) {
  std::unique_ptr<Fold> fold = NewMemoryFold();
  CommitPipeline pipeline(*fold, *RealClock(), Options(/*background=*/false));
  pipeline.ResetTo(std::nullopt, 0);
  PutNext(pipeline, "a");
  PutNext(pipeline, "b");
  ASSERT_TRUE(pipeline.TryCommit(/*force=*/true, Proven).ok());
  PutNext(pipeline, "c");
  // Its hand-off takes the nodes of {a, b} back; its commit finds nothing
  // pending and frees them.
  ASSERT_TRUE(pipeline.TryCommit(/*force=*/true, Proven).ok());
  EXPECT_EQ(pipeline.committed(), 3u);
  EXPECT_EQ(pipeline.pending().spare_nodes(), 0u);
}

TEST(CommitPipelineTest, TheSpareNodesStayWhileSomethingIsPending) {
  std::unique_ptr<Fold> fold = NewMemoryFold();
  CommitPipeline pipeline(*fold, *RealClock(), Options(/*background=*/true));
  pipeline.ResetTo(std::nullopt, 0);
  PutNext(pipeline, "a");
  PutNext(pipeline, "b");
  ASSERT_TRUE(pipeline.TryCommit(/*force=*/true, Proven).ok());
  PutNext(pipeline, "c");
  ASSERT_TRUE(pipeline.TryCommit(/*force=*/false, Proven).ok());  // {c} in flight
  EXPECT_EQ(pipeline.pending().spare_nodes(), 2u);                // {a, b}'s nodes
  PutNext(pipeline, "d");                                         // takes one of them
  while (pipeline.in_flight()) {
    ASSERT_TRUE(pipeline.CollectIfFinished().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(pipeline.committed(), 3u);
  EXPECT_EQ(pipeline.pending().spare_nodes(), 1u);
  ASSERT_TRUE(pipeline.Flush(Proven).ok());
  EXPECT_EQ(pipeline.committed(), 4u);
  EXPECT_EQ(pipeline.pending().spare_nodes(), 0u);
  Entry d;
  ASSERT_TRUE(fold->Get("d", &d).ok());
  EXPECT_EQ(d.revision, 4u);
}

}  // namespace
}  // namespace kvfold
