// The library against a real nats-server: each test starts its own server
// on a free loopback port and judges the fold against the truth the test
// client recorded from its acknowledged writes.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>

#include "fold_view.h"
#include "kvfold/kvfold.h"
#include "live/bounded_watch.h"
#include "live/kv_client.h"
#include "live/must.h"
#include "live/nats_server.h"
#include "nats/ordered_delivery.h"

namespace kvfold::live {
namespace {

using std::chrono::milliseconds;

class WatchLiveTest : public ::testing::Test {
 protected:
  WatchLiveTest() : kv_(server_.url()) {}

  std::unique_ptr<BucketSource> Source(const std::string& bucket) {
    ConnectOptions o;
    o.url = server_.url();
    auto s = OpenNatsBucket(o, bucket);
    return Must(std::move(s), "opening bucket " + bucket);
  }

  std::unique_ptr<Fold> OpenFold(const std::string& name = "fold") {
    FoldOptions fo;
    fo.sync = false;  // process crashes are what these tests model
    auto f = OpenRocksFold(dir_.path() + "/" + name, fo);
    return Must(std::move(f), "opening a fold");
  }

  // An ordered delivery of all of `bucket` from its first message, on a
  // connection of its own, for the delivery's own tests; `tune` sets the
  // rest of its config.
  struct OpenedDelivery {
    std::shared_ptr<nats::NatsConnection> conn;
    std::unique_ptr<nats::OrderedDelivery> delivery;
  };
  OpenedDelivery OpenDelivery(const std::string& bucket,
                              const std::function<void(nats::OrderedDeliveryConfig*)>& tune) {
    ConnectOptions o;
    o.url = server_.url();
    OpenedDelivery out;
    out.conn = Must(nats::NatsConnection::Connect(o), "connecting");
    nats::OrderedDeliveryConfig config;
    config.bucket = bucket;
    config.start.from_seq = 1;
    config.filters = {"$KV." + bucket + ".>"};
    tune(&config);
    bool multi = true;
    out.delivery =
        Must(nats::OrderedDelivery::Open(out.conn, config, &multi), "opening a delivery");
    return out;
  }

  struct Result {
    Status status;
    std::vector<uint64_t> revisions;
  };

  // Bounded: a catch-up that misses a message fails the test in two
  // minutes (WatchUntilCaughtUp) instead of waiting for it for ever.
  Result CatchUp(BucketSource& source, Fold& fold, WatchOptions o = {}) {
    Result r;
    o.linger = milliseconds(5);
    o.log = [](std::string_view line) {
      std::fprintf(stderr, "watch: %.*s\n", int(line.size()), line.data());
    };
    o.apply = [&r](const Change& c) {
      r.revisions.push_back(c.revision);
      return Status::OK();
    };
    r.status = WatchUntilCaughtUp(source, fold, o);
    return r;
  }

  // A watch running on its own thread until Stop().
  class BackgroundWatch {
   public:
    BackgroundWatch(BucketSource& source, Fold& fold, WatchOptions o) : fold_(fold) {
      o.stop = stop_.get_token();
      thread_ = std::thread([this, &source, o] { status_ = Watch(source, fold_, o); });
    }
    // A test that failed (threw) mid-watch still stops and joins it.
    ~BackgroundWatch() {
      if (thread_.joinable()) (void)Stop();
    }
    // Waits (at most `limit`) until the fold's cursor reaches `seq`.
    void WaitForCursor(uint64_t seq, std::chrono::seconds limit) {
      const auto deadline = std::chrono::steady_clock::now() + limit;
      while (fold_.ReadMeta()->cursor.value_or(0) < seq &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(50));
      }
    }
    Status Stop() {
      stop_.request_stop();
      thread_.join();
      return status_;
    }

   private:
    Fold& fold_;
    std::stop_source stop_;
    Status status_;
    std::thread thread_;
  };

  uint64_t ConsumerCount(const std::string& bucket) {
    return kv_.StreamInfo(bucket)["state"].value("consumer_count", uint64_t{0});
  }

