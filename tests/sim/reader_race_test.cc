// A reader racing the watch's commits (SPEC §2: fold changes and the cursor
// commit together). Readers may read a fold while a watch writes it; every
// consistent view they take must show exactly the changes at or below its
// cursor: never a cursor ahead of its entries, never entries ahead of it,
// never a cursor that went backward. The watch writes a real RocksDB fold
// from the simulated bucket, committing on its background thread.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "kvfold/watcher.h"
#include "sim/sim_bucket.h"
#include "test_dir.h"

namespace kvfold {
namespace {

TEST(ReaderRaceTest, EverySnapshotHoldsExactlyTheChangesThroughItsCursor) {
  // One put per key, key i at sequence i + 1: the view through cursor C is
  // the first C keys, live.
  constexpr int kKeys = 3000, kFirstSync = 300;
  sim::SimBucket b;
  for (int i = 0; i < kFirstSync; ++i) b.Put("k" + std::to_string(100000 + i), "v");
  TestDir dir;
  auto fold = OpenRocksFold(dir.path() + "/fold");  // fsync on: commits take a while
  ASSERT_TRUE(fold.ok()) << fold.status().ToString();

  std::atomic<bool> done{false};
  uint64_t views = 0, last_cursor = 0;
  std::vector<std::string> violations;
  std::thread reader([&] {
    while (!done.load() && violations.size() < 5) {
      auto snap = (*fold)->Snapshot();
      if (!snap.ok()) {
        violations.push_back("snapshot failed: " + snap.status().ToString());
        continue;
      }
      const uint64_t cursor = (*snap)->meta().cursor.value_or(0);
      uint64_t live = 0, above = 0;
      Status s = (*snap)->Scan("", true, [&](std::string_view, const Entry& e) {
        live += !e.deleted;
        above += e.revision > cursor;
        return true;
      });
      ++views;
      if (!s.ok()) violations.push_back("scan failed: " + s.ToString());
      if (cursor < last_cursor) {
        violations.push_back("cursor went back from " + std::to_string(last_cursor) + " to " +
                             std::to_string(cursor));
      }
      if (live - above != cursor) {
        violations.push_back("cursor " + std::to_string(cursor) + " but " +
                             std::to_string(live - above) + " entries at or below it");
      }
      if (above > 0) {
        violations.push_back(std::to_string(above) + " entries above cursor " +
                             std::to_string(cursor));
      }
      if ((*snap)->meta().live_keys != live) {
        violations.push_back("meta counts " + std::to_string((*snap)->meta().live_keys) +
                             " live keys, the scan " + std::to_string(live));
      }
      last_cursor = cursor;
    }
  });

  WatchOptions o;
  o.batch_size = 7;         // many commits for the reader to race
  o.sync_run_bytes = 7000;  // and the first sync's runs of about 50 keys, ingested
  o.linger = std::chrono::milliseconds(1);
  o.idle_probe = std::chrono::milliseconds(5);
  o.until_caught_up = true;
  Status watched = Watch(b, **fold, o);
  for (int i = kFirstSync; i < kKeys; ++i) b.Put("k" + std::to_string(100000 + i), "v");
  if (watched.ok()) watched = Watch(b, **fold, o);  // the rest in batches
  done = true;
  reader.join();
  ASSERT_TRUE(watched.ok()) << watched.ToString();
  EXPECT_EQ((*fold)->ReadMeta()->cursor, uint64_t{kKeys});
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: " << violations[0];
  EXPECT_GT(views, 10u) << "the reader barely ran";
  std::fprintf(stderr, "reader race: %llu consistent views checked\n",
               static_cast<unsigned long long>(views));
}

// Issue 32, 4: the same race on a scoped mirror whose cursor jumps over
// what is out of scope (every other message), where a batch's cursor is
// proven by a floor check before it is handed to the committer: no view
// ever holds an entry above its cursor. Mutant commit-before-frontier-proof
// commits entries ahead of the cursor that proves them.
TEST(ReaderRaceTest, AScopedMirrorsSnapshotsNeverHoldEntriesAboveTheirCursor) {
  constexpr int kKeys = 2000, kFirstSync = 200;
  sim::SimBucket b;
  auto put = [&b](int from, int to) {
    for (int i = from; i < to; ++i) {
      b.Put("a." + std::to_string(100000 + i), "v");
      b.Put("b." + std::to_string(100000 + i), "v");
    }
  };
  put(0, kFirstSync);
  TestDir dir;
  auto fold = OpenRocksFold(dir.path() + "/fold");
  ASSERT_TRUE(fold.ok()) << fold.status().ToString();
  std::atomic<bool> done{false};
  uint64_t views = 0, last_cursor = 0;
  std::vector<std::string> violations;
  std::thread reader([&] {
    while (!done.load() && violations.size() < 5) {
      auto snap = (*fold)->Snapshot();
      if (!snap.ok()) {
        violations.push_back("snapshot failed: " + snap.status().ToString());
        continue;
      }
      const uint64_t cursor = (*snap)->meta().cursor.value_or(0);
      uint64_t above = 0, max_seen = 0;
      Status s = (*snap)->Scan("", true, [&](std::string_view, const Entry& e) {
        above += e.revision > cursor;
        max_seen = std::max(max_seen, e.revision);
        return true;
      });
      ++views;
      if (!s.ok()) violations.push_back("scan failed: " + s.ToString());
      if (cursor < last_cursor) {
        violations.push_back("cursor went back from " + std::to_string(last_cursor) + " to " +
                             std::to_string(cursor));
      }
      if (above > 0) {
        violations.push_back(std::to_string(above) + " entries above cursor " +
                             std::to_string(cursor) + " (up to revision " +
                             std::to_string(max_seen) + ")");
      }
      last_cursor = cursor;
    }
  });
  WatchOptions o;
  o.scope = *Scope::Make({"a."});
  o.batch_size = 7;
  o.sync_run_bytes = 7000;  // the first sync in runs of about 50 keys
  o.linger = std::chrono::milliseconds(1);
  o.idle_probe = std::chrono::milliseconds(5);
  o.until_caught_up = true;
  Status watched = Watch(b, **fold, o);
  put(kFirstSync, kKeys);
  if (watched.ok()) watched = Watch(b, **fold, o);  // the rest in batches
  done = true;
  reader.join();
  ASSERT_TRUE(watched.ok()) << watched.ToString();
  EXPECT_EQ((*fold)->ReadMeta()->cursor, uint64_t{2 * kKeys});
  EXPECT_EQ((*fold)->ReadMeta()->live_keys, uint64_t{kKeys});
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: " << violations[0];
  EXPECT_GT(views, 10u) << "the reader barely ran";
}

}  // namespace
}  // namespace kvfold
