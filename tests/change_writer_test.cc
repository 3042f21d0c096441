// ChangeWriter: a repair's batches, their counts and their hook order.

#include "repair/change_writer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvfold/change.h"
#include "sim/instant_sleep_clock.h"
#include "sim/sim_bucket.h"

namespace kvfold::repair {
namespace {

struct Harness {
  sim::SimBucket bucket;
  std::unique_ptr<Fold> fold = NewMemoryFold();
  sim::InstantSleepClock clock;
  std::vector<std::string> seen;
  ApplyHook hook = [this](const Change& c) {
    seen.emplace_back(c.key);
    return Status::OK();
  };
  RepairContext ctx{bucket, *fold, clock};

  explicit Harness(size_t batch_size) {
    ctx.batch_size = batch_size;
    ctx.apply = &hook;
  }
};

// Keys in ascending order cannot repeat and the batch counts them itself; a
// key out of order may repeat one: the batch then counts distinct keys and
// leaves the count change to the store (the memory fold refuses a wrong one).
TEST(ChangeWriterTest, AKeyThatComesAgainInABatchIsCountedOnceAndItsLastEntryWins) {
  Harness h(3);
  ChangeWriter w(h.ctx, ChangeOrigin::kRelist);
  ASSERT_TRUE(w.Add("b", std::nullopt, Entry{1, false, "v"}, true).ok());
  ASSERT_TRUE(w.Add("c", std::nullopt, Entry{2, false, "v"}, true).ok());
  ASSERT_TRUE(w.Add("b", Entry{1, false, ""}, Entry{3, true, ""}, true).ok());
  // Two distinct keys so far: nothing committed yet.
  auto m = h.fold->ReadMeta();
  EXPECT_EQ(m->entries, 0u);
  ASSERT_TRUE(w.Add("a", std::nullopt, Entry{4, false, "v"}, true).ok());  // the third: commits
  m = h.fold->ReadMeta();
  EXPECT_EQ(m->entries, 3u);
  EXPECT_EQ(m->live_keys, 2u);
  Entry e;
  ASSERT_TRUE(h.fold->Get("b", &e).ok());
  EXPECT_TRUE(e.deleted);
  EXPECT_EQ(h.seen, (std::vector<std::string>{"b", "c", "b", "a"}));
  // A new batch starts in order again; a key right after itself repeats.
  ASSERT_TRUE(w.Add("d", std::nullopt, Entry{5, false, "v"}, true).ok());
  ASSERT_TRUE(w.Add("d", Entry{5, false, ""}, Entry{6, false, "w"}, true).ok());
  ASSERT_TRUE(w.Add("e", std::nullopt, Entry{7, false, "v"}, true).ok());
  m = h.fold->ReadMeta();
  EXPECT_EQ(m->entries, 3u) << "two distinct keys are not a full batch of three";
  ASSERT_TRUE(w.Finish(FoldCommit()).ok());
  m = h.fold->ReadMeta();
  EXPECT_EQ(m->entries, 5u);
  EXPECT_EQ(m->live_keys, 4u);
  ASSERT_TRUE(h.fold->Get("d", &e).ok());
  EXPECT_EQ(e.value, "w");
  // A key that repeats the newest, not the first.
  ChangeWriter w2(h.ctx, ChangeOrigin::kRelist);
  ASSERT_TRUE(w2.Add("f", std::nullopt, Entry{8, false, "v"}, true).ok());
  ASSERT_TRUE(w2.Add("h", std::nullopt, Entry{9, false, "v"}, true).ok());
  ASSERT_TRUE(w2.Add("h", Entry{9, false, ""}, Entry{10, false, "w"}, true).ok());
  m = h.fold->ReadMeta();
  EXPECT_EQ(m->entries, 5u) << "two distinct keys are not a full batch of three";
  ASSERT_TRUE(w2.Add("g", std::nullopt, Entry{11, false, "v"}, true).ok());  // the third
  m = h.fold->ReadMeta();
  EXPECT_EQ(m->entries, 8u);
  ASSERT_TRUE(w2.Add("f", Entry{8, false, ""}, Entry{12, true, ""}, true).ok());
  ASSERT_TRUE(w2.Finish(FoldCommit()).ok());
  m = h.fold->ReadMeta();
  EXPECT_EQ(m->entries, 8u);
  EXPECT_EQ(m->live_keys, 6u);
}

// A walk yields the keys in scope, each once and in order, whatever lies
// out of scope between and after them: the next page starts after the
// last key read, in scope or not (starting after the last one in scope
// would read the same out-of-scope run again, for ever). More than 16
// pages of out-of-scope keys in a row end a page on them.
TEST(FoldWalkerTest, AWalkYieldsEachKeyInScopeOnceAcrossOutOfScopeRuns) {
  std::unique_ptr<Fold> fold = NewMemoryFold();
  FoldCommit c;
  c.cursor = 1;
  uint64_t rev = 0;
  for (const char* k : {"a.1", "a.2", "z.1"}) c.entries[k] = Entry{++rev, false, "v"};
  for (int i = 0; i < 20000; ++i)
    c.entries["m." + std::to_string(100000 + i)] = Entry{++rev, false, "v"};
  for (int i = 0; i < 300; ++i) c.entries["zz." + std::to_string(i)] = Entry{++rev, false, "v"};
  ASSERT_TRUE(fold->Commit(c).ok());
  const Scope scope = *Scope::Make({"a.", "z.1"});
  for (bool values : {false, true}) {
    FoldWalker walker(*fold, scope, values);
    std::vector<std::string> seen;
    for (int peeks = 0; peeks < 100; ++peeks) {
      auto next = walker.Peek();
      ASSERT_TRUE(next.ok()) << next.status().ToString();
      if (*next == nullptr) break;
      seen.push_back((*next)->first);
      EXPECT_EQ((*next)->second.value, values ? "v" : "") << (*next)->first;
      walker.Pop();
    }
    EXPECT_EQ(seen, (std::vector<std::string>{"a.1", "a.2", "z.1"})) << "values " << values;
  }
}

}  // namespace
}  // namespace kvfold::repair