  NatsServer server_;
  KvClient kv_;
  TestDir dir_;
};

TEST_F(WatchLiveTest, PutDeletePurgeFoldToTheTruth) {
  kv_.CreateBucket("cfg");
  for (int i = 0; i < 30; ++i)
    kv_.Put("cfg", "k." + std::to_string(i % 10), "v" + std::to_string(i));
  kv_.Delete("cfg", "k.3");
  kv_.Purge("cfg", "k.4");
  kv_.Put("cfg", "k.4", "back");
  kv_.Delete("cfg", "k.5");
  kv_.Put("cfg", "bin", std::string("\0\x01\xff", 3));
  auto source = Source("cfg");
  auto fold = OpenFold();
  Result r = CatchUp(*source, *fold);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("cfg"));
  EXPECT_EQ(fold->ReadMeta()->cursor, kv_.LastSeq("cfg"));
  EXPECT_EQ(fold->ReadMeta()->live_keys, kv_.Truth("cfg").size());
  // Deletes made while watching reach the fold as tombstones.
  kv_.Delete("cfg", "k.1");
  kv_.Purge("cfg", "k.2");
  ASSERT_TRUE(CatchUp(*source, *fold).status.ok());
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("cfg"));
  Entry e;
  ASSERT_TRUE(fold->Get("k.2", &e).ok());
  EXPECT_TRUE(e.deleted);
  EXPECT_EQ(ConsumerCount("cfg"), 0u);  // no leaked consumers
}

// A nats-server 2.11+ limit marker (Nats-Marker-Reason, no KV-Operation,
// empty body) is a delete on every path that reads a message: the
// delivery, and the last-message read a repair makes before it deletes a
// key. Published by hand, so it runs on servers that write none.
TEST_F(WatchLiveTest, LimitMarkerIsADeleteOnEveryReadPath) {
  kv_.CreateBucket("mk");
  kv_.Put("mk", "gone", "v");
  kv_.Put("mk", "kept", "v");
  kv_.PutWithHeaders("mk", "gone", "", {{"Nats-Marker-Reason", "MaxAge"}});
  auto source = Source("mk");
  auto fold = OpenFold();
  Result r = CatchUp(*source, *fold);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("mk"));
  Entry e;
  ASSERT_TRUE(fold->Get("gone", &e).ok());
  EXPECT_TRUE(e.deleted);
  auto last = source->LastOfKey("gone");
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  ASSERT_TRUE(last->has_value());
  EXPECT_EQ((*last)->op, Op::kDelete);
  auto kept = source->LastOfKey("kept");
  ASSERT_TRUE(kept.ok() && kept->has_value());
  EXPECT_EQ((*kept)->op, Op::kPut);

  // And in a resume's delta, read from the store (delta_delivery.h).
  kv_.Put("mk", "again", "v");
  kv_.PutWithHeaders("mk", "again", "", {{"Nats-Marker-Reason", "Remove"}});
  r = CatchUp(*source, *fold);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("mk"));
  ASSERT_TRUE(fold->Get("again", &e).ok());
  EXPECT_TRUE(e.deleted);
}

// Counters (nats-server 2.12+, allow_msg_counter): an increment is stored
// as the running total in JSON, which is the key's value; it folds as
// that. Skipped where the server drops the config.
TEST_F(WatchLiveTest, CounterIncrementsFoldAsTheStoredTotal) {
  kv_.CreateBucket("ctr",
                   {{"allow_msg_counter", true}, {"max_msgs_per_subject", 1}, {"discard", "old"}});
  if (!kv_.StreamInfo("ctr")["config"].value("allow_msg_counter", false)) {
    GTEST_SKIP() << "this server has no counters";
  }
  auto source = Source("ctr");
  auto fold = OpenFold();
  kv_.PutWithHeaders("ctr", "hits", "", {{"Nats-Incr", "+5"}});
  ASSERT_TRUE(CatchUp(*source, *fold).status.ok());
  kv_.PutWithHeaders("ctr", "hits", "", {{"Nats-Incr", "+7"}});
  kv_.PutWithHeaders("ctr", "misses", "", {{"Nats-Incr", "-2"}});
  Result r = CatchUp(*source, *fold);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("ctr"));
  Entry e;
  ASSERT_TRUE(fold->Get("hits", &e).ok());
  EXPECT_EQ(e.value, R"({"val":"12"})");
}

