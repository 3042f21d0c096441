#include "core/pending_batch.h"

#include <gtest/gtest.h>

namespace kvfold::core {
namespace {

BucketMessage Msg(uint64_t seq, Op op = Op::kPut, std::string value = "v") {
  BucketMessage m;
  m.key = "k";
  m.seq = seq;
  m.op = op;
  m.value = std::move(value);
  return m;
}

TEST(FoldMessageTest, NewKeyTakesTheMessage) {
  auto e = FoldMessage(Msg(3, Op::kPut, "x"), std::nullopt);
  ASSERT_TRUE(e);
  EXPECT_EQ(*e, (Entry{3, false, "x"}));
}

TEST(FoldMessageTest, OlderOrEqualRevisionIsSkipped) {
  Entry cur{5, false, "v5"};
  EXPECT_FALSE(FoldMessage(Msg(5), cur));
  EXPECT_FALSE(FoldMessage(Msg(4), cur));
  // A tombstone keeps the revision: an older put cannot resurrect the key.
  Entry tomb{9, true, ""};
  EXPECT_FALSE(FoldMessage(Msg(8, Op::kPut, "old"), tomb));
}

// A put keeps its message's deadline; a delete or a purge (a limit marker
// too) carries a Nats-TTL of its own for the marker, never a deadline of
// the key's: a tombstone has none.
TEST(FoldMessageTest, OnlyAPutKeepsItsDeadline) {
  BucketMessage put = Msg(3, Op::kPut, "x");
  put.expires_ns = 1'000'000'000;
  auto e = FoldMessage(put, std::nullopt);
  ASSERT_TRUE(e);
  EXPECT_EQ(*e, (Entry{3, false, "x", 1'000'000'000}));
  for (Op op : {Op::kDelete, Op::kPurge}) {
    BucketMessage gone = Msg(4, op, "");
    gone.expires_ns = 2'000'000'000;
    auto t = FoldMessage(gone, *e);
    ASSERT_TRUE(t);
    EXPECT_EQ(*t, (Entry{4, true, "", 0}));
  }
}

TEST(FoldMessageTest, DeleteAndPurgeMakeTombstones) {
  Entry cur{5, false, "v5"};
  auto d = FoldMessage(Msg(6, Op::kDelete, "ignored"), cur);
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, (Entry{6, true, ""}));
  auto p = FoldMessage(Msg(7, Op::kPurge), *d);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (Entry{7, true, ""}));
}

TEST(PendingBatchTest, CursorOnlyMovesForward) {
  PendingBatch b;
  b.AdvanceTo(10);
  b.AdvanceTo(7);
  EXPECT_EQ(b.cursor(), 10u);
}

TEST(PendingBatchTest, HasWorkWhenEntriesMetaOrCursorAhead) {
  PendingBatch b;
  EXPECT_FALSE(b.HasWork(std::nullopt));
  b.AdvanceTo(4);
  EXPECT_TRUE(b.HasWork(std::nullopt));
  EXPECT_TRUE(b.HasWork(3));
  EXPECT_FALSE(b.HasWork(4));
  b.meta().bucket = "b";
  EXPECT_TRUE(b.HasWork(4));
  b.Clear();
  EXPECT_FALSE(b.HasWork(4));
  b.Put("k", Entry{5, false, "v"});
  EXPECT_TRUE(b.HasWork(5));
}

TEST(PendingBatchTest, CommitCarriesEntriesCursorAndMeta) {
  PendingBatch b;
  b.Put("a", Entry{1, false, "x"});
  b.Put("a", Entry{2, true, ""});  // latest wins
  b.AdvanceTo(2);
  b.meta().scope = std::vector<std::string>{"a."};
  FoldCommit c = b.ToCommit();
  ASSERT_EQ(c.entries.size(), 1u);
  EXPECT_EQ(c.entries["a"], (Entry{2, true, ""}));
  EXPECT_EQ(c.cursor, 2u);
  EXPECT_EQ(c.scope, (std::vector<std::string>{"a."}));
  // A failed commit keeps everything: ToCommit does not consume.
  EXPECT_EQ(b.ToCommit().entries.size(), 1u);
}

// A batch handed to the committer whose commit failed goes back under what
// arrived since: the newer pending entries and fields win, nothing is lost.
TEST(PendingBatchTest, AFailedReleasedBatchGoesBackUnderTheNewerOne) {
  PendingBatch b;
  b.Put("a", Entry{1, false, "old"});
  b.Put("b", Entry{2, false, "kept"});
  b.AdvanceTo(2);
  b.meta().bucket = "bk";
  FoldCommit handed = b.Release();
  EXPECT_EQ(handed.entries.size(), 2u);
  EXPECT_EQ(b.changes(), 0u);
  EXPECT_EQ(b.cursor(), 2u);
  EXPECT_FALSE(b.HasWork(2));
  b.Put("a", Entry{3, true, ""});
  b.AdvanceTo(3);
  b.meta().stream_created = "t";
  b.TakeBack(std::move(handed));
  const FoldCommit c = b.ToCommit();
  EXPECT_EQ(c.entries.at("a"), (Entry{3, true, ""}));
  EXPECT_EQ(c.entries.at("b"), (Entry{2, false, "kept"}));
  EXPECT_EQ(c.cursor, 3u);
  EXPECT_EQ(c.bucket, "bk");
  EXPECT_EQ(c.stream_created, "t");
}

// Keys proven new let the commit state its count change (the store then
// reads none of them); one key not proven, or put twice, and the store
// counts them all.
TEST(PendingBatchTest, OnlyABatchOfKeysAllKnownNewStatesItsCounts) {
  PendingBatch b;
  b.Put("a", Entry{1, false, "x"}, /*known_new=*/true);
  b.Put("b", Entry{2, true, ""}, /*known_new=*/true);
  b.AdvanceTo(2);
  FoldCommit c = b.Release();
  ASSERT_TRUE(c.counts.has_value());
  EXPECT_EQ(c.counts->entries, 2);
  EXPECT_EQ(c.counts->live_keys, 1);  // a tombstone is an entry, not a live key

  b.Put("c", Entry{3, false, "x"}, /*known_new=*/true);
  b.Put("d", Entry{4, false, "x"});
  EXPECT_FALSE(b.Release().counts.has_value());

  b.Put("e", Entry{5, false, "x"}, /*known_new=*/true);
  b.Put("e", Entry{6, false, "y"}, /*known_new=*/true);
  EXPECT_FALSE(b.ToCommit().counts.has_value());
  b.Clear();

  // A failed batch taken back: its keys are no longer new to what follows.
  b.Put("f", Entry{7, false, "x"}, /*known_new=*/true);
  FoldCommit failed = b.Release();
  ASSERT_TRUE(failed.counts.has_value());
  b.Put("g", Entry{8, false, "x"}, /*known_new=*/true);
  b.TakeBack(std::move(failed));
  const FoldCommit retried = b.Release();
  EXPECT_EQ(retried.entries.size(), 2u);
  EXPECT_FALSE(retried.counts.has_value());
  // And the batch after it starts proving again.
  b.Put("h", Entry{9, false, "x"}, /*known_new=*/true);
  EXPECT_TRUE(b.ToCommit().counts.has_value());
}

// A caller that read each key's entry before (a watch with an apply hook)
// lets the batch state its count change, so the store reads nothing; one
// put without it (or a failed batch taken back) leaves the store to count.
TEST(PendingBatchTest, ABatchWhoseEveryEntryBeforeIsKnownStatesItsCounts) {
  const Entry live{1, false, "x"}, tomb{2, true, ""};
  PendingBatch b;
  b.PutOver("a", Entry{10, false, "y"}, std::nullopt);  // a new key
  b.PutOver("b", Entry{11, true, ""}, live);            // a delete
  b.PutOver("c", Entry{12, false, "z"}, tomb);          // back from a tombstone
  b.PutOver("d", Entry{13, false, "w"}, live);          // an update
  b.Put("e", Entry{14, false, "v"}, /*known_new=*/true);
  // Pending already: counted from the batch's own entry ("a", new and
  // live), whatever the caller passes.
  b.PutOver("a", Entry{15, true, ""}, std::nullopt);
  FoldCommit c = b.ToCommit();
  ASSERT_TRUE(c.counts.has_value());
  EXPECT_FALSE(c.new_keys);           // held keys: through the log, not ingested
  EXPECT_EQ(c.counts->entries, 2);    // "a" (a tombstone now) and "e"
  EXPECT_EQ(c.counts->live_keys, 1);  // + "c" + "e", - "b"; "a" never counted live
  c = b.Release();
  ASSERT_TRUE(c.counts.has_value());

  // One put whose entry before was not read: the store counts.
  b.PutOver("f", Entry{16, false, "x"}, std::nullopt);
  b.Put("g", Entry{17, false, "x"});
  b.PutOver("h", Entry{18, false, "x"}, std::nullopt);
  EXPECT_FALSE(b.ToCommit().counts.has_value());
  b.Clear();

  // A failed batch taken back: the counts went with it.
  b.PutOver("i", Entry{19, false, "x"}, live);
  FoldCommit failed = b.Release();
  ASSERT_TRUE(failed.counts.has_value());
  b.PutOver("j", Entry{20, false, "x"}, std::nullopt);
  b.TakeBack(std::move(failed));
  EXPECT_FALSE(b.Release().counts.has_value());
}

// A batch that clears the fold, or states its counts itself, gets none of
// its puts' counts: those were read against the fold before the clear.
TEST(PendingBatchTest, ABatchThatClearsTheFoldOrStatesItsCountsKeepsItsOwn) {
  const Entry live{1, false, "x"};
  PendingBatch b;
  b.meta().clear_entries = true;
  b.PutOver("a", Entry{10, false, "y"}, live);
  FoldCommit c = b.ToCommit();
  EXPECT_FALSE(c.counts.has_value());
  EXPECT_FALSE(c.new_keys);
  b.Clear();
  b.meta().counts = FoldCommit::CountChange{0, 5};
  b.Put("b", Entry{11, false, "y"}, /*known_new=*/true);
  c = b.ToCommit();
  ASSERT_TRUE(c.counts.has_value());
  EXPECT_EQ(c.counts->entries, 5);
  EXPECT_FALSE(c.new_keys);
}

// The byte count a batch is bounded by follows what it holds: a key put
// again counts once, at its newest value; a released batch counts nothing;
// a failed one taken back counts the keys it adds.
TEST(PendingBatchTest, BytesFollowTheKeysAndValuesPending) {
  PendingBatch b;
  EXPECT_EQ(b.bytes(), 0u);
  b.Put("ab", Entry{1, false, std::string(10, 'x')});
  b.Put("cde", Entry{2, false, std::string(20, 'y')});
  EXPECT_EQ(b.bytes(), 2u + 10 + 3 + 20);
  b.Put("ab", Entry{3, false, "z"});  // replaces the 10 bytes
  EXPECT_EQ(b.bytes(), 2u + 1 + 3 + 20);
  b.Put("cde", Entry{4, true, ""});  // a tombstone holds its key only
  EXPECT_EQ(b.bytes(), 2u + 1 + 3);
  // Again the newest wins, whether the key is the last one or not.
  ASSERT_NE(b.Find("ab"), nullptr);
  EXPECT_EQ(b.Find("ab")->value, "z");
  ASSERT_NE(b.Find("cde"), nullptr);
  EXPECT_TRUE(b.Find("cde")->deleted);
  EXPECT_EQ(b.ToCommit().entries.size(), 2u);
  FoldCommit released = b.Release();
  EXPECT_EQ(b.bytes(), 0u);
  b.Put("ab", Entry{5, false, "new"});
  b.TakeBack(std::move(released));  // "ab" stays the pending one; "cde" comes back
  EXPECT_EQ(b.bytes(), 2u + 3 + 3);
  b.Clear();
  EXPECT_EQ(b.bytes(), 0u);
}

// A batch written is kept for its nodes: the entries that come next take
// them, in key order or not, and nothing of what they held shows.
TEST(PendingBatchTest, ARecycledBatchLendsItsNodesAndNothingElse) {
  PendingBatch b;
  const std::string long_key(40, 'z');
  for (int i = 0; i < 3; ++i)
    b.Put(long_key + std::to_string(i), Entry{uint64_t(i + 1), false, "old"});
  b.AdvanceTo(3);
  b.Recycle(b.Release());
  b.Put("b", Entry{5, false, "B"});
  b.Put("a", Entry{6, false, "A"});  // before the last key: searched for
  b.Put("c", Entry{7, true, ""});
  b.Put("a", Entry{8, false, "A2"});  // replaces, takes no node
  b.Put("d", Entry{9, false, "D"});   // the three nodes are used: a new one
  ASSERT_NE(b.Find("a"), nullptr);
  EXPECT_EQ(b.Find("a")->value, "A2");
  EXPECT_EQ(b.Find(long_key + "0"), nullptr);
  EXPECT_EQ(b.bytes(), 1u + 2 + 1 + 1 + 1 + 0 + 1 + 1);
  const FoldCommit c = b.Release();
  EXPECT_EQ(c.entries, (std::map<std::string, Entry>{{"a", Entry{8, false, "A2"}},
                                                     {"b", Entry{5, false, "B"}},
                                                     {"c", Entry{7, true, ""}},
                                                     {"d", Entry{9, false, "D"}}}));
  EXPECT_EQ(c.cursor, 3u);
}

// What an idle mirror holds of the batches it wrote is bounded: a batch
// larger than kMaxSpareNodes is freed whole, and only one is kept.
TEST(PendingBatchTest, TheNodesKeptAreBounded) {
  PendingBatch b;
  FoldCommit big;
  for (size_t i = 0; i <= PendingBatch::kMaxSpareNodes; ++i) {
    big.entries["k" + std::to_string(i)] = Entry{1, false, "v"};
  }
  b.Recycle(std::move(big));
  EXPECT_EQ(b.spare_nodes(), 0u);
  FoldCommit small;
  small.entries["a"] = Entry{1, false, "v"};
  small.entries["b"] = Entry{2, false, "v"};
  b.Recycle(std::move(small));
  EXPECT_EQ(b.spare_nodes(), 2u);
  FoldCommit another;
  another.entries["c"] = Entry{3, false, "v"};
  b.Recycle(std::move(another));
  EXPECT_EQ(b.spare_nodes(), 2u);
  b.Put("x", Entry{4, false, "X"});
  EXPECT_EQ(b.spare_nodes(), 1u);
  b.DropSpare();
  EXPECT_EQ(b.spare_nodes(), 0u);
  FoldCommit heavy;
  heavy.entries["h"] = Entry{5, false, std::string(PendingBatch::kMaxSpareValueBytes + 1, 'v')};
  b.Recycle(std::move(heavy));
  EXPECT_EQ(b.spare_nodes(), 0u);
}

}  // namespace
}  // namespace kvfold::core
