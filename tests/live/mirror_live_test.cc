// kvfold::Mirror against a real nats-server: read-your-writes through
// WaitForRevision, readiness, and waiters that never outlive the watch.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "fold_view.h"
#include "kvfold/kvfold.h"
#include "kvfold/mirror.h"
#include "live/kv_client.h"
#include "live/nats_server.h"
#include "test_dir.h"

namespace kvfold::live {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

class MirrorLiveTest : public ::testing::Test {
 protected:
  MirrorLiveTest() : kv_(server_.url()) {}

  void SetUp() override {
    kv_.CreateBucket("routes");
    for (int i = 0; i < 200; ++i) kv_.Put("routes", "r" + std::to_string(i), "v0");
    ConnectOptions o;
    o.url = server_.url();
    auto s = OpenNatsBucket(o, "routes");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    source_ = std::move(s).value();
    FoldOptions fo;
    fo.sync = false;
    auto f = OpenRocksFold(dir_.path() + "/fold", fo);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    fold_ = std::move(f).value();
  }

  std::unique_ptr<Mirror> Start(MirrorOptions o = {}) {
    o.watch.linger = milliseconds(5);
    auto m = Mirror::Start(*source_, *fold_, std::move(o));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(m).value() : nullptr;
  }

  NatsServer server_;
  KvClient kv_;
  TestDir dir_;
  std::unique_ptr<BucketSource> source_;
  std::unique_ptr<Fold> fold_;
};

// A service writes, then reads its own write from the fold: the wait ends
// on the commit that carries the revision, and a snapshot after it holds
// the value. Many writers wait at once, each for its own write.
TEST_F(MirrorLiveTest, AWaitForARevisionEndsOnTheCommitThatCarriesIt) {
  auto mirror = Start();
  ASSERT_NE(mirror, nullptr);
  ASSERT_TRUE(mirror->WaitReady(seconds(30)).ok());
  std::vector<std::thread> writers;
  std::atomic<int> read_own_write{0};
  for (int w = 0; w < 8; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 20; ++i) {
        const std::string key = "w" + std::to_string(w) + "." + std::to_string(i);
        const uint64_t rev = kv_.Put("routes", key, "v" + std::to_string(i));
        Status s = mirror->WaitForRevision(rev, seconds(30));
        if (!s.ok()) {
          ADD_FAILURE() << s.ToString();
          return;
        }
        auto snap = mirror->Snapshot();
        if (!snap.ok()) return;
        EXPECT_GE((*snap)->meta().cursor.value_or(0), rev);
        Entry e;
        bool found = false;
        (void)(*snap)->Scan(key, false, [&](std::string_view k, const Entry& got) {
          if (k == key) e = got, found = true;
          return false;
        });
        if (found && e.value == "v" + std::to_string(i)) ++read_own_write;
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(read_own_write.load(), 160);
  EXPECT_TRUE(mirror->Stop().ok());
  EXPECT_EQ(LiveEntries(*fold_), kv_.Truth("routes"));
}

// A revision this bucket never had (another bucket's, a recreated
// stream's) would never come: the wait says so after the next stream read
// instead of waiting out its timeout.
TEST_F(MirrorLiveTest, ARevisionBeyondTheStreamIsRefusedAfterTheNextRead) {
  auto mirror = Start();
  ASSERT_NE(mirror, nullptr);
  const uint64_t last = kv_.Put("routes", "x", "1");
  ASSERT_TRUE(mirror->WaitForRevision(last, seconds(30)).ok());
  const auto start = SteadyClock::now();
  Status s = mirror->WaitForRevision(last + 1000, seconds(60));
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("never come"), std::string::npos) << s.ToString();
  EXPECT_LT(SteadyClock::now() - start, seconds(20));
}

// A watch that ends with an error wakes every waiter with it, and a stop
// wakes them with Cancelled: no waiter outlives the watch.
TEST_F(MirrorLiveTest, EveryWaiterWakesWhenTheWatchEnds) {
  MirrorOptions o;
  o.watch.apply = [](const Change& c) {
    if (c.key == "poison") return Status::Internal("the service refused key poison");
    return Status::OK();
  };
  auto mirror = Start(o);
  ASSERT_NE(mirror, nullptr);
  ASSERT_TRUE(mirror->WaitForRevision(kv_.Put("routes", "a", "1"), seconds(30)).ok());
  const uint64_t poison = kv_.Put("routes", "poison", "1");
  const uint64_t after = kv_.Put("routes", "b", "1");
  std::vector<Status> got(4);
  std::vector<std::thread> waiters;
  for (size_t i = 0; i < got.size(); ++i) {
    waiters.emplace_back([&, i] { got[i] = mirror->WaitForRevision(after, seconds(60)); });
  }
  for (auto& t : waiters) t.join();
  for (const Status& s : got) {
    EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
    EXPECT_NE(s.message().find("refused key poison"), std::string::npos) << s.ToString();
  }
  EXPECT_LT(mirror->Cursor().value_or(0), poison);
  ASSERT_TRUE(mirror->Result());
  EXPECT_FALSE(mirror->WaitReady(seconds(5)).ok());

  // A second mirror on the same fold (the first is done): once stopped,
  // a wait returns at once (the same wake-up as above), and so does
  // readiness.
  o.watch.apply = nullptr;
  auto second = Start(o);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(second->WaitForRevision(after, seconds(30)).ok());
  EXPECT_TRUE(second->Stop().ok());
  const auto stopped = SteadyClock::now();
  Status waited = second->WaitForRevision(after + 1000, seconds(60));
  EXPECT_EQ(waited.code(), Status::Code::kCancelled) << waited.ToString();
  EXPECT_NE(waited.message().find("was stopped"), std::string::npos) << waited.ToString();
  EXPECT_EQ(second->WaitReady(seconds(60)).code(), Status::Code::kCancelled);
  EXPECT_LT(SteadyClock::now() - stopped, seconds(1));
}

// A stop token of the caller's (WatchOptions::stop) stops the mirror too,
// and wakes its waiters.
TEST_F(MirrorLiveTest, TheCallersStopTokenStopsIt) {
  std::stop_source mine;
  MirrorOptions o;
  o.watch.stop = mine.get_token();
  auto mirror = Start(o);
  ASSERT_NE(mirror, nullptr);
  const uint64_t last = kv_.Put("routes", "x", "1");
  ASSERT_TRUE(mirror->WaitForRevision(last, seconds(30)).ok());
  mine.request_stop();
  const auto stopped = SteadyClock::now();
  Status s = mirror->WaitForRevision(last + 1000, seconds(60));
  EXPECT_TRUE(s.code() == Status::Code::kCancelled || s.IsInvalidArgument()) << s.ToString();
  for (int i = 0; i < 100 && !mirror->Result(); ++i) std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(mirror->Result()) << "the caller's stop did not end the watch";
  EXPECT_TRUE(mirror->Result()->ok()) << mirror->Result()->ToString();
  EXPECT_LT(SteadyClock::now() - stopped, seconds(10));
}

// Options a mirror cannot run with are refused before anything starts; a
// wait that runs out of time (its revision written, its commit held up by
// a slow hook) says where the cursor is.
TEST_F(MirrorLiveTest, BadOptionsAndATimeoutAreClear) {
  MirrorOptions o;
  o.watch.until_caught_up = true;
  auto refused = Mirror::Start(*source_, *fold_, o);
  EXPECT_TRUE(refused.status().IsInvalidArgument()) << refused.status().ToString();
  o.watch.until_caught_up = false;
  std::atomic<bool> hold{true};
  o.watch.apply = [&hold](const Change& c) {
    while (c.key == "slow" && hold.load()) std::this_thread::sleep_for(milliseconds(5));
    return Status::OK();
  };
  auto mirror = Start(o);
  ASSERT_NE(mirror, nullptr);
  ASSERT_TRUE(mirror->WaitForRevision(200, seconds(30)).ok());
  const uint64_t slow = kv_.Put("routes", "slow", "1");
  Status s = mirror->WaitForRevision(slow, milliseconds(300));
  EXPECT_TRUE(s.IsDeadlineExceeded()) << s.ToString();
  EXPECT_NE(s.message().find("the cursor is at"), std::string::npos) << s.ToString();
  hold = false;
  EXPECT_TRUE(mirror->WaitForRevision(slow, seconds(30)).ok());
}

}  // namespace
}  // namespace kvfold::live