// Atomic batch publishes (nats-server 2.12+, allow_atomic): the stored
// messages carry Nats-Batch-* headers and are ordinary puts; a batch
// folds entirely, in order. Skipped where the server drops the config.
TEST_F(WatchLiveTest, AtomicBatchesFoldLikeTheirPuts) {
  kv_.CreateBucket("bat", {{"allow_atomic", true}});
  if (!kv_.StreamInfo("bat")["config"].value("allow_atomic", false)) {
    GTEST_SKIP() << "this server has no atomic batches";
  }
  kv_.Put("bat", "a", "before");
  kv_.PutBatch("bat", {{"a", "1"}, {"b", "2"}, {"c.x", "3"}});
  kv_.PutBatch("bat", {{"b", "22"}, {"d", "4"}});
  auto source = Source("bat");
  auto fold = OpenFold();
  Result r = CatchUp(*source, *fold);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("bat"));
  EXPECT_EQ(fold->ReadMeta()->cursor, kv_.LastSeq("bat"));
}

TEST_F(WatchLiveTest, ResumeDeliversOnlyTheDelta) {
  kv_.CreateBucket("d");
  for (int i = 0; i < 50; ++i) kv_.Put("d", "k" + std::to_string(i), "v");
  auto source = Source("d");
  auto fold = OpenFold();
  ASSERT_TRUE(CatchUp(*source, *fold).status.ok());
  const uint64_t cursor = *fold->ReadMeta()->cursor;
  for (int i = 0; i < 7; ++i) kv_.Put("d", "k" + std::to_string(i), "new");
  kv_.Delete("d", "k10");
  Result r = CatchUp(*source, *fold);
  ASSERT_TRUE(r.status.ok());
  ASSERT_EQ(r.revisions.size(), 8u);  // exactly the delta, counted
  for (uint64_t rev : r.revisions) EXPECT_GT(rev, cursor);
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("d"));
}

// Invariant: a resume reads a short delta from the stream's store and
// starts its consumer past the head it read (delta_delivery.h: a consumer
// from a sequence the stream holds costs time in proportion to the
// stream), and folds exactly what a consumer would have delivered:
// sequences the store no longer holds (a key rewritten on a history-1
// bucket, a purge's roll-up) are skipped, every other arrives once, in
// order, and whatever comes after the head arrives by the consumer.
TEST_F(WatchLiveTest, AResumeReadsItsDeltaFromTheStoreAndItsConsumerStartsPastTheHead) {
  kv_.CreateBucket("dr", {{"max_msgs_per_subject", 1}});
  for (int i = 0; i < 20; ++i) kv_.Put("dr", "k" + std::to_string(i), "v");
  auto source = Source("dr");
  auto fold = OpenFold();
  ASSERT_TRUE(CatchUp(*source, *fold).status.ok());
  std::vector<uint64_t> expected;                         // what a consumer would deliver, in order
  const uint64_t removed = kv_.Put("dr", "k1", "first");  // then rewritten: gone
  expected.push_back(kv_.Put("dr", "k2", "two"));
  kv_.Put("dr", "k3", "three");  // then purged: the roll-up removes it
  expected.push_back(kv_.Put("dr", "new", "n"));
  expected.push_back(kv_.Put("dr", "k1", "second"));
  expected.push_back(kv_.Delete("dr", "k4"));
  expected.push_back(kv_.Purge("dr", "k3"));
  expected.push_back(kv_.PutWithHeaders("dr", "h", "with a header", {{"Status", "404"}}));
  const uint64_t head = kv_.LastSeq("dr");
  ASSERT_FALSE(kv_.StoredLast("dr", "k1")->revision == removed);

  std::vector<uint64_t> applied;
  std::mutex mu;
  WatchOptions o;
  o.linger = milliseconds(5);
  o.apply = [&](const Change& c) {
    std::lock_guard lock(mu);
    applied.push_back(c.revision);
    return Status::OK();
  };
  BackgroundWatch w(*source, *fold, o);
  w.WaitForCursor(head, std::chrono::seconds(10));
  ASSERT_EQ(fold->ReadMeta()->cursor, head);
  // The delivery's consumer started past the head read at its opening.
  const nlohmann::json list = kv_.Api("$JS.API.CONSUMER.LIST.KV_dr", nlohmann::json::object());
  ASSERT_EQ(list["consumers"].size(), 1u) << list.dump();
  EXPECT_EQ(list["consumers"][0]["config"].value("opt_start_seq", uint64_t{0}), head + 1)
      << list.dump();
  // What comes after the head comes by it.
  expected.push_back(kv_.Put("dr", "after", "a"));
  w.WaitForCursor(expected.back(), std::chrono::seconds(10));
  ASSERT_TRUE(w.Stop().ok());
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(applied, expected);
  }
  EXPECT_EQ(fold->ReadMeta()->cursor, expected.back());
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("dr"));
}

