// kvfold::Audit and `kvfold audit` against a real nats-server: a fold made
// divergent on purpose, each way, is caught with the key named; an audit
// beside a running mirror and live writers never reports a false
// divergence; an evicting bucket's lost keys are kept, not divergent.

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "kvfold/audit.h"
#include "kvfold/kvfold.h"
#include "live/bounded_watch.h"
#include "live/cli_process.h"
#include "live/kv_client.h"
#include "live/must.h"
#include "live/nats_server.h"
#include "test_dir.h"

namespace kvfold::live {
namespace {

using std::chrono::milliseconds;

class AuditLiveTest : public ::testing::Test {
 protected:
  AuditLiveTest() : kv_(server_.url()) {}

  std::unique_ptr<BucketSource> Source(const std::string& bucket) {
    ConnectOptions o;
    o.url = server_.url();
    auto s = OpenNatsBucket(o, bucket);
    return Must(std::move(s), "opening bucket " + bucket);
  }

  std::unique_ptr<Fold> OpenFold(const std::string& name = "fold") {
    FoldOptions fo;
    fo.sync = false;
    auto f = OpenRocksFold(dir_.path() + "/" + name, fo);
    return Must(std::move(f), "opening a fold");
  }

  void CatchUp(BucketSource& source, Fold& fold) {
    WatchOptions o;
    o.linger = milliseconds(5);
    Status s = WatchUntilCaughtUp(source, fold, o);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  AuditReport MustAudit(BucketSource& source, Fold& fold, const AuditOptions& o = {}) {
    auto r = Audit(source, fold, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : AuditReport{};
  }

  NatsServer server_;
  KvClient kv_;
  TestDir dir_;
};

std::string Describe(const AuditReport& r) {
  std::string out = "judged " + std::to_string(r.judged) + ", in flight " +
                    std::to_string(r.in_flight) + ", kept " + std::to_string(r.kept) + ":";
  for (const auto& n : r.named) {
    out += " " + std::string(AuditFindingName(n.finding)) + " " + n.key + " (fold " +
           std::to_string(n.fold_revision) + ", bucket " + std::to_string(n.bucket_revision) + ")";
  }
  return out;
}

// Each way a fold can differ from its bucket, made on purpose behind the
// watch's back (the cursor stays where the watch left it).
TEST_F(AuditLiveTest, EachDivergenceIsCaughtAndNamed) {
  kv_.CreateBucket("a");
  std::map<std::string, uint64_t> rev;
  for (int i = 0; i < 20; ++i)
    rev["k" + std::to_string(i)] = kv_.Put("a", "k" + std::to_string(i), "v");
  const uint64_t k5_deleted = kv_.Delete("a", "k5");
  auto source = Source("a");
  auto fold = OpenFold();
  CatchUp(*source, *fold);

  AuditReport equal = MustAudit(*source, *fold);
  EXPECT_EQ(equal.divergent(), 0u) << Describe(equal);
  EXPECT_EQ(equal.judged, 19u) << Describe(equal);
  EXPECT_EQ(equal.cursor, kv_.LastSeq("a"));

  FoldCommit damage;
  damage.entries["k1"] = Entry{rev["k1"], true, ""};          // a key dropped
  damage.entries["k2"] = Entry{rev["k2"] - 1, false, "old"};  // a stale revision
  damage.entries["k5"] = Entry{rev["k5"], false, "v"};        // a delete never applied
  damage.entries["ghost"] = Entry{3, false, "boo"};           // a key the bucket never had
  ASSERT_TRUE(fold->Commit(damage).ok());

  AuditReport r = MustAudit(*source, *fold);
  EXPECT_EQ(r.missing, 1u) << Describe(r);
  EXPECT_EQ(r.stale, 1u) << Describe(r);
  EXPECT_EQ(r.phantom, 2u) << Describe(r);
  using F = AuditFinding;
  std::map<std::string, AuditReport::Named> by_key;
  for (const auto& n : r.named) by_key[n.key] = n;
  EXPECT_EQ(by_key["k1"], (AuditReport::Named{"k1", F::kMissing, 0, rev["k1"]}));
  EXPECT_EQ(by_key["k2"], (AuditReport::Named{"k2", F::kStale, rev["k2"] - 1, rev["k2"]}));
  EXPECT_EQ(by_key["k5"], (AuditReport::Named{"k5", F::kPhantom, rev["k5"], k5_deleted}));
  EXPECT_EQ(by_key["ghost"], (AuditReport::Named{"ghost", F::kPhantom, 3, 0}));
}

// A value changed in the fold at the same revision (a write path's bug, or
// a disk's fault its checksums missed) is invisible to revisions; with
// compare_values it is caught and named. Mutant audit-ignore-values misses
// it.
TEST_F(AuditLiveTest, AValueChangedInTheFoldIsCaughtWhenValuesAreCompared) {
  kv_.CreateBucket("a");
  std::map<std::string, uint64_t> rev;
  for (int i = 0; i < 20; ++i)
    rev["k" + std::to_string(i)] = kv_.Put("a", "k" + std::to_string(i), "v" + std::to_string(i));
  auto source = Source("a");
  auto fold = OpenFold();
  CatchUp(*source, *fold);
  AuditOptions values;
  values.compare_values = true;
  AuditReport equal = MustAudit(*source, *fold, values);
  EXPECT_EQ(equal.divergent(), 0u) << Describe(equal);
  EXPECT_EQ(equal.values_compared, 20u) << Describe(equal);

  FoldCommit damage;
  damage.entries["k3"] = Entry{rev["k3"], false, "tampered"};
  ASSERT_TRUE(fold->Commit(damage).ok());
  AuditReport by_revision = MustAudit(*source, *fold);
  EXPECT_EQ(by_revision.divergent(), 0u) << "revisions alone cannot see it";
  AuditReport r = MustAudit(*source, *fold, values);
  EXPECT_EQ(r.value_differs, 1u) << Describe(r);
  EXPECT_EQ(r.divergent(), 1u) << Describe(r);
  ASSERT_EQ(r.named.size(), 1u) << Describe(r);
  EXPECT_EQ(r.named[0], (AuditReport::Named{"k3", AuditFinding::kValue, rev["k3"], rev["k3"]}));
}

// The audit runs while a mirror commits and writers write: whatever it
// reads in flight, it never calls an equal fold divergent, and it judges.
TEST_F(AuditLiveTest, AnAuditBesideAMirrorAndWritersNeverReportsAFalseDivergence) {
  kv_.CreateBucket("busy", {{"max_msgs_per_subject", 3}});
  for (int i = 0; i < 300; ++i) kv_.Put("busy", "k" + std::to_string(i), "v0");
  auto watch_source = Source("busy");
  auto fold = OpenFold();
  MirrorOptions mo;
  mo.watch.linger = milliseconds(2);
  auto mirror = Mirror::Start(*watch_source, *fold, mo);
  ASSERT_TRUE(mirror.ok()) << mirror.status().ToString();
  ASSERT_TRUE((*mirror)->WaitReady(std::chrono::seconds(30)).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  std::thread writer([&] {
    KvClient w(server_.url());
    std::mt19937 rng(7);
    while (!stop) {
      const std::string key = "k" + std::to_string(rng() % 300);
      if (rng() % 5 == 0) {
        w.Delete("busy", key);
      } else {
        w.Put("busy", key, "v" + std::to_string(writes.load()));
      }
      ++writes;
    }
  });
  auto audit_source = Source("busy");
  uint64_t judged = 0, in_flight = 0;
  for (int round = 0; round < 8; ++round) {
    AuditOptions o;
    o.compare_values = round % 2 == 1;  // values read in flight as well
    AuditReport r = MustAudit(*audit_source, *fold, o);
    EXPECT_EQ(r.divergent(), 0u) << "round " << round << ": " << Describe(r);
    judged += r.judged;
    in_flight += r.in_flight;
    std::this_thread::sleep_for(milliseconds(100));
  }
  stop = true;
  writer.join();
  ASSERT_TRUE((*mirror)->Stop().ok());
  EXPECT_GT(writes.load(), 100);
  EXPECT_GT(judged, 0u);
  std::printf("audit beside writes: %d writes, %llu judged, %llu in flight over 8 rounds\n",
              writes.load(), static_cast<unsigned long long>(judged),
              static_cast<unsigned long long>(in_flight));
  // Stopped, the mirror's fold is judged whole.
  CatchUp(*audit_source, *fold);
  AuditReport still = MustAudit(*audit_source, *fold);
  EXPECT_EQ(still.divergent(), 0u) << Describe(still);
  EXPECT_EQ(still.in_flight, 0u) << Describe(still);
}

// Where the bucket evicts current values, a key the fold holds and the
// stream lost is kept, not divergent; where the listing is the truth, the
// same key would be a phantom (EachDivergenceIsCaughtAndNamed's ghost).
TEST_F(AuditLiveTest, AnEvictingBucketsLostKeysAreKeptNotDivergent) {
  kv_.CreateBucket("ev");
  for (int i = 0; i < 30; ++i) kv_.Put("ev", "k" + std::to_string(i), "v");
  auto source = Source("ev");
  auto fold = OpenFold();
  CatchUp(*source, *fold);
  kv_.UpdateBucket("ev", {{"max_msgs", 10}, {"discard", "old"}});
  kv_.Put("ev", "k0", "again");  // evicts down to 10 messages
  CatchUp(*source, *fold);
  AuditReport r = MustAudit(*source, *fold);
  EXPECT_EQ(r.divergent(), 0u) << Describe(r);
  EXPECT_EQ(r.kept, 20u) << Describe(r);
  EXPECT_EQ(r.judged, 10u) << Describe(r);
}

// Where the bucket evicts, only a key whose revision lies below the first
// one retained can have been evicted: a fold key above it with no message
// is a phantom even there.
TEST_F(AuditLiveTest, OnAnEvictingBucketOnlyKeysBelowTheFirstRetainedAreKept) {
  kv_.CreateBucket("ev", {{"max_msgs", 1000}, {"discard", "old"}, {"max_msgs_per_subject", 1}});
  for (int i = 0; i < 5; ++i) kv_.Put("ev", "k" + std::to_string(i), "v");  // 1..5
  auto source = Source("ev");
  auto fold = OpenFold();
  CatchUp(*source, *fold);
  kv_.Put("ev", "k0", "again");  // 6 supersedes 1: first_seq 2, "has evicted"
  CatchUp(*source, *fold);
  FoldCommit damage;
  damage.entries["ghost"] = Entry{4, false, "boo"};  // first_seq is 2: never evicted
  ASSERT_TRUE(fold->Commit(damage).ok());
  ASSERT_GT(kv_.StreamInfo("ev")["state"].value("first_seq", uint64_t{0}), 1u)
      << "the bucket must count as having evicted (the listing not the truth)";
  AuditReport r = MustAudit(*source, *fold);
  EXPECT_EQ(r.phantom, 1u) << Describe(r);
  EXPECT_EQ(r.kept, 0u) << Describe(r);
}

// A stopped fold whose cursor the stream passed (history after it gone)
// cannot be judged: what it missed is not in the stream any more, and the
// next mirror repairs it. Not a phantom.
TEST_F(AuditLiveTest, AnExpiredCursorCannotBeJudged) {
  kv_.CreateBucket("x", {{"max_msgs_per_subject", 1}});
  kv_.Put("x", "k", "v");  // 1
  kv_.Put("x", "a", "v");  // 2
  auto source = Source("x");
  auto fold = OpenFold();
  CatchUp(*source, *fold);
  kv_.Put("x", "a", "w");  // 3, supersedes 2
  kv_.Delete("x", "k");    // 4, supersedes 1
  kv_.PurgeSubject("x", "k");
  kv_.Put("x", "a", "z");  // 5, supersedes 3: the stream holds 5 alone
  auto r = Audit(*source, *fold);
  ASSERT_FALSE(r.ok()) << Describe(*r);
  EXPECT_TRUE(r.status().IsFailedPrecondition()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("cursor 2 expired"), std::string::npos)
      << r.status().ToString();
}

// On a bucket with limit markers, a delete marker written after C can
// expire before the audit reads: a fold key with no message left, behind
// a cursor outside the marker window, is in flight, not a phantom.
TEST_F(AuditLiveTest, AKeyWhoseMarkerExpiredAfterTheCursorIsNotAPhantom) {
  constexpr int64_t kSecNs = 1000 * 1000 * 1000;
  kv_.CreateBucket("ttl", {{"max_msgs_per_subject", 1},
                           {"discard", "old"},
                           {"allow_msg_ttl", true},
                           {"subject_delete_marker_ttl", 1 * kSecNs}});
  if (!kv_.HasLimitMarkers("ttl")) GTEST_SKIP() << "this server has no limit markers";
  for (int i = 0; i < 10; ++i) kv_.Put("ttl", "p" + std::to_string(i), "v");
  for (int i = 0; i < 5; ++i) kv_.PutWithTtl("ttl", "e" + std::to_string(i), "v", "1s");
  auto source = Source("ttl");
  auto fold = OpenFold();
  CatchUp(*source, *fold);
  // Every TTL expires (by 1 s) and every marker too (1 s after that).
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  for (int i = 0; i < 5; ++i) {
    ASSERT_FALSE(kv_.StoredLast("ttl", "e" + std::to_string(i))) << "e" << i << " still stored";
  }
  AuditReport r = MustAudit(*source, *fold);
  EXPECT_EQ(r.divergent(), 0u) << Describe(r);
  EXPECT_EQ(r.judged, 10u) << Describe(r);
  EXPECT_EQ(r.in_flight, 5u) << Describe(r);
}

// An audit in a mirror's process ends when the mirror stops, also while it
// paces its reads.
TEST_F(AuditLiveTest, AStopEndsAPacedAudit) {
  kv_.CreateBucket("slow");
  kv_.Put("slow", "k", "v");
  auto source = Source("slow");
  auto fold = OpenFold();
  CatchUp(*source, *fold);
  FoldCommit damage;  // 50 keys to confirm, at 2 reads a second: 25 s
  for (int i = 0; i < 50; ++i) damage.entries["ghost" + std::to_string(i)] = Entry{1, false, "x"};
  ASSERT_TRUE(fold->Commit(damage).ok());
  std::stop_source stop;
  AuditOptions o;
  o.max_reads_per_second = 2;
  o.stop = stop.get_token();
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.request_stop();
  });
  const auto started = std::chrono::steady_clock::now();
  auto r = Audit(*source, *fold, o);
  stopper.join();
  EXPECT_TRUE(r.status().IsCancelled()) << r.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(3));
}

TEST_F(AuditLiveTest, TheCommandExitsZeroWhenEqualFiveWhenDivergentAndOneWhenItCannotJudge) {
  kv_.CreateBucket("cli");
  for (int i = 0; i < 5; ++i) kv_.Put("cli", "k" + std::to_string(i), "v");
  kv_.CreateBucket("other");
  kv_.Put("other", "x", "y");
  {
    auto source = Source("cli");
    auto fold = OpenFold();
    CatchUp(*source, *fold);
  }
  const std::string fold_dir = dir_.path() + "/fold";
  CliExit equal = RunCli({"audit", "--fold", fold_dir, "--server", server_.url()}, dir_.path());
  EXPECT_EQ(equal.code, 0) << equal.out << equal.err;
  EXPECT_NE(equal.out.find("equal at cursor 5: 5 keys judged"), std::string::npos) << equal.out;

  {
    auto fold = OpenFold();
    FoldCommit damage;
    damage.entries["k3"] = Entry{3, true, ""};
    ASSERT_TRUE(fold->Commit(damage).ok());
  }
  CliExit divergent =
      RunCli({"audit", "--fold", fold_dir, "--server", server_.url(), "--json"}, dir_.path());
  EXPECT_EQ(divergent.code, 5) << divergent.out << divergent.err;
  auto j = nlohmann::json::parse(divergent.out);
  EXPECT_EQ(j["verdict"], "divergent");
  EXPECT_EQ(j["missing"], 1);
  EXPECT_EQ(j["first"][0]["key"], "k3");
  EXPECT_EQ(j["first"][0]["finding"], "missing");

  CliExit wrong = RunCli(
      {"audit", "--fold", fold_dir, "--server", server_.url(), "--bucket", "other"}, dir_.path());
  EXPECT_EQ(wrong.code, 1) << wrong.out << wrong.err;
  EXPECT_NE(wrong.err.find("the fold mirrors bucket cli, not other"), std::string::npos)
      << wrong.err;
}

}  // namespace
}  // namespace kvfold::live