TEST_F(WatchLiveTest, PrefixAndMultiPrefixScopes) {
  kv_.CreateBucket("s");
  for (const char* k : {"a.1", "a.2", "ab", "abc.x", "b.1", "b.2", "c.d.1", "c.e", "z"}) {
    kv_.Put("s", k, std::string("v-") + k);
  }
  kv_.Delete("s", "a.2");
  kv_.Delete("s", "b.1");
  struct Case {
    std::vector<std::string> prefixes;
  };
  int n = 0;
  // Overlapping prefixes too: their filter subjects overlap ("ab" filters
  // on every key, "c." covers "c.d."), which nats-server 2.10+ refuses in
  // one consumer's filter_subjects unless they are merged first.
  for (const auto& c : {Case{{"a."}}, Case{{"a"}}, Case{{"a.", "c.d."}}, Case{{"b.", "z", "c."}},
                        Case{{"ab", "a."}}, Case{{"c.d.", "c."}}, Case{{"a.1", "a.", "c.e"}}}) {
    auto scope = *Scope::Make(c.prefixes);
    SCOPED_TRACE(scope.ToString());
    auto source = Source("s");
    auto fold = OpenFold("fold" + std::to_string(n++));
    WatchOptions o;
    o.scope = scope;
    Result r = CatchUp(*source, *fold, o);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(LiveEntries(*fold), kv_.Truth("s", scope));
    fold->Scan("", true, [&](std::string_view k, const Entry&) {
      EXPECT_TRUE(scope.Contains(k)) << k;
      return true;
    });
    // Writes outside the scope still move the cursor to the end.
    kv_.Put("s", "outside.x", "o");
    ASSERT_TRUE(CatchUp(*source, *fold, o).status.ok());
    EXPECT_EQ(fold->ReadMeta()->cursor, kv_.LastSeq("s"));
    EXPECT_EQ(ConsumerCount("s"), 0u);
  }
}

TEST_F(WatchLiveTest, SurvivesServerKilledAndRestartedOnTheSameStore) {
  kv_.CreateBucket("r");
  for (int i = 0; i < 100; ++i) kv_.Put("r", "k" + std::to_string(i), "before");
  auto source = Source("r");
  auto fold = OpenFold();
  // The restart is noticed by whichever read meets it first (a delivery
  // reset, a failed probe or stream read): what always follows is a new
  // delivery, which the metrics count as a reconnect.
  WatchMetrics metrics;
  WatchOptions o;
  o.linger = milliseconds(5);
  o.reconnect_backoff_min = milliseconds(200);
  o.metrics = &metrics;
  BackgroundWatch watch(*source, *fold, o);
  for (int i = 0; i < 100; ++i)
    kv_.Put("r", "k" + std::to_string(i % 30), "during-" + std::to_string(i));
  std::this_thread::sleep_for(milliseconds(300));
  server_.Kill();
  std::this_thread::sleep_for(milliseconds(500));
  server_.Start();
  for (int i = 0; i < 100; ++i)
    kv_.Put("r", "k" + std::to_string(i % 40), "after-" + std::to_string(i));
  kv_.Delete("r", "k7");
  const uint64_t last = kv_.LastSeq("r");
  watch.WaitForCursor(last, std::chrono::seconds(60));
  Status watch_status = watch.Stop();
  ASSERT_TRUE(watch_status.ok()) << watch_status.ToString();
  EXPECT_GE(metrics.Snapshot().reconnects, 1u);  // the restart was noticed, not slept through
  EXPECT_EQ(fold->ReadMeta()->cursor, last);
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("r"));
}

TEST_F(WatchLiveTest, SlowApplyHookUnderA100kBurstLosesNothing) {
  // History 64 over 5000 keys (20 writes each): no write is superseded out
  // of the stream before delivery, so every one must reach the hook.
  kv_.CreateBucket("burst", {{"max_msgs_per_subject", 64}});
  auto source = Source("burst");
  auto fold = OpenFold();
  // The watch resumes from a cursor, so it reads the burst in sequence
  // order. From an empty fold it would start with a state sync, which
  // rightly brings only each key's last message as of its consumer's
  // creation: writes superseded before then never reach the hook.
  kv_.Put("burst", "k0", "before");
  ASSERT_TRUE(CatchUp(*source, *fold).status.ok());
  std::atomic<uint64_t> applied{0};
  WatchOptions o;
  o.apply = [&](const Change&) {
    // Slow domain code: the server must wait for us (flow control), and
    // the client must buffer, never drop.
    if (applied.fetch_add(1) % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
    return Status::OK();
  };
  BackgroundWatch watch(*source, *fold, o);
  constexpr int kBurst = 100000;
  const uint64_t base = kv_.LastSeq("burst");
  for (int i = 0; i < kBurst; ++i) {
    const std::string key = "k" + std::to_string(i % 5000);
    const std::string value = "v" + std::to_string(i);
    kv_.PutNoAck("burst", key, value);
    kv_.RecordPut("burst", key, value, base + i + 1);
  }
  kv_.Flush();
  kv_.WaitForLastSeq("burst", base + kBurst);
  watch.WaitForCursor(base + kBurst, std::chrono::seconds(120));
  Status watch_status = watch.Stop();
  ASSERT_TRUE(watch_status.ok()) << watch_status.ToString();
  EXPECT_EQ(fold->ReadMeta()->cursor, base + kBurst);
  EXPECT_EQ(applied.load(), static_cast<uint64_t>(kBurst));
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("burst"));
}

// NATS clamps a start below first_seq silently; the watcher must not.
TEST_F(WatchLiveTest, ExpiredCursorOnDiscardOldMaxMsgsIsDetected) {
  kv_.CreateBucket("ev", {{"max_msgs", 20}, {"discard", "old"}});
  for (int i = 0; i < 10; ++i) kv_.Put("ev", "k" + std::to_string(i), "v");
  auto source = Source("ev");
  auto fold = OpenFold();
  ASSERT_TRUE(CatchUp(*source, *fold).status.ok());
  const std::string before = Picture(*fold);
  for (int i = 0; i < 50; ++i) kv_.Put("ev", "n" + std::to_string(i), "w");
  Result r = CatchUp(*source, *fold);
  ASSERT_TRUE(r.status.IsCursorExpired()) << r.status.ToString();
  EXPECT_NE(r.status.message().find("cursor 10 expired"), std::string::npos) << r.status.message();
  EXPECT_TRUE(r.revisions.empty());
  EXPECT_EQ(Picture(*fold), before);
}

// With repair none (which cannot rebuild), a recreated stream is refused;
// repair_live_test.cc covers the rebuild under auto.
TEST_F(WatchLiveTest, RecreatedBucketIsNeverResumed) {
  kv_.CreateBucket("re");
  for (int i = 0; i < 5; ++i) kv_.Put("re", "k" + std::to_string(i), "v");
  auto fold = OpenFold();
  {
    auto source = Source("re");
    ASSERT_TRUE(CatchUp(*source, *fold).status.ok());
  }
  const std::string before = Picture(*fold);
  kv_.DeleteBucket("re");
  kv_.CreateBucket("re");
  for (int i = 0; i < 9; ++i) kv_.Put("re", "x" + std::to_string(i), "v");
  auto source = Source("re");
  WatchOptions none;
  none.repair = ExpiryRepair::kNone;
  Result r = CatchUp(*source, *fold, none);
  ASSERT_TRUE(r.status.IsCursorExpired()) << r.status.ToString();
  EXPECT_NE(r.status.message().find("recreated"), std::string::npos);
  EXPECT_EQ(Picture(*fold), before);
}

// The stall check counts from the last message received, not read: a hook
// or commit that holds the reader past three heartbeat intervals while
// messages and heartbeats queue up must not reset the delivery.
// A source that counts the stream reads a watch makes.
class CountingSource final : public BucketSource {
 public:
  explicit CountingSource(BucketSource& inner) : inner_(inner) {}
  const std::string& bucket() const override { return inner_.bucket(); }
  StatusOr<StreamState> ReadStream() override {
    ++reads;
    return inner_.ReadStream();
  }
  StatusOr<std::unique_ptr<Delivery>> Open(const DeliveryStart& start,
                                           const Scope& scope) override {
    return inner_.Open(start, scope);
  }
  StatusOr<std::optional<uint64_t>> FirstRetainedInScope(const Scope& scope,
                                                         uint64_t from_seq) override {
    return inner_.FirstRetainedInScope(scope, from_seq);
  }
  StatusOr<std::optional<BucketMessage>> LastOfKey(const std::string& key) override {
    return inner_.LastOfKey(key);
  }
  Status ListKeys(const Scope& scope, const std::function<Status(std::string_view, uint64_t)>& fn,
                  uint64_t* last_seq) override {
    return inner_.ListKeys(scope, fn, last_seq);
  }
  std::atomic<int> reads{0};

 private:
  BucketSource& inner_;
};

// What an idle mirror costs the server (issue 34): a whole-bucket delivery
// brings every write, and the server's heartbeat shows its consumer at the
// head the last read saw, so nothing was written or evicted since: the
// idle read waits, even on a bucket that evicts by count (probed five times
// a second otherwise). A write after the quiet spell is folded at once. A
// scoped delivery does not bring the other prefixes' writes, so a scoped
// mirror keeps reading and its cursor passes them.
TEST_F(WatchLiveTest, AnIdleWholeBucketMirrorReadsTheStreamRarely) {
  kv_.CreateBucket("idle", {{"max_msgs", 100000}, {"discard", "old"}});
  for (int i = 0; i < 10; ++i) kv_.Put("idle", "a." + std::to_string(i), "v");
  auto inner = Source("idle");
  CountingSource whole(*inner);
  auto fold = OpenFold();
  {
    BackgroundWatch w(whole, *fold, WatchOptions{});
    w.WaitForCursor(10, std::chrono::seconds(10));
    std::this_thread::sleep_for(milliseconds(7000));  // past the first heartbeat (5 s)
    const int before = whole.reads;
    std::this_thread::sleep_for(milliseconds(6000));
    EXPECT_LE(whole.reads - before, 3) << "stream reads in 6 s of quiet";
    const uint64_t seq = kv_.Put("idle", "a.new", "after the quiet");
    w.WaitForCursor(seq, std::chrono::seconds(5));
    Entry e;
    EXPECT_TRUE(fold->Get("a.new", &e).ok());
    ASSERT_TRUE(w.Stop().ok());
  }
  auto inner2 = Source("idle");
  CountingSource scoped(*inner2);
  auto scoped_fold = OpenFold("scoped");
  WatchOptions o;
  o.scope = Must(Scope::Make({"a."}), "scope");
  // Longer than the test waits: only the scoped rule keeps the idle reads.
  o.quiet_read_every = std::chrono::seconds(60);
  BackgroundWatch w(scoped, *scoped_fold, o);
  w.WaitForCursor(11, std::chrono::seconds(10));
  std::this_thread::sleep_for(milliseconds(7000));  // quiet, past a heartbeat
  uint64_t last = 0;
  for (int i = 0; i < 5; ++i) last = kv_.Put("idle", "b." + std::to_string(i), "elsewhere");
  w.WaitForCursor(last, std::chrono::seconds(8));
  EXPECT_EQ(scoped_fold->ReadMeta()->cursor.value_or(0), last)
      << "the scoped cursor never passed the other prefix's writes";
  ASSERT_TRUE(w.Stop().ok());
}

TEST_F(WatchLiveTest, SlowReaderIsNotMistakenForASilentServer) {
  kv_.CreateBucket("hb");
  for (int i = 0; i < 5; ++i) kv_.Put("hb", "k" + std::to_string(i), "v");
  auto opened = OpenDelivery("hb", [](auto* c) { c->heartbeat = milliseconds(200); });
  auto& d = opened.delivery;
  auto first = d->Next(milliseconds(2000));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->kind, DeliveryEvent::Kind::kMessage);
  std::this_thread::sleep_for(milliseconds(1500));  // a slow hook: 7 heartbeat intervals
  for (uint64_t seq = 2; seq <= 5; ++seq) {
    auto next = d->Next(milliseconds(2000));
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_EQ(next->kind, DeliveryEvent::Kind::kMessage) << next->reason;
    EXPECT_EQ(next->message.seq, seq);
  }
}

// Heartbeats are signs of life: a delivery with nothing to deliver stays
// open for as long as they come, well past three heartbeat intervals.
TEST_F(WatchLiveTest, HeartbeatsKeepAnIdleDeliveryAlive) {
  kv_.CreateBucket("quiet");
  kv_.Put("quiet", "k", "v");
  auto opened = OpenDelivery("quiet", [](auto* c) { c->heartbeat = milliseconds(1000); });
  auto& d = opened.delivery;
  auto first = d->Next(milliseconds(2000));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->kind, DeliveryEvent::Kind::kMessage);
  const auto end = std::chrono::steady_clock::now() + milliseconds(5000);  // 5 intervals
  while (std::chrono::steady_clock::now() < end) {
    auto next = d->Next(milliseconds(500));
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_EQ(next->kind, DeliveryEvent::Kind::kTimeout) << next->reason;
  }
  EXPECT_GE(d->heartbeats().count, 3u);
}

// nats.c drops what overflows its queue and reports it once, out of band;
// its own flag clears as soon as a later message is queued. The delivery
// notices the report at its next call, before the messages queued around
// the one dropped.
TEST_F(WatchLiveTest, ASlowConsumerIsNoticedAtTheNextCall) {
  kv_.CreateBucket("slow");
  auto opened = OpenDelivery("slow", [](auto* c) { c->pending_bytes_limit = 64 << 10; });
  auto& [conn, d] = opened;
  const uint64_t reported = conn->reported();
  kv_.Put("slow", "small.1", "v");
  kv_.Put("slow", "big", std::string(100 << 10, 'x'));  // over the bound alone: dropped
  kv_.Put("slow", "small.2", "v");                      // queued: nats.c's flag clears
  // Its report comes on nats.c's callback thread, after the drop; then
  // small.2 is queued (the server pushed it before it answers the flush).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (conn->reported() == reported && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  std::this_thread::sleep_for(milliseconds(200));
  ASSERT_EQ(natsConnection_FlushTimeout(conn->raw(), 5000), NATS_OK);
  auto next = d->Next(milliseconds(2000));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  ASSERT_EQ(next->kind, DeliveryEvent::Kind::kReset) << "message " << next->message.key;
  EXPECT_EQ(next->cause, ResetCause::kSlowConsumer) << next->reason;
}

// Invariant: the watcher never feeds an older revision of a key over a
// newer one. A fold may hold entries above its cursor (a restore commits its
// chunks under the old cursor, and a kill can stop it there); the replay
// from the cursor then meets older messages of those keys, which must reach
// neither the hook nor the fold, not even between two commits. The unit and
// simulation tests pin the rule (FoldMessage); this is the real server and
// RocksDB, with a commit after every change so a transient overwrite shows.
TEST_F(WatchLiveTest, ReplayedOlderRevisionNeverOverwritesAnEntryAboveTheCursor) {
  kv_.CreateBucket("rev");
  for (int i = 0; i < 5; ++i) kv_.Put("rev", "k" + std::to_string(i), "v");  // 1..5
  auto source = Source("rev");
  auto fold = OpenFold();
  ASSERT_TRUE(CatchUp(*source, *fold).status.ok());
  ASSERT_EQ(fold->ReadMeta()->cursor, 5u);
  kv_.Put("rev", "k1", "old");                          // 6
  kv_.Put("rev", "k3", "deleted later");                // 7
  const uint64_t k1_new = kv_.Put("rev", "k1", "new");  // 8
  const uint64_t k3_deleted = kv_.Delete("rev", "k3");  // 9
  kv_.Put("rev", "k4", "after");                        // 10
  FoldCommit restored;  // as a restore's chunk commit leaves it: cursor still 5
  restored.entries["k1"] = Entry{k1_new, false, "new"};
  restored.entries["k3"] = Entry{k3_deleted, true, ""};
  ASSERT_TRUE(fold->Commit(restored).ok());

  std::vector<std::string> violations;
  WatchOptions o;
  o.linger = milliseconds(1);
  o.batch_size = 1;
  o.commit_in_background = false;  // every change its own commit, seen by on_applied
  o.apply = [&](const Change& c) {
    if (c.revision <= c.previous_revision) {
      violations.push_back("hook fed " + std::string(c.key) + "@" + std::to_string(c.revision) +
                           " over @" + std::to_string(c.previous_revision));
    }
    return Status::OK();
  };
  o.on_applied = [&](uint64_t cursor) {
    Entry k1, k3;
    const bool read = fold->Get("k1", &k1).ok() && fold->Get("k3", &k3).ok();
    if (!read || k1.revision < k1_new || k3.revision < k3_deleted || !k3.deleted) {
      violations.push_back("at cursor " + std::to_string(cursor) + " the fold holds k1@" +
                           std::to_string(k1.revision) + " and k3@" + std::to_string(k3.revision) +
                           (k3.deleted ? " deleted" : " live"));
    }
  };
  Status s = WatchUntilCaughtUp(*source, *fold, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(violations.empty()) << testing::PrintToString(violations);
  EXPECT_EQ(fold->ReadMeta()->cursor, kv_.LastSeq("rev"));
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("rev"));
  Entry k1;
  ASSERT_TRUE(fold->Get("k1", &k1).ok());
  EXPECT_EQ(k1, (Entry{k1_new, false, "new"}));
}

TEST_F(WatchLiveTest, UnreachableServerAndMissingBucketAreClearErrors) {
  ConnectOptions o;
  o.url = "nats://127.0.0.1:" + std::to_string(FreePort());
  o.timeout = milliseconds(500);
  auto s = OpenNatsBucket(o, "any");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.status().IsUnavailable()) << s.status().ToString();
  EXPECT_NE(s.status().message().find("cannot connect to " + o.url), std::string::npos);

  o.url = server_.url();
  auto missing = OpenNatsBucket(o, "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound()) << missing.status().ToString();
  EXPECT_NE(missing.status().message().find("bucket nope does not exist"), std::string::npos);

  auto bad = OpenNatsBucket(o, "bad.name");
  EXPECT_TRUE(bad.status().IsInvalidArgument());
}

}  // namespace
}  // namespace kvfold::live
