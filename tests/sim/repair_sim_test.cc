// Expiry repair driven through the product's watch loop and repair code,
// against the simulated bucket, real folds and a real directory transport
// for artifacts. Each test names the SPEC §2/§5 rule it guards. The oracles:
// the fold equals the truth (every write minus every real delete, in scope),
// the apply hook's view equals the fold, and the hook never sees a revision
// go backward or a live key deleted.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "artifact/manifest_codec.h"
#include "fold_view.h"
#include "kvfold/artifact.h"
#include "kvfold/health.h"
#include "kvfold/repair.h"
#include "kvfold/transport.h"
#include "kvfold/watch_metrics.h"
#include "kvfold/watcher.h"
#include "sim/fault_fold.h"
#include "sim/instant_sleep_clock.h"
#include "sim/sim_bucket.h"
#include "test_dir.h"

namespace kvfold {
namespace {

using sim::Fault;
using sim::FaultFold;
using sim::SimBucket;

using sim::InstantSleepClock;

WatchOptions Fast() {
  static InstantSleepClock clock;
  WatchOptions o;
  o.clock = &clock;
  o.linger = std::chrono::milliseconds(1);
  o.reconnect_backoff_min = std::chrono::milliseconds(1);
  o.reconnect_backoff_max = std::chrono::milliseconds(4);
  o.idle_probe = std::chrono::milliseconds(5);
  o.floor_check = std::chrono::milliseconds(0);
  o.repair_timeout = std::chrono::milliseconds(50);
  o.until_caught_up = true;
  if (std::getenv("KVFOLD_SIM_LOG") != nullptr) {
    o.log = [](std::string_view l) { fprintf(stderr, "watch: %.*s\n", (int)l.size(), l.data()); };
  }
  return o;
}

// A node of the fleet: a fold, and the domain state its apply hook keeps.
struct Node {
  std::unique_ptr<Fold> fold = NewMemoryFold();
  std::map<std::string, Entry> hook_view;  // live keys as the hook sees them
  std::map<std::string, uint64_t> last_revision;
  std::map<ChangeOrigin, int> by_origin;
  std::vector<std::string> violations;
  std::vector<std::string> log;
  WatchMetrics metrics;  // over all of the node's runs
};

// What the node's metrics counted of `kind` repairs ending in `outcome`.
uint64_t Repairs(const Node& n, RepairKind kind, RepairOutcome outcome) {
  return n.metrics.Snapshot().repairs[static_cast<size_t>(kind)][static_cast<size_t>(outcome)];
}
// Changes the metrics counted from `origin`, every op.
uint64_t ChangesFrom(const Node& n, ChangeOrigin origin) {
  const WatchStats s = n.metrics.Snapshot();
  uint64_t total = 0;
  for (const auto& by_origin : s.changes) total += by_origin[static_cast<size_t>(origin)];
  return total;
}

// Runs a watch for node `n`; `extra` runs after the oracle's bookkeeping in
// the apply hook (to make the bucket race ahead while the node is busy).
Status RunNode(SimBucket& b, Node& n, WatchOptions o = Fast(), Fold* fold = nullptr,
               std::function<Status(const Change&)> extra = nullptr) {
  o.apply = [&n, &b, scope = o.scope, extra](const Change& c) {
    const std::string key(c.key);
    ++n.by_origin[c.origin];
    auto last = n.last_revision.find(key);
    if (c.origin == ChangeOrigin::kExpiry) {
      // An expiry ends the revision folded, once the bucket dropped it: a
      // delete at that revision, or (with history) the key's previous
      // message, which the bucket shows again.
      if (last == n.last_revision.end() || c.previous_revision != last->second) {
        n.violations.push_back("expiry of a revision never folded for " + key);
      }
      auto now = b.Truth(scope);
      const auto it = now.find(key);
      const auto seen = n.hook_view.find(key);
      if (it != now.end() && seen != n.hook_view.end() && it->second == seen->second) {
        n.violations.push_back("expiry of " + key + " while the bucket still holds it");
      }
      // At the revision that expired: a delete, or with history the
      // previous message's state, which the bucket shows now.
      if (c.revision != c.previous_revision) {
        n.violations.push_back("expiry of " + key + " at another revision than expired");
      }
      if (c.op == Op::kPut ? it == now.end() || it->second.value != c.value ||
                                 it->second.expires_ns != c.expires_ns
                           : c.expires_ns != 0 || !c.value.empty()) {
        n.violations.push_back("expiry of " + key + " is not the state the bucket shows");
      }
    } else if (last != n.last_revision.end() && c.revision <= last->second) {
      n.violations.push_back("revision went backward for " + key);
    }
    n.last_revision[key] = c.revision;
    if (c.op == Op::kPut) {
      n.hook_view[key] = Entry{c.revision, false, std::string(c.value), c.expires_ns};
    } else {
      // No phantom delete: the truth as of the delete's revision must not
      // hold the key live.
      if (b.Truth(scope, c.revision).contains(key)) {
        n.violations.push_back("phantom delete of " + key + " at " + std::to_string(c.revision));
      }
      n.hook_view.erase(key);
    }
    return extra ? extra(c) : Status::OK();
  };
  if (o.metrics == nullptr) o.metrics = &n.metrics;
  auto user_log = o.log;
  o.log = [&n, user_log](std::string_view l) {
    n.log.emplace_back(l);
    if (user_log) user_log(l);
  };
  return Watch(b, fold != nullptr ? *fold : *n.fold, o);
}

bool Logged(const Node& n, const std::string& what) {
  for (const auto& l : n.log) {
    if (l.find(what) != std::string::npos) return true;
  }
  return false;
}

// An artifact location (a real directory transport) and exports into it.
class Artifacts {
 public:
  Artifacts() {
    auto t = OpenTransport("dir:" + dir_.path() + "/arts", ConnectOptions{},
                           TransportOptions{.create_if_missing = true, .s3 = {}});
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    transport_ = std::move(t).value();
    source_ = NewArtifactSource(*transport_);
  }
  // `chunk_bytes` small makes many chunks (restore commits between them).
  void Export(Fold& fold, size_t chunk_bytes = size_t{4} << 20) {
    ExportOptions eo;
    eo.chunk_raw_bytes = chunk_bytes;
    auto m = ExportArtifact(fold, *transport_, eo);
    ASSERT_TRUE(m.ok() || m.status().IsAlreadyExists()) << m.status().ToString();
  }
  // An export that reads the stream's head first, as a mirror's scheduled
  // export does; the result.
  StatusOr<ArtifactManifest> ExportReadingHead(Fold& fold, SimBucket& b) {
    ExportOptions eo;
    eo.stream_last_seq = [&b]() -> StatusOr<uint64_t> {
      auto state = b.ReadStream();
      if (!state.ok()) return state.status();
      return state->last_seq;
    };
    return ExportArtifact(fold, *transport_, eo);
  }
  Transport& transport() { return *transport_; }
  ArtifactSource* source() { return source_.get(); }
  // Flips one byte in the middle of the newest artifact's last chunk file.
  void CorruptLastChunk() {
    std::string last;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_.path() + "/arts")) {
      const std::string p = e.path().string();
      if (p.find("/chunk-") != std::string::npos && p > last) last = p;
    }
    ASSERT_FALSE(last.empty());
    std::fstream f(last, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff middle = f.tellg() / 2;
    f.seekg(middle);
    char c = 0;
    f.read(&c, 1);
    f.seekp(middle);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  // Rewrites the newest artifact's manifest through `edit`, in a valid
  // (unsigned) frame.
  void RewriteNewestManifest(const std::function<void(wire::Manifest*)>& edit) {
    std::string newest;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_.path() + "/arts")) {
      const std::string p = e.path().string();
      if (p.ends_with("/manifest") && p > newest) newest = p;
    }
    ASSERT_FALSE(newest.empty());
    std::string bytes;
    {
      std::ifstream in(newest, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    wire::ManifestEnvelope env;
    wire::Manifest m;
    ASSERT_TRUE(artifact::DecodeManifestFrame(bytes, "m", &env, &m).ok());
    edit(&m);
    env.set_manifest(m.SerializeAsString());
    std::ofstream(newest, std::ios::binary | std::ios::trunc) << artifact::EncodeManifestFrame(env);
  }

 private:
  TestDir dir_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<ArtifactSource> source_;
};

void ExpectConverged(SimBucket& b, Node& n, const Scope& scope = Scope()) {
  EXPECT_EQ(LiveEntries(*n.fold), b.Truth(scope));
  EXPECT_EQ(n.hook_view, LiveEntries(*n.fold));
  EXPECT_TRUE(n.violations.empty()) << n.violations.front();
}

// SPEC §5 Relist, on the everyday bucket (history 1, no limits): a gap is
// overwrites, not loss. Only a purged delete marker can be missing, and the
// headers-only listing finds it; no value is fetched.
// Readiness follows the repair: not ready while it rewrites the fold (still
// alive: a restart would only start it over), ready once caught up after.
TEST(RepairSimTest, ARepairIsAliveButNotReady) {
  SimBucket b;
  b.SetHistoryOne(true);
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v0");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  EXPECT_TRUE(JudgeReady(n.metrics.Snapshot(), {}).ok);
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v1");
  b.PurgeMarker(b.Delete("k.3"));  // only a relist can delete it now
  b.Put("k.0", "last");            // first_seq passes the cursor: a gap
  int seen = 0;
  Status s = RunNode(b, n, Fast(), nullptr, [&](const Change& c) {
    if (c.origin != ChangeOrigin::kRelist) return Status::OK();
    ++seen;
    const WatchStats during = n.metrics.Snapshot();
    EXPECT_TRUE(during.repairing);
    EXPECT_FALSE(JudgeReady(during, {}).ok);
    EXPECT_EQ(JudgeReady(during, {}).reason, "a repair is rewriting the fold");
    EXPECT_TRUE(JudgeAlive(during, {}).ok);
    return Status::OK();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(seen, 1);
  EXPECT_FALSE(n.metrics.Snapshot().repairing);
  EXPECT_TRUE(JudgeReady(n.metrics.Snapshot(), {}).ok)
      << JudgeReady(n.metrics.Snapshot(), {}).reason;
}

// A history-1 bucket of 30 keys that `n` mirrored, each key overwritten 20
// times since: the fold's cursor is far below the stream's first sequence.
void MirrorThenOverwriteHistoryOne(SimBucket& b, Node& n) {
  b.SetHistoryOne(true);
  for (int i = 0; i < 30; ++i) b.Put("k." + std::to_string(i), "v0");
  ASSERT_TRUE(RunNode(b, n).ok());
  for (int round = 1; round <= 20; ++round) {
    for (int i = 0; i < 30; ++i) b.Put("k." + std::to_string(i), "v" + std::to_string(round));
  }
}

TEST(RepairSimTest, HistoryOneGapIsRelistedNotThrownAway) {
  SimBucket b;
  Node n;
  ASSERT_NO_FATAL_FAILURE(MirrorThenOverwriteHistoryOne(b, n));
  b.Delete("k.3");
  const uint64_t marker = b.Delete("k.4");
  b.Purge("k.5");
  b.Put("k.0", "last");
  b.PurgeMarker(marker);  // PurgeDeletes: the stream no longer shows k.4's delete
  WatchOptions o = Fast();
  o.listing_memory_keys = 4;  // the listing spills to disk past 4 keys
  Status s = RunNode(b, n, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectConverged(b, n);
  EXPECT_EQ(n.by_origin[ChangeOrigin::kRestore], 0);
  // k.3, k.4 and k.5 are not listed: deleted by the relist (k.4's marker is
  // gone, so only the relist can delete it); no value was fetched.
  EXPECT_EQ(n.by_origin[ChangeOrigin::kRelist], 3);
  EXPECT_EQ(ChangesFrom(n, ChangeOrigin::kRelist), 3u);
  EXPECT_EQ(Repairs(n, RepairKind::kRelist, RepairOutcome::kDone), 1u);
  EXPECT_TRUE(Logged(n, "no values fetched"));
  EXPECT_NE(n.fold->ReadMeta()->last_repair.find("relist"), std::string::npos);
}

// SPEC §5 Relist refused where the listing is not the truth.
TEST(RepairSimTest, RelistIsRefusedOnAnEvictingBucketAndTheFoldIsUntouched) {
  SimBucket b;
  b.SetMaxMsgs(20);
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  for (int i = 0; i < 40; ++i) b.Put("z." + std::to_string(i), "v");
  const std::string before = Picture(*n.fold);
  WatchOptions o = Fast();
  o.repair = ExpiryRepair::kRelist;
  Status s = RunNode(b, n, o);
  EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_NE(s.message().find("relist refused"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--repair none"), std::string::npos) << s.message();
  EXPECT_EQ(Repairs(n, RepairKind::kRefuse, RepairOutcome::kRefused), 1u);
  EXPECT_EQ(Picture(*n.fold), before);
  EXPECT_TRUE(n.fold->ReadMeta()->eviction_observed);
}

// Node A keeps up and exports; node B is stopped while the bucket evicts
// past its cursor: a key ages out while live, a write is made and evicted
// within the gap, and a real delete happens. B restarts with auto and ends
// identical to A and to the truth.
TEST(RepairSimTest, RestoreAfterEvictionMatchesTheExporterAndTheTruth) {
  for (int batch : {1, 100}) {
    SimBucket b;
    b.SetMaxMsgs(25);
    Artifacts arts;
    Node a, nb;
    b.Put("old.aging", "still live");  // never written again: ages out
    b.Put("del.me", "deleted in the gap");
    for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v0");
    ASSERT_TRUE(RunNode(b, a).ok());
    ASSERT_TRUE(RunNode(b, nb).ok());
    for (int round = 1; round <= 8; ++round) {
      for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v" + std::to_string(round));
      if (round == 3) b.Put("gap.write", "made and evicted in the gap");
      if (round == 5) b.Delete("del.me");
      ASSERT_TRUE(RunNode(b, a).ok());  // A keeps up
    }
    arts.Export(*a.fold);
    b.Put("after.export", "x");  // a write after the artifact's cursor
    WatchOptions o = Fast();
    o.batch_size = batch;
    o.artifacts = arts.source();
    Status s = RunNode(b, nb, o);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ExpectConverged(b, nb);
    ASSERT_TRUE(RunNode(b, a).ok());
    EXPECT_EQ(LiveEntries(*nb.fold), LiveEntries(*a.fold));
    EXPECT_TRUE(LiveEntries(*nb.fold).contains("old.aging"));
    EXPECT_TRUE(LiveEntries(*nb.fold).contains("gap.write"));
    EXPECT_FALSE(LiveEntries(*nb.fold).contains("del.me"));
    EXPECT_GT(nb.by_origin[ChangeOrigin::kRestore], 0);
    EXPECT_EQ(ChangesFrom(nb, ChangeOrigin::kRestore),
              static_cast<uint64_t>(nb.by_origin[ChangeOrigin::kRestore]));
    EXPECT_EQ(Repairs(nb, RepairKind::kRestore, RepairOutcome::kDone), 1u);
    const WatchStats stats = nb.metrics.Snapshot();
    EXPECT_GT(stats.restore_chunks_total, 0u);
    EXPECT_EQ(stats.restore_chunks_done, stats.restore_chunks_total);
    EXPECT_EQ(stats.cursor, nb.fold->ReadMeta()->cursor);
    EXPECT_TRUE(nb.fold->ReadMeta()->eviction_observed);
  }
}

// SPEC §5 waiting for an artifact: a stale one is refused, the watch waits,
// and succeeds once a fresh one is exported. Without one, exit CursorExpired.
TEST(RepairSimTest, StaleArtifactIsRefusedThenAFreshOneIsUsed) {
  SimBucket b;
  b.SetMaxMsgs(15);
  Artifacts arts;
  Node a, nb;
  for (int i = 0; i < 5; ++i) b.Put("k." + std::to_string(i), "v0");
  ASSERT_TRUE(RunNode(b, a).ok());
  arts.Export(*a.fold);  // soon stale
  ASSERT_TRUE(RunNode(b, nb).ok());
  for (int i = 0; i < 40; ++i) {
    b.Put("k." + std::to_string(i % 5), "v" + std::to_string(i));
    ASSERT_TRUE(RunNode(b, a).ok());
  }
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  const std::string before = Picture(*nb.fold);
  Status s = RunNode(b, nb, o);
  EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_NE(s.message().find("(stale)"), std::string::npos) << s.message();
  EXPECT_EQ(Picture(*nb.fold), before);

  o.repair_timeout = std::chrono::seconds(30);
  bool exported = false;
  o.log = [&](std::string_view line) {
    if (!exported && line.find("restore attempt") != std::string_view::npos) {
      exported = true;
      arts.Export(*a.fold);  // the exporter catches up a little later
    }
  };
  s = RunNode(b, nb, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(exported);
  ExpectConverged(b, nb);
}

// SPEC §3 floor guard: a watcher overrun mid-watch trips, folds what it
// received, restores in process and ends equal to the truth. The overrun
// happens inside the hook, i.e. while the watcher is busy.
TEST(RepairSimTest, FloorGuardTripsMidWatchAndRestoresInProcess) {
  SimBucket b;
  b.SetMaxMsgs(20);
  Artifacts arts;
  Node a, nb;
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v0");
  ASSERT_TRUE(RunNode(b, a).ok());
  ASSERT_TRUE(RunNode(b, nb).ok());
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v1");
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  o.batch_size = 3;
  WatchOptions plain = Fast();  // node A's runs
  bool overran = false;
  auto overrun = [&](const Change& c) {
    if (overran || c.origin != ChangeOrigin::kLive) return Status::OK();
    overran = true;
    // While this node is busy, the bucket races past retention; node A
    // keeps up and exports.
    for (int round = 2; round < 8; ++round) {
      for (int i = 0; i < 10; ++i) {
        b.Put("k." + std::to_string(i), "v" + std::to_string(round));
        if (i == 4) {
          EXPECT_TRUE(RunNode(b, a, plain).ok());
        }
      }
      if (round == 4) b.Delete("k.2");
    }
    EXPECT_TRUE(RunNode(b, a, plain).ok());
    arts.Export(*a.fold);
    return Status::OK();
  };
  Status s = RunNode(b, nb, o, nullptr, overrun);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(overran);
  EXPECT_TRUE(Logged(nb, "floor guard trip")) << "no trip";
  EXPECT_GE(nb.metrics.Snapshot().floor_guard_trips, 1u);
  EXPECT_TRUE(Logged(nb, "restore done"));
  ExpectConverged(b, nb);
  EXPECT_EQ(LiveEntries(*nb.fold), LiveEntries(*a.fold));
}

// SPEC §3 catch-up proof: consumer counters may say "nothing pending" while
// messages are in flight (2.10+ updates num_pending asynchronously; a
// clustered replica lags). The proof asks the stream's store instead.
TEST(RepairSimTest, LaggingPendingCounterNeverMovesTheCursorPastMessagesInFlight) {
  SimBucket b;
  for (int i = 0; i < 6; ++i) b.Put("k." + std::to_string(i), "v0");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  for (int i = 0; i < 6; ++i) b.Put("k." + std::to_string(i), "v1");
  b.LagPending(6);       // the counter says 0 pending throughout
  b.StallDeliveries(4);  // and the messages are late
  Status s = RunNode(b, n);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectConverged(b, n);
  for (int i = 0; i < 6; ++i) {
    Entry e;
    ASSERT_TRUE(n.fold->Get("k." + std::to_string(i), &e).ok());
    EXPECT_EQ(e.value, "v1");
  }
}

// SPEC §3: a quiet prefix must not trip while other keys churn past the
// head (the probe proves the quiet stretch before retention reaches it),
// and a real overrun of the prefix must trip.
TEST(RepairSimTest, QuietPrefixSurvivesChurnAndARealOverrunTrips) {
  SimBucket b;
  b.SetMaxMsgs(30);
  b.Put("q.1", "quiet");
  Node n;
  WatchOptions o = Fast();
  o.scope = *Scope::Make({"q."});
  ASSERT_TRUE(RunNode(b, n, o).ok());
  uint64_t churned = 0;
  int reads = 0;
  o.until_caught_up = false;
  std::stop_source stop;
  o.stop = stop.get_token();
  // Once the watch runs (after the session's two opening reads), 5
  // messages elsewhere land between two reads of the stream (a probe is
  // three requests; retention holds 30): the head passes the prefix's last
  // message again and again before the watch ends.
  b.on_read_stream = [&] {
    if (++reads <= 2) return;
    for (int i = 0; i < 5; ++i) b.Put("churn." + std::to_string(churned++ % 50), "x");
    if (reads == 150) stop.request_stop();
  };
  WatchOptions quiet = o;
  Status s = RunNode(b, n, quiet);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GT(churned, 30u * 20);  // retention turned over 20 times
  EXPECT_FALSE(Logged(n, "floor guard trip"));
  ExpectConverged(b, n, o.scope);

  // Now a real overrun: a write in the prefix is evicted before the watch
  // could receive it.
  b.on_read_stream = nullptr;
  std::stop_source stop2;
  WatchOptions overrun = o;
  overrun.stop = stop2.get_token();
  overrun.repair = ExpiryRepair::kRestore;  // no artifacts: the trip ends the watch
  bool done = false;
  reads = 0;
  b.on_read_stream = [&] {
    if (++reads > 500) stop2.request_stop();  // bound: a watch that never trips ends
    if (done || reads < 4) return;            // mid-watch, after the session started
    done = true;
    b.Put("q.2", "lost before delivery");
    for (int i = 0; i < 40; ++i) b.Put("churn." + std::to_string(i), "y");
  };
  s = RunNode(b, n, overrun);
  EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_TRUE(Logged(n, "floor guard trip")) << s.ToString();
}

// The hook sees a repair's changes in the order they commit, the fold's key
// order (review of issue 31, 8: a batch's hooks are held until its reads
// are done, then run in order).
TEST(RepairSimTest, AReconcileShowsTheHookItsDeletesInKeyOrder) {
  SimBucket b;
  for (const char* k : {"a", "b", "c", "d", "e"}) b.Put(k, "1");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  for (const char* k : {"d", "b"}) b.PurgeMarker(b.Delete(k));
  b.Put("f", "1");
  WatchOptions o = Fast();
  o.reconcile_every = std::chrono::milliseconds(1);
  o.until_caught_up = false;
  std::stop_source stop;
  o.stop = stop.get_token();
  o.log = [&](std::string_view line) {
    if (line.find("reconcile done") != std::string_view::npos) stop.request_stop();
  };
  std::vector<std::string> reconciled;
  Status s = RunNode(b, n, o, nullptr, [&](const Change& c) {
    if (c.origin == ChangeOrigin::kReconcile) reconciled.emplace_back(c.key);
    return Status::OK();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectConverged(b, n);
  EXPECT_EQ(reconciled, (std::vector<std::string>{"b", "d"}));
}

// SPEC §5 Reconcile: a delete whose marker was purged while this node was
// behind, in the middle of the stream (no gap at the head to notice).
TEST(RepairSimTest, ReconcileRemovesAKeyWhoseDeleteMarkerWasPurged) {
  SimBucket b;
  b.Put("a", "1");
  b.Put("b", "1");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  const uint64_t marker = b.Delete("a");
  b.Put("c", "1");
  b.PurgeMarker(marker);
  WatchOptions o = Fast();
  o.reconcile_every = std::chrono::milliseconds(1);
  o.until_caught_up = false;
  std::stop_source stop;
  o.stop = stop.get_token();
  o.log = [&](std::string_view line) {
    if (line.find("reconcile done") != std::string_view::npos) stop.request_stop();
  };
  Status s = RunNode(b, n, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectConverged(b, n);
  EXPECT_EQ(n.by_origin[ChangeOrigin::kReconcile], 1);
}

// SPEC §5 recreated stream: never resumed; under auto the fold is rebuilt
// against the new stream and equals the new bucket.
TEST(RepairSimTest, RecreatedStreamIsRebuiltUnderAuto) {
  SimBucket b;
  for (int i = 0; i < 8; ++i) b.Put("k." + std::to_string(i), "old");
  b.Delete("k.1");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  b.Recreate();
  b.Put("k.2", "new");  // low sequences: must win over old-stream revisions
  b.Put("k.9", "new");
  b.Put("k.1", "back");
  Status s = RunNode(b, n);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(LiveEntries(*n.fold), b.Truth(Scope()));
  EXPECT_EQ(n.hook_view, LiveEntries(*n.fold));
  EXPECT_EQ(n.fold->ReadMeta()->stream_created, b.ReadStream()->created);
  // A second start resumes normally.
  b.Put("k.3", "later");
  ASSERT_TRUE(RunNode(b, n).ok());
  EXPECT_EQ(LiveEntries(*n.fold), b.Truth(Scope()));
}

// An apply hook that keeps `key`'s fold entry as it stands when the
// watch's first live change of it comes (before that change commits).
std::function<Status(const Change&)> FoldEntryBeforeItsDelivery(Node& n, std::string key,
                                                                std::optional<Entry>* out) {
  return [&n, key = std::move(key), out](const Change& c) {
    if (c.key == key && c.origin == ChangeOrigin::kLive && !*out) {
      Entry e;
      if (n.fold->Get(key, &e).ok()) *out = e;
    }
    return Status::OK();
  };
}

// As a restore does (below), a relist onto a recreated stream keeps a
// surviving key at revision 0 with its value until its new message comes.
TEST(RepairSimTest, ARelistOntoARecreatedStreamKeepsASurvivingKeysValue) {
  SimBucket b;
  for (int i = 0; i < 4; ++i) b.Put("k." + std::to_string(i), "old");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  b.Recreate();
  b.Put("k.2", "new");
  std::optional<Entry> before_delivery;
  Status s = RunNode(b, n, Fast(), nullptr, FoldEntryBeforeItsDelivery(n, "k.2", &before_delivery));
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(before_delivery.has_value()) << "the new stream's k.2 was never delivered";
  EXPECT_EQ(*before_delivery, (Entry{0, false, "old"}));
  EXPECT_EQ(LiveEntries(*n.fold), b.Truth(Scope()));
}

TEST(RepairSimTest, RecreatedEvictingStreamIsRebuiltFromAnArtifactOfTheNewStream) {
  SimBucket b;
  b.SetMaxMsgs(10);
  for (int i = 0; i < 8; ++i) b.Put("k." + std::to_string(i), "old");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  b.Recreate();
  Artifacts arts;
  Node a;
  for (int i = 0; i < 30; ++i) {
    b.Put("n." + std::to_string(i % 12), "new" + std::to_string(i));
    ASSERT_TRUE(RunNode(b, a).ok());
  }
  arts.Export(*a.fold);
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  Status s = RunNode(b, n, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(LiveEntries(*n.fold), b.Truth(Scope()));
  EXPECT_EQ(LiveEntries(*n.fold), LiveEntries(*a.fold));
  EXPECT_EQ(n.hook_view, LiveEntries(*n.fold));
}

// A rebuild keeps a key only the fold holds, which the new stream lists
// live, at revision 0 with its value until the new stream's message for it
// comes: the restore reads the fold's values on a rebase (it reads none
// otherwise).
TEST(RepairSimTest, ARestoreOntoARecreatedStreamKeepsASurvivingKeysValue) {
  SimBucket b;
  b.SetMaxMsgs(10);
  for (int i = 0; i < 8; ++i) b.Put("k." + std::to_string(i), "old");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  b.Recreate();
  Artifacts arts;
  Node a;
  for (int i = 0; i < 30; ++i) {
    b.Put("n." + std::to_string(i % 12), "new" + std::to_string(i));
    ASSERT_TRUE(RunNode(b, a).ok());
  }
  arts.Export(*a.fold);
  b.Put("k.3", "new");  // after the artifact: listed live, not in it
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  std::optional<Entry> before_delivery;
  Status s = RunNode(b, n, o, nullptr, FoldEntryBeforeItsDelivery(n, "k.3", &before_delivery));
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(before_delivery.has_value()) << "the new stream's k.3 was never delivered";
  EXPECT_EQ(*before_delivery, (Entry{0, false, "old"}));
  EXPECT_EQ(LiveEntries(*n.fold), b.Truth(Scope()));
  EXPECT_EQ(n.hook_view, LiveEntries(*n.fold));
}

// The fold's eviction memo is about the stream it mirrored (issue 31, 5):
// an old stream that evicted, recreated without limits, has a listing that
// is the truth. Auto rebuilds by relist, with no artifact (none of the new
// stream could ever be published where the old one's pointer stands), and
// the rebuilt fold's memo is the new stream's.
TEST(RepairSimTest, ARecreatedStreamWithoutLimitsIsRelistedDespiteTheOldStreamsMemo) {
  SimBucket b;
  b.SetMaxMsgs(10);
  Node n;
  for (int i = 0; i < 30; ++i) {
    b.Put("k." + std::to_string(i % 12), "old" + std::to_string(i));
    ASSERT_TRUE(RunNode(b, n).ok());
  }
  ASSERT_TRUE(n.fold->ReadMeta()->eviction_observed);
  b.Recreate();
  b.SetMaxMsgs(0);
  for (int i = 0; i < 5; ++i) b.Put("n." + std::to_string(i), "new");
  Status s = RunNode(b, n);  // auto, no artifacts
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(LiveEntries(*n.fold), b.Truth(Scope()));
  EXPECT_EQ(n.hook_view, LiveEntries(*n.fold));
  EXPECT_FALSE(n.fold->ReadMeta()->eviction_observed);
  EXPECT_EQ(n.fold->ReadMeta()->stream_created, b.ReadStream()->created);
}

// Issue 32, 11: the watch that rebuilt the fold for the new stream drops
// the old stream's memo at once, not at its next restart: a gap on the
// new stream (history 1, no limits) right after the rebuild is relisted in
// the same run. Mutant reanchor-keep-memo refuses it (no artifacts).
TEST(RepairSimTest, AfterARebuildTheSameRunRelistsTheNewStream) {
  SimBucket b;
  b.SetMaxMsgs(10);
  Node n;
  for (int i = 0; i < 30; ++i) {
    b.Put("k." + std::to_string(i % 12), "old" + std::to_string(i));
    ASSERT_TRUE(RunNode(b, n).ok());
  }
  ASSERT_TRUE(n.fold->ReadMeta()->eviction_observed);
  b.Recreate();
  b.SetMaxMsgs(0);
  b.SetHistoryOne(true);
  for (int i = 0; i < 5; ++i) b.Put("n." + std::to_string(i), "new");
  bool gap = false;
  b.on_read_stream = [&] {
    auto meta = n.fold->ReadMeta();
    if (gap || !meta.ok() || meta->stream_created != b.created()) return;
    gap = true;  // rebuilt: every key rewritten twice, the cursor's next gone
    for (int r = 0; r < 2; ++r) {
      for (int i = 0; i < 5; ++i) b.Put("n." + std::to_string(i), "again" + std::to_string(r));
    }
  };
  Status s = RunNode(b, n);
  b.on_read_stream = nullptr;
  ASSERT_TRUE(gap) << "the fold was never rebuilt";
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(LiveEntries(*n.fold), b.Truth(Scope()));
  EXPECT_FALSE(n.fold->ReadMeta()->eviction_observed);
}

// n mirrors 40 writes of a stream that is then recreated with max_msgs 10;
// a mirrors the new stream's first 10 writes and exports them to `arts`,
// before the new stream evicts anything.
void MirrorThenRecreate(SimBucket& b, Node& n, Node& a, Artifacts& arts) {
  for (int i = 0; i < 40; ++i) b.Put("k." + std::to_string(i % 8), "old");
  ASSERT_TRUE(RunNode(b, n).ok());
  ASSERT_EQ(n.fold->ReadMeta()->cursor, 40u);
  b.Recreate();
  b.SetMaxMsgs(10);
  for (int i = 0; i < 10; ++i) {
    b.Put("n." + std::to_string(i), "new");
    ASSERT_TRUE(RunNode(b, a).ok());
  }
  arts.Export(*a.fold);
}

// A restore of a recreated stream re-anchors the watch before anything
// else can fail: a stream read failing right after it must not leave the
// loop at the old stream's cursor, whose next commit (the new stream's
// eviction memo, pending) would carry that cursor past what the fold holds.
// The artifact then leaves retention, so no second restore can undo it.
TEST(RepairSimTest, AFailedReadRightAfterARestoreNeverCommitsTheOldStreamsCursor) {
  SimBucket b;
  Node n, a;
  Artifacts arts;
  MirrorThenRecreate(b, n, a, arts);
  int reads = 0;
  bool failed = false;
  b.on_read_stream = [&] {
    ++reads;
    // The session found the stream recreated; by the repair's read it has
    // evicted: the memo is new to n, and stays in its pending batch.
    if (reads == 2) b.Put("n.0", "evicts");
    auto meta = n.fold->ReadMeta();
    if (failed || !meta.ok() || meta->cursor != 10u || meta->stream_created != b.created()) {
      return;
    }
    failed = true;  // the restore's final commit is in: fail the next read
    for (int i = 0; i < 30; ++i) b.Put("n." + std::to_string(i % 10), "later");
    b.FailNextCalls(1);
  };
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  Status s = RunNode(b, n, o);
  b.on_read_stream = nullptr;
  ASSERT_TRUE(failed) << "the restore never finished";
  EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_EQ(n.fold->ReadMeta()->cursor, 10u) << "the old stream's cursor reached the fold";
  EXPECT_EQ(LiveEntries(*n.fold), LiveEntries(*a.fold));
}

// The same failed read with the artifact still usable: the watch goes on
// and, run until caught up, aims at the new stream's head, not the old's.
TEST(RepairSimTest, AFailedReadRightAfterARestoreAimsTheCatchUpAtTheNewStream) {
  SimBucket b;
  Node n, a;
  Artifacts arts;
  MirrorThenRecreate(b, n, a, arts);
  std::stop_source stop;
  int reads = 0;
  bool failed = false;
  b.on_read_stream = [&] {
    if (++reads == 2) b.Put("n.0", "evicts");
    if (reads > 2000) stop.request_stop();  // aimed at the old stream's head: never there
    auto meta = n.fold->ReadMeta();
    if (failed || !meta.ok() || meta->cursor != 10u || meta->stream_created != b.created()) {
      return;
    }
    failed = true;
    b.FailNextCalls(1);
  };
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  o.stop = stop.get_token();
  Status s = RunNode(b, n, o);
  b.on_read_stream = nullptr;
  ASSERT_TRUE(failed) << "the restore never finished";
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(stop.stop_requested()) << "the catch-up aimed at the old stream's head";
  EXPECT_EQ(n.fold->ReadMeta()->cursor, b.last_seq());
  EXPECT_EQ(LiveEntries(*n.fold), b.Truth(Scope()));
}

// Unanchored fold (data, no cursor): repaired like an expiry at 0,
// never trusted blindly.
TEST(RepairSimTest, UnanchoredFoldIsRepairedNotTrusted) {
  SimBucket b;
  b.Put("a", "1");
  b.Put("b", "1");
  Node n;
  FoldCommit stale;  // as if a torn first checkpoint left data, no cursor
  stale.entries["gone"] = Entry{1, false, "deleted long ago"};
  stale.entries["a"] = Entry{1, false, "1"};
  ASSERT_TRUE(n.fold->Commit(stale).ok());
  n.hook_view = LiveEntries(*n.fold);
  Status s = RunNode(b, n);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(LiveEntries(*n.fold), b.Truth(Scope()));
  EXPECT_EQ(n.by_origin[ChangeOrigin::kRelist], 1);
}

// SPEC §5 cursor-less start on a bucket that has evicted: seeded from an
// artifact (a state sync would miss what aged out); with none, refused; with
// repair none, a state sync that warns.
TEST(RepairSimTest, FreshStartOnAnEvictedBucketRestoresOrRefusesOrWarns) {
  SimBucket b;
  b.SetMaxMsgs(10);
  Artifacts arts;
  Node a;
  b.Put("aged", "out");
  for (int i = 0; i < 30; ++i) {
    b.Put("k." + std::to_string(i % 5), "v" + std::to_string(i));
    ASSERT_TRUE(RunNode(b, a).ok());
  }
  Node refused;
  Status s = RunNode(b, refused);
  EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_NE(s.message().find("--repair none"), std::string::npos);
  EXPECT_TRUE(LiveEntries(*refused.fold).empty());

  arts.Export(*a.fold);
  Node seeded;
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  s = RunNode(b, seeded, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectConverged(b, seeded);
  EXPECT_TRUE(LiveEntries(*seeded.fold).contains("aged"));

  Node first;
  o = Fast();
  o.repair = ExpiryRepair::kNone;
  s = RunNode(b, first, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Logged(first, "repair none: re-listing"));
  EXPECT_FALSE(LiveEntries(*first.fold).contains("aged"));  // what none accepts
}

// SPEC §5 Restore is chunked and crash-safe: a crash at any commit of the
// restore, then a restart, completes it; the hook's view equals the fold
// and never regresses.
TEST(RepairSimTest, CrashAtEveryRestoreCommitThenRestartConverges) {
  // One history, one artifact, one stale fold of node B; each schedule runs
  // B's restore over a fresh real RocksDB copy of that fold.
  SimBucket b;
  b.SetMaxMsgs(12);
  Artifacts arts;
  Node a, stale;
  for (int i = 0; i < 12; ++i) b.Put("k." + std::to_string(i), "v0");
  ASSERT_TRUE(RunNode(b, a).ok());
  ASSERT_TRUE(RunNode(b, stale).ok());
  for (int r = 1; r < 5; ++r) {
    for (int i = 0; i < 12; ++i) b.Put("k." + std::to_string(i), "v" + std::to_string(r));
    ASSERT_TRUE(RunNode(b, a).ok());
  }
  b.Delete("k.0");
  ASSERT_TRUE(RunNode(b, a).ok());
  arts.Export(*a.fold, 64);  // a chunk every few entries
  FoldCommit copy;
  ASSERT_TRUE(stale.fold
                  ->Scan("", true,
                         [&](std::string_view k, const Entry& e) {
                           copy.entries.emplace(std::string(k), e);
                           return true;
                         })
                  .ok());
  const FoldMeta meta = *stale.fold->ReadMeta();
  copy.cursor = meta.cursor;
  copy.bucket = meta.bucket;
  copy.scope = meta.scope;
  copy.stream_created = meta.stream_created;
  TestDir dir;
  int schedules = 0;
  for (Fault fault :
       {Fault::kCrashBefore, Fault::kCrashAfter, Fault::kFailBefore, Fault::kFailAfter}) {
    for (int at = 1;; ++at) {
      FoldOptions fo;
      fo.sync = false;  // process crashes are what this models
      auto rocks = OpenRocksFold(dir.path() + "/f" + std::to_string(++schedules), fo);
      ASSERT_TRUE(rocks.ok());
      Node nb;
      nb.fold = std::move(rocks).value();
      ASSERT_TRUE(nb.fold->Commit(copy).ok());
      nb.hook_view = LiveEntries(*nb.fold);
      for (const auto& [k, e] : nb.hook_view) nb.last_revision[k] = e.revision;
      WatchOptions o = Fast();
      o.artifacts = arts.source();
      o.batch_size = 3;  // several restore chunks
      FaultFold faulty(*nb.fold);
      faulty.Arm(at, fault);
      Status s = RunNode(b, nb, o, &faulty);
      const bool hit = faulty.attempts() >= at;
      if (faulty.crashed()) {
        // The process died: a new one starts over on the same store, and
        // its hook state is rebuilt from the fold (what a service does).
        nb.hook_view = LiveEntries(*nb.fold);
        nb.last_revision.clear();
        for (const auto& [k, e] : nb.hook_view) nb.last_revision[k] = e.revision;
        s = RunNode(b, nb, o);
      }
      ASSERT_TRUE(s.ok()) << FaultName(fault) << " at " << at << ": " << s.ToString();
      EXPECT_EQ(LiveEntries(*nb.fold), b.Truth(Scope())) << FaultName(fault) << " at " << at;
      EXPECT_EQ(nb.hook_view, LiveEntries(*nb.fold)) << FaultName(fault) << " at " << at;
      EXPECT_TRUE(nb.violations.empty()) << nb.violations.front();
      if (!hit) break;
    }
  }
  EXPECT_GT(schedules, 12);
}

// SPEC §3: a nats-server 2.11 limit marker (Nats-Marker-Reason, no
// KV-Operation) is a delete, never an empty value. The header mapping is
// kv_subjects (KvOperationTest); here the watch folds such a message.
TEST(RepairSimTest, LimitMarkersFoldAsDeletes) {
  SimBucket b;
  b.Put("a", "1");
  b.Put("b", "1");
  b.LimitMarker("a");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  ExpectConverged(b, n);
  Entry e;
  ASSERT_TRUE(n.fold->Get("a", &e).ok());
  EXPECT_TRUE(e.deleted);
}

// A key listing races writes: a key rewritten while it runs may be missing
// from it (its old message superseded, the new one past the listing's
// revision). Relist must not delete it, not even for a moment.
TEST(RepairSimTest, KeyRewrittenDuringTheListingIsNeverDeleted) {
  SimBucket b;
  b.SetHistoryOne(true);
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v0");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  for (int r = 1; r < 5; ++r) {
    for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v" + std::to_string(r));
  }
  bool raced = false;
  b.during_listing = [&] {
    if (raced) return;
    raced = true;
    b.Put("k.3", "hot");  // supersedes the message the listing would name
  };
  Status s = RunNode(b, n);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(raced);
  ExpectConverged(b, n);
  EXPECT_EQ(n.by_origin[ChangeOrigin::kRelist], 0);
}

// SPEC §5 Restore (e): the whole artifact verifies before the fold is
// touched. A damaged last chunk is found before the first chunk is
// written: the restore is refused in the end, and neither the fold nor the
// apply hook saw any of the artifact.
TEST(RepairSimTest, DamagedArtifactIsRefusedBeforeAnyChunkIsWritten) {
  SimBucket b;
  b.SetMaxMsgs(30);
  Artifacts arts;
  Node a, nb;
  for (int i = 0; i < 20; ++i) b.Put("k." + std::to_string(i), "v0");
  ASSERT_TRUE(RunNode(b, a).ok());
  ASSERT_TRUE(RunNode(b, nb).ok());
  for (int round = 1; round <= 4; ++round) {
    for (int i = 0; i < 20; ++i) {
      b.Put("k." + std::to_string(i), "v" + std::to_string(round) + std::string(40, 'x'));
    }
    ASSERT_TRUE(RunNode(b, a).ok());  // A keeps up
  }
  arts.Export(*a.fold, /*chunk_bytes=*/256);  // many chunks
  arts.CorruptLastChunk();
  const auto before = LiveEntries(*nb.fold);
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  Status s = RunNode(b, nb, o);
  EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_EQ(LiveEntries(*nb.fold), before);
  EXPECT_EQ(nb.by_origin[ChangeOrigin::kRestore], 0);
  EXPECT_EQ(Repairs(nb, RepairKind::kRestore, RepairOutcome::kRefused), 1u);
}

// A node behind on a bucket that evicts by volume, and an artifact from a
// node that kept up: the setting of the fold digest tests below.
struct BehindAndArtifact {
  SimBucket b;
  Artifacts arts;
  Node a, nb;
  BehindAndArtifact() {
    b.SetMaxMsgs(30);
    for (int i = 0; i < 20; ++i) b.Put("k." + std::to_string(i), "v0");
    EXPECT_TRUE(RunNode(b, a).ok());
    EXPECT_TRUE(RunNode(b, nb).ok());
    for (int round = 1; round <= 4; ++round) {
      for (int i = 0; i < 20; ++i) b.Put("k." + std::to_string(i), "v" + std::to_string(round));
      EXPECT_TRUE(RunNode(b, a).ok());
    }
    arts.Export(*a.fold, /*chunk_bytes=*/256);
  }
  WatchOptions Options() {
    WatchOptions o = Fast();
    o.artifacts = arts.source();
    return o;
  }
};

// Issue 35: an artifact whose records do not digest to its manifest's fold
// digest (an exporter that lost an entry, or a manifest edited and
// re-checksummed) is refused before the fold is touched. Mutant
// fold-digest-ignored restores it.
TEST(RepairSimTest, AnArtifactThatDisagreesWithItsFoldDigestIsRefusedBeforeAnyWrite) {
  BehindAndArtifact t;
  t.arts.RewriteNewestManifest([](wire::Manifest* m) { m->set_fold_digest(std::string(32, 'x')); });
  const auto before = LiveEntries(*t.nb.fold);
  Status s = RunNode(t.b, t.nb, t.Options());
  EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_NE(s.message().find("fold digest"), std::string::npos) << s.ToString();
  EXPECT_EQ(LiveEntries(*t.nb.fold), before);
  EXPECT_EQ(t.nb.by_origin[ChangeOrigin::kRestore], 0);
}

// An artifact whose chunks are listed out of key order (each in order by
// itself; a manifest without a fold digest, as older exporters wrote) is
// refused by the verification pass, which checks the order across chunk
// boundaries, before the merge writes a chunk.
TEST(RepairSimTest, AnArtifactWhoseChunksAreOutOfOrderIsRefusedBeforeAnyWrite) {
  BehindAndArtifact t;
  t.b.Put("k.0", "v5");
  ASSERT_TRUE(RunNode(t.b, t.a).ok());
  t.arts.Export(*t.a.fold, /*chunk_bytes=*/1);  // a chunk per key
  t.arts.RewriteNewestManifest([](wire::Manifest* m) {
    ASSERT_GE(m->chunks_size(), 2);
    m->clear_fold_digest();
    m->mutable_chunks()->SwapElements(0, 1);
  });
  const auto before = LiveEntries(*t.nb.fold);
  Status s = RunNode(t.b, t.nb, t.Options());
  EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_NE(s.message().find("order"), std::string::npos) << s.ToString();
  EXPECT_EQ(LiveEntries(*t.nb.fold), before);
  EXPECT_EQ(t.nb.by_origin[ChangeOrigin::kRestore], 0);
}

// SPEC §5 Relist: retention is read again after the listing. A bucket that
// began evicting while the listing ran may have left a live key out of it
// (the key aged out): the listing proves nothing then, the relist is
// abandoned and the repair decided afresh (refused here: no artifact).
TEST(RepairSimTest, BucketThatBeginsEvictingDuringTheListingNeverCostsALiveKey) {
  SimBucket b;
  b.SetHistoryOne(true);  // keeps current values: the listing is the truth
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v0");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  // Every key rewritten: history 1 drops the old messages, the cursor
  // expires, and auto relists.
  uint64_t k0_last = 0;
  for (int r = 1; r <= 3; ++r) {
    for (int i = 0; i < 10; ++i) {
      const uint64_t seq = b.Put("k." + std::to_string(i), "v" + std::to_string(r));
      if (i == 0) k0_last = seq;
    }
  }
  bool raced = false;
  b.during_listing = [&] {
    if (raced) return;
    raced = true;
    b.SetMaxMsgs(1000);       // the bucket now evicts current values...
    b.EvictThrough(k0_last);  // ...and k.0, live, ages out before it is listed
  };
  const auto before = LiveEntries(*n.fold);
  Status s = RunNode(b, n);
  EXPECT_TRUE(raced);
  EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_TRUE(Logged(n, "relist abandoned")) << "the listing was trusted";
  EXPECT_TRUE(n.violations.empty()) << n.violations.front();
  EXPECT_EQ(LiveEntries(*n.fold), before);
}

// SPEC §5 restore on an evicting bucket: a key the listing missed (it was
// rewritten while the listing ran) and whose rewrite then ages out before
// its last message is read has no message left, yet it is live. Retention
// is read again after that read: it passed the artifact's cursor, so the
// absence proves nothing, and the attempt is retried (with a fresher
// artifact) instead of deleting the key. Found by the model's deep tier.
TEST(RepairSimTest, KeyEvictedWhileItsLastMessageIsReadIsNeverDeleted) {
  SimBucket b;
  b.SetHistoryOne(true);
  b.SetMaxMsgs(1000);  // evicts current values; the evictions here are by hand
  Artifacts arts;
  Node a, nb;
  b.Put("a", "v1");
  ASSERT_TRUE(RunNode(b, nb).ok());
  ASSERT_TRUE(RunNode(b, a).ok());
  b.Delete("a");
  ASSERT_TRUE(RunNode(b, a).ok());
  arts.Export(*a.fold);  // cursor 2: a is deleted there
  b.Put("b", "v1");
  b.Put("a", "v2");  // 4; history 1: nb (cursor 1) has expired
  bool rewritten = false, evicted = false;
  b.during_listing = [&] {  // the listing runs through 4
    if (rewritten) return;
    rewritten = true;
    b.Put("a", "v3");  // 5 supersedes 4: the listing names no a
  };
  b.before_last_of_key = [&] {
    if (evicted) return;
    evicted = true;
    b.Put("c", "v1");
    EXPECT_TRUE(RunNode(b, a).ok());  // the exporter sees a = v3
    arts.Export(*a.fold);
    b.EvictThrough(5);  // a = v3 ages out while nb looks at it
  };
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  o.repair_timeout = std::chrono::seconds(30);
  Status s = RunNode(b, nb, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(rewritten);
  EXPECT_TRUE(evicted);
  ExpectConverged(b, nb);  // no delete of a at 4, where a = v2 was live
  EXPECT_EQ(LiveEntries(*nb.fold).at("a").value, "v3");
}

// Before any repair the watcher folds and flushes what it received,
// retrying a failed commit: a batch left re-queued would be invisible to the
// key-set diff and could resurrect a key deleted meanwhile.
TEST(RepairSimTest, RepairFlushesARequeuedBatchFirst) {
  SimBucket b;
  b.Put("a", "1");
  Node n;
  TestDir dir;
  auto rocks = OpenRocksFold(dir.path() + "/fold", FoldOptions{.sync = false});
  ASSERT_TRUE(rocks.ok());
  n.fold = std::move(rocks).value();
  ASSERT_TRUE(RunNode(b, n).ok());
  b.Put("k", "soon deleted");
  FaultFold faulty(*n.fold);
  WatchOptions o = Fast();
  o.until_caught_up = false;
  o.reconcile_every = std::chrono::milliseconds(1);
  std::stop_source stop;
  o.stop = stop.get_token();
  o.log = [&](std::string_view line) {
    if (line.find("reconcile done") != std::string_view::npos) stop.request_stop();
  };
  bool once = false;
  auto race = [&](const Change& c) {
    if (once || c.key != "k") return Status::OK();
    once = true;
    // The batch holding k fails to commit once; meanwhile k is deleted and
    // its marker purged, so only a key-set diff can delete it.
    faulty.Arm(faulty.attempts() + 1, Fault::kFailBefore);
    b.PurgeMarker(b.Delete("k"));
    return Status::OK();
  };
  Status s = RunNode(b, n, o, &faulty, race);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(once);
  EXPECT_EQ(LiveEntries(*n.fold), b.Truth(Scope()));
  EXPECT_EQ(n.hook_view, LiveEntries(*n.fold));
}

// ---------------------------------------------------------------------------
// Per-message TTL and limit markers (SPEC §4, nats-server 2.11+). An expiry
// that empties a key writes a marker, and the marker expires in turn with
// no trace; interior removals leave first_seq where it was. A position is
// resumable only within the marker window of its anchor.

// The bucket and the watch share one clock, so the server's time passes as
// the watcher's does.
struct TtlBucket {
  InstantSleepClock clock;
  SimBucket b;
  explicit TtlBucket(std::chrono::milliseconds marker_ttl) {
    b.SetHistoryOne(true);
    b.SetMessageTtl(marker_ttl);
    b.set_time_clock(&clock);
  }
  WatchOptions Options(ExpiryRepair repair = ExpiryRepair::kAuto) {
    WatchOptions o = Fast();
    o.clock = &clock;
    o.repair = repair;
    return o;
  }
  // A node that mirrored the bucket from empty (repair none: on a TTL
  // bucket a first start needs an artifact otherwise).
  void Start(Node& n) {
    Status s = RunNode(b, n, Options(ExpiryRepair::kNone));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
};

// Counts the relists a watch finishes and stops it after `limit`: a watch
// that relisted again and again (a re-anchor lost) ends instead of hanging.
struct RelistCounter {
  std::stop_source stop;
  int done = 0;
  void Arm(WatchOptions& o, int limit = 3) {
    o.stop = stop.get_token();
    o.log = [this, limit](std::string_view l) {
      if (l.find("relist done") != std::string_view::npos && ++done >= limit) stop.request_stop();
    };
  }
};

// Issue 30's first scenario: B stops; while it is down keys created with
// a TTL expire, their markers are written and expire too. Nothing in the
// stream says those keys are gone, so B must not resume; but an expiry is
// a delete, so the key listing is the truth: B relists, with no artifact,
// and equals the truth. The relist anchors the cursor at the listing: a
// restart right after needs no repair. Mutants: window-ignore-marker-window
// resumes and keeps the expired keys; retention-expiry-evicts refuses
// (no artifact); relist-keep-old-anchor relists again and again.
TEST(RepairSimTest, CursorOlderThanTheMarkerTtlIsRelistedNotResumed) {
  TtlBucket t(std::chrono::seconds(2));
  for (int i = 0; i < 20; ++i) t.b.Put("p." + std::to_string(i), "v");
  for (int i = 0; i < 5; ++i) {
    t.b.PutWithTtl("ttl." + std::to_string(i), "v", std::chrono::seconds(4));
  }
  Node b;
  t.Start(b);
  for (int i = 0; i < 5; ++i) {
    t.b.PutWithTtl("late." + std::to_string(i), "v", std::chrono::seconds(1));
  }
  for (int i = 0; i < 10; ++i) t.b.Put("q." + std::to_string(i), "v");
  t.b.AdvanceTime(std::chrono::seconds(10));  // every TTL and every marker gone
  ASSERT_EQ(t.b.Truth(Scope()).count("ttl.0"), 0u);

  WatchOptions o = t.Options();
  RelistCounter relists;
  relists.Arm(o);
  Status s = RunNode(t.b, b, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Logged(b, "limit markers")) << "the repair's cause";
  EXPECT_EQ(relists.done, 1);
  EXPECT_EQ(b.by_origin[ChangeOrigin::kRestore], 0);
  ExpectConverged(t.b, b);
  EXPECT_GT(b.fold->ReadMeta()->cursor_time_ns, t.b.NowNs() - int64_t{1000000000});
  EXPECT_FALSE(b.fold->ReadMeta()->eviction_observed);

  // Restarted at once: the relist's anchor is inside the window.
  t.b.Put("q.new", "v");
  WatchOptions again = t.Options();
  RelistCounter none;
  none.Arm(again);
  ASSERT_TRUE(RunNode(t.b, b, again).ok());
  EXPECT_EQ(none.done, 0);
  ExpectConverged(t.b, b);
}

// The relist's anchor is the server time read BEFORE its listing: a key
// listed live that expires while the listing finishes has its marker
// written after that read, and the resume must read the marker inside the
// window of that read. Here the listing takes longer than the marker TTL
// (the clock jumps between the listing and the read that ends it), so the
// marker of ttl.x is gone by the time the watch reads on: anchored at the
// listing's start the cursor is already outside the window and the watch
// relists again (ttl.x is no longer listed); anchored at the end of the
// listing it would resume, find nothing of ttl.x, and keep it forever.
TEST(RepairSimTest, ARelistAnchorsAtTheServerTimeReadBeforeItsListing) {
  TtlBucket t(std::chrono::seconds(2));
  for (int i = 0; i < 10; ++i) t.b.Put("p." + std::to_string(i), "v");
  t.b.PutWithTtl("ttl.x", "v", std::chrono::seconds(10));
  Node b;
  t.Start(b);
  ASSERT_EQ(LiveEntries(*b.fold).count("ttl.x"), 1u);
  for (int i = 0; i < 5; ++i) t.b.Put("q." + std::to_string(i), "v");
  t.b.AdvanceTime(std::chrono::seconds(9));  // B down past the marker window; ttl.x still live

  bool listing = false, slowed = false;
  t.b.during_listing = [&] { listing = !slowed; };
  t.b.on_read_stream = [&] {
    if (!listing) return;
    // The read that ends the first listing comes 3.2 s after it began:
    // ttl.x (listed live) expired meanwhile and its marker expired too.
    listing = false;
    slowed = true;
    t.b.AdvanceTime(std::chrono::milliseconds(3200));
  };
  WatchOptions o = t.Options();
  RelistCounter relists;
  relists.Arm(o);
  Status s = RunNode(t.b, b, o);
  t.b.during_listing = nullptr;
  t.b.on_read_stream = nullptr;
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(slowed);
  ASSERT_EQ(t.b.Truth(Scope()).count("ttl.x"), 0u);
  ExpectConverged(t.b, b);
  EXPECT_EQ(LiveEntries(*b.fold).count("ttl.x"), 0u);
  EXPECT_EQ(relists.done, 2) << "the slow listing's anchor was outside the window at its end";
}

// The same on a bucket that also evicts by volume (max_msgs, discard old,
// and it has evicted): there the listing is not the truth, so B, down past
// the marker window, refuses without an artifact (fold untouched) and
// restores from a mirror that stayed up. Mutant window-ignore-marker-window
// resumes and keeps the expired keys.
TEST(RepairSimTest, OnAVolumeLimitedTtlBucketAnOldCursorNeedsAnArtifact) {
  TtlBucket t(std::chrono::seconds(2));
  t.b.SetMaxMsgs(40);
  for (int i = 0; i < 20; ++i) t.b.Put("p." + std::to_string(i), "v");
  for (int i = 0; i < 5; ++i) {
    t.b.PutWithTtl("ttl." + std::to_string(i), "v", std::chrono::seconds(4));
  }
  Node a, b;
  t.Start(a);
  t.Start(b);
  for (int i = 0; i < 5; ++i) {
    t.b.PutWithTtl("late." + std::to_string(i), "v", std::chrono::seconds(1));
  }
  for (int i = 0; i < 30; ++i) t.b.Put("q." + std::to_string(i % 15), "v" + std::to_string(i));
  ASSERT_GT(t.b.ReadStream()->first_seq, 1u) << "the volume limit has evicted";
  // A stays up: it folds every marker while it is still in the stream.
  for (int step = 0; step < 20; ++step) {
    t.b.AdvanceTime(std::chrono::milliseconds(500));
    Status s = RunNode(t.b, a, t.Options());
    ASSERT_TRUE(s.ok()) << "step " << step << ": " << s.ToString();
  }
  ExpectConverged(t.b, a);
  ASSERT_EQ(LiveEntries(*a.fold).count("ttl.0"), 0u);
  ASSERT_EQ(LiveEntries(*a.fold).count("late.0"), 0u);

  const FoldMeta before = *b.fold->ReadMeta();
  const auto entries_before = LiveEntries(*b.fold);
  Status refused = RunNode(t.b, b, t.Options());
  ASSERT_TRUE(refused.IsCursorExpired()) << refused.ToString();
  EXPECT_EQ(LiveEntries(*b.fold), entries_before);
  EXPECT_EQ(b.fold->ReadMeta()->cursor, before.cursor);
  EXPECT_EQ(b.fold->ReadMeta()->eviction_cause, "volume");

  Artifacts arts;
  arts.Export(*a.fold);
  WatchOptions o = t.Options();
  o.artifacts = arts.source();
  Status s = RunNode(t.b, b, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectConverged(t.b, b);
  EXPECT_EQ(LiveEntries(*b.fold), LiveEntries(*a.fold));
}

// Issue 30's "add a node": a new fold on a quiet TTL bucket whose keys and
// markers expired long ago joins by a state sync, no artifact needed.
// Mutant retention-expiry-evicts refuses it.
TEST(RepairSimTest, ANewFoldJoinsAQuietTtlBucketWithoutAnArtifact) {
  TtlBucket t(std::chrono::seconds(1));
  for (int i = 0; i < 10; ++i) t.b.Put("p." + std::to_string(i), "v");
  for (int i = 0; i < 10; ++i) {
    t.b.PutWithTtl("ttl." + std::to_string(i), "v", std::chrono::seconds(1));
  }
  t.b.AdvanceTime(std::chrono::seconds(30));
  Node n;
  Status s = RunNode(t.b, n, t.Options());
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectConverged(t.b, n);
  EXPECT_EQ(LiveEntries(*n.fold).size(), 10u);
}

// A restore whose stream stored something after the artifact's cursor
// keeps the artifact's anchor: what was stored after it (here y's limit
// marker, written before the restore) must still be read inside the window
// of that anchor. Re-anchored at the restore's own check instead, the watch
// would read on after y's marker expired and keep y forever. Here the
// clock jumps as the watch opens its delivery after the restore: past the
// marker's life, inside the window of the restore's check but not of the
// artifact's anchor, so the watch must not read on.
TEST(RepairSimTest, ARestoreBehindTheHeadKeepsTheArtifactsAnchor) {
  TtlBucket t(std::chrono::seconds(4));  // marker window 3.6 s
  t.b.SetMaxMsgs(40);
  for (int i = 0; i < 20; ++i) t.b.Put("p." + std::to_string(i), "v");
  Node a, b;
  t.Start(a);
  t.Start(b);
  for (int step = 0; step < 10; ++step) {  // a stays up, b down from here
    t.b.AdvanceTime(std::chrono::milliseconds(500));
    ASSERT_TRUE(RunNode(t.b, a, t.Options()).ok());
  }
  const int64_t y_at = t.b.NowNs();
  t.b.PutWithTtl("y", "v", std::chrono::milliseconds(500));
  for (int i = 0; i < 30; ++i) t.b.Put("q." + std::to_string(i), "v");
  ASSERT_GT(t.b.ReadStream()->first_seq, 1u) << "the volume limit has evicted";
  ASSERT_TRUE(RunNode(t.b, a, t.Options()).ok());
  ASSERT_EQ(LiveEntries(*a.fold).count("y"), 1u);
  Artifacts arts;
  arts.Export(*a.fold);
  const int64_t anchor = a.fold->ReadMeta()->cursor_time_ns;
  ASSERT_LE(anchor - y_at, int64_t{100000000}) << "the artifact is anchored before y expires";
  // y expires at +0.5 s, its marker at +4.5 s; b restores at +3 s, inside
  // the artifact's window, with y's marker in the stream after its cursor.
  t.b.AdvanceTime(std::chrono::seconds(3));
  ASSERT_EQ(t.b.Truth(Scope()).count("y"), 0u);

  bool restored = false, jumped = false;
  int64_t restored_anchor = 0;
  WatchOptions o = t.Options();
  o.artifacts = arts.source();
  o.log = [&](std::string_view l) {
    if (l.find("restore done") != std::string_view::npos) {
      restored = true;
      restored_anchor = b.fold->ReadMeta()->cursor_time_ns;
    }
  };
  t.b.on_open = [&] {
    if (!restored || jumped) return;
    jumped = true;
    t.b.AdvanceTime(std::chrono::seconds(2));  // y's marker is gone now
  };
  Status s = RunNode(t.b, b, o);
  t.b.on_open = nullptr;
  ASSERT_TRUE(restored) << s.ToString();
  EXPECT_EQ(restored_anchor, anchor) << "the stream stored more after the artifact's cursor";
  ASSERT_TRUE(jumped);
  if (s.ok()) {
    ExpectConverged(t.b, b);
  } else {
    EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  }
  EXPECT_EQ(LiveEntries(*b.fold).count("y") == 1, !s.ok())
      << "y is kept only by a watch that stopped: " << s.ToString();
}

// An idle mirror stays resumable: its probe re-anchors the cursor and the
// anchor reaches the fold, so a restart after a quiet spell longer than
// the marker TTL resumes without a repair.
TEST(RepairSimTest, IdleMirrorStaysInsideTheMarkerWindow) {
  TtlBucket t(std::chrono::seconds(2));
  for (int i = 0; i < 5; ++i) t.b.Put("p." + std::to_string(i), "v");
  Node n;
  t.Start(n);
  WatchOptions o = t.Options();
  o.until_caught_up = false;
  std::stop_source stop;
  o.stop = stop.get_token();
  // Quiet for 10 s by the server's clock, 100 ms per stream read.
  int reads = 0;
  t.b.on_read_stream = [&] {
    if (++reads >= 100) stop.request_stop();
    t.b.AdvanceTime(std::chrono::milliseconds(100));
  };
  Status s = RunNode(t.b, n, o);
  t.b.on_read_stream = nullptr;
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(reads, 100);
  const int64_t anchor = n.fold->ReadMeta()->cursor_time_ns;
  EXPECT_GT(anchor, t.b.NowNs() - int64_t{1000000000});
  // Something new arrives before the restart, so the stream alone cannot
  // show the cursor current: the anchor the fold kept must.
  t.b.Put("p.new", "v");
  Status again = RunNode(t.b, n, t.Options());
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_EQ(n.by_origin[ChangeOrigin::kRestore], 0);
  ExpectConverged(t.b, n);
}

// A live mirror stalled (here: its apply hook) longer than the marker TTL
// while keys expired and their markers came and went behind it: the
// stretch it then reads is outside the window, a floor trip. The repair is
// a relist (an expiry is a delete), with no artifact; it never ends
// "caught up" with the expired keys live. Mutant floor-ignore-marker-window
// does.
TEST(RepairSimTest, StretchReadAfterTheMarkerTtlTripsTheFloorGuard) {
  TtlBucket t(std::chrono::seconds(2));
  for (int i = 0; i < 5; ++i)
    t.b.PutWithTtl("ttl." + std::to_string(i), "v", std::chrono::seconds(3));
  Node n;
  t.Start(n);
  for (int i = 0; i < 50; ++i) t.b.Put("p." + std::to_string(i), "v");
  bool stalled = false;
  uint64_t after = 0;
  auto stall = [&](const Change& c) {
    if (!stalled && c.key == "p.10") {
      stalled = true;
      t.b.AdvanceTime(std::chrono::seconds(10));  // markers written at 3 s, gone at 5 s
      after = t.b.Put("z", "after");
    }
    return Status::OK();
  };
  // Not "until caught up": that target is the stream's end before the
  // stall, and the run could end there, before it reads the stretch
  // (timing-dependent with a background committer). The watch runs until
  // it trips; a cursor that reaches "z" (no trip) stops it instead.
  // The watch goes on for a few stream reads past "z": a relist that left
  // the guard's trip standing would relist again at the next floor check
  // (the counter ends such a watch after three and the count fails).
  WatchOptions o = t.Options();
  o.batch_size = 1;
  o.until_caught_up = false;
  RelistCounter relists;
  relists.Arm(o);
  std::atomic<bool> reached{false};
  std::atomic<int> reads_after{0};
  o.on_applied = [&](uint64_t cursor) {
    if (after != 0 && cursor >= after) reached = true;
  };
  t.b.on_read_stream = [&] {
    if (reached && ++reads_after >= 3) relists.stop.request_stop();
  };
  Status s = RunNode(t.b, n, o, nullptr, stall);
  ASSERT_TRUE(stalled);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Logged(n, "outside the marker window")) << "no trip logged";
  EXPECT_EQ(relists.done, 1);
  EXPECT_GE(n.metrics.Snapshot().floor_guard_trips, 1u);
  ExpectConverged(t.b, n);
}

// An artifact is restorable only within the marker window of its anchor:
// one exported before the markers it would need came and went is refused
// (and the fold stays as it was). Mutant restore-ignore-marker-window
// restores it and keeps an expired key. (Repair policy restore: auto would
// relist on this bucket.)
TEST(RepairSimTest, ArtifactOlderThanTheMarkerTtlIsNotRestored) {
  TtlBucket t(std::chrono::seconds(2));
  for (int i = 0; i < 5; ++i) t.b.Put("p." + std::to_string(i), "v");
  Node a, b;
  t.Start(a);
  t.Start(b);
  t.b.Put("p.9", "v");
  ASSERT_TRUE(RunNode(t.b, a, t.Options()).ok());
  Artifacts arts;
  arts.Export(*a.fold);  // cursor past b's, anchored now
  t.b.PutWithTtl("ttl", "v", std::chrono::seconds(1));
  t.b.AdvanceTime(std::chrono::seconds(10));  // its marker came and went
  WatchOptions o = t.Options(ExpiryRepair::kRestore);
  o.artifacts = arts.source();
  const auto entries_before = LiveEntries(*b.fold);
  Status s = RunNode(t.b, b, o);
  ASSERT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_NE(s.message().find("marker"), std::string::npos) << s.message();
  EXPECT_EQ(LiveEntries(*b.fold), entries_before);
}

// SPEC §5 Restore: retention is checked again after the key listing. The
// artifact is current when the restore begins; while the listing (which
// the fold's q.x, gone from the artifact, calls for) runs, the artifact's
// "ttl" expires and its marker comes and goes. Restoring it anyway would
// keep "ttl" live for ever (the resume sees nothing of it): the check
// after the listing refuses the artifact.
TEST(RepairSimTest, AnArtifactThatAgesOutOfTheMarkerWindowDuringTheListingIsRefused) {
  TtlBucket t(std::chrono::seconds(2));
  for (int i = 0; i < 5; ++i) t.b.Put("p." + std::to_string(i), "v");
  t.b.Put("q.x", "v");
  Node a, b;
  t.Start(a);
  t.Start(b);  // b holds q.x
  t.b.Delete("q.x");
  t.b.AdvanceTime(std::chrono::seconds(10));  // b's anchor is older than the marker TTL
  t.b.PutWithTtl("ttl", "v", std::chrono::seconds(3));
  ASSERT_TRUE(RunNode(t.b, a, t.Options()).ok());
  Artifacts arts;
  arts.Export(*a.fold);  // current: "ttl" live, q.x gone
  int listings = 0;
  t.b.during_listing = [&] {
    if (listings++ == 0) t.b.AdvanceTime(std::chrono::seconds(10));  // "ttl" and its marker go
  };
  WatchOptions o = t.Options(ExpiryRepair::kRestore);
  o.artifacts = arts.source();
  o.repair_timeout = std::chrono::seconds(5);
  Status s = RunNode(t.b, b, o);
  EXPECT_GE(listings, 1);
  ASSERT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_NE(s.message().find("after the key listing"), std::string::npos) << s.message();
  EXPECT_EQ(LiveEntries(*b.fold).count("ttl"), 0u);
  EXPECT_TRUE(b.violations.empty()) << b.violations.front();
}

// An artifact at the stream's last sequence is current whatever its age:
// nothing was stored after it, so no marker can have come and gone (issue
// 30, "a quiet bucket never makes a restore wait until a write happens").
// Mutant restore-ignore-quiet-head refuses it.
TEST(RepairSimTest, ArtifactAtTheStreamsLastSequenceIsCurrentWhateverItsAge) {
  TtlBucket t(std::chrono::seconds(2));
  for (int i = 0; i < 5; ++i) t.b.Put("p." + std::to_string(i), "v");
  Node a, b;
  t.Start(b);
  t.b.PutWithTtl("ttl", "v", std::chrono::seconds(1));
  t.b.Put("p.9", "v");
  t.b.AdvanceTime(std::chrono::seconds(3));  // "ttl" expired; its marker written
  t.Start(a);
  t.b.AdvanceTime(std::chrono::seconds(3));  // and gone
  Artifacts arts;
  arts.Export(*a.fold);
  ASSERT_EQ(a.fold->ReadMeta()->cursor, t.b.last_seq());
  t.b.AdvanceTime(std::chrono::seconds(600));  // quiet since
  WatchOptions o = t.Options(ExpiryRepair::kRestore);
  o.artifacts = arts.source();
  Status s = RunNode(t.b, b, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GT(b.by_origin[ChangeOrigin::kRestore], 0);
  ExpectConverged(t.b, b);
  EXPECT_EQ(LiveEntries(*b.fold).count("ttl"), 0u);
  // Current as of the restore's check, not as of the export.
  EXPECT_GT(b.fold->ReadMeta()->cursor_time_ns, t.b.NowNs() - int64_t{1000000000});
}

// A restore waiting for an artifact looks at most about once a second,
// backing off, and says what it waits for and until when (issue 30: 1,219
// looks in four minutes, each a stream read and a listing). Mutant
// restore-wait-unpaced looks every 10 ms.
TEST(RepairSimTest, ARestoreWaitingForAnArtifactLooksAtMostOnceASecond) {
  TtlBucket t(std::chrono::seconds(1));
  t.b.SetMaxMsgs(10);
  for (int i = 0; i < 30; ++i) t.b.Put("p." + std::to_string(i), "v");
  Artifacts arts;  // empty: no artifact ever comes
  Node n;
  WatchOptions o = t.Options();
  o.artifacts = arts.source();
  o.repair_timeout = std::chrono::seconds(120);
  const auto start = t.clock.Now();
  Status s = RunNode(t.b, n, o);
  ASSERT_TRUE(s.IsCursorExpired()) << s.ToString();
  const double secs = std::chrono::duration<double>(t.clock.Now() - start).count();
  const uint64_t looks = n.metrics.Snapshot().restore_retries + 1;
  EXPECT_GE(secs, 119.0);
  EXPECT_LE(static_cast<double>(looks), secs / 1.0 + 1) << looks << " looks in " << secs << " s";
  EXPECT_LE(looks, 12u) << "backs off to half a minute";
  EXPECT_TRUE(Logged(n, "giving up at")) << "says until when";
}

// The same when an artifact is there but outside a short marker window
// (1 s TTL: a quarter of the window is 225 ms): the wait is capped by a
// quarter of the window only down to a second, never below.
TEST(RepairSimTest, ARestoreWaitingOutAStaleArtifactLooksAtMostOnceASecond) {
  TtlBucket t(std::chrono::seconds(1));
  t.b.SetMaxMsgs(10);
  for (int i = 0; i < 30; ++i) t.b.Put("p." + std::to_string(i), "v");
  Node a;
  t.Start(a);
  Artifacts arts;
  arts.Export(*a.fold);
  // Writes after its cursor, and time past its window: it never becomes usable.
  for (int i = 0; i < 5; ++i) t.b.Put("q." + std::to_string(i), "v");
  t.b.AdvanceTime(std::chrono::seconds(5));
  Node n;
  WatchOptions o = t.Options();
  o.artifacts = arts.source();
  o.repair_timeout = std::chrono::seconds(30);
  const auto start = t.clock.Now();
  Status s = RunNode(t.b, n, o);
  ASSERT_TRUE(s.IsCursorExpired()) << s.ToString();
  // The artifact was looked at and refused for its window.
  EXPECT_NE(s.message().find("marker"), std::string::npos) << s.message();
  const double secs = std::chrono::duration<double>(t.clock.Now() - start).count();
  const uint64_t looks = n.metrics.Snapshot().restore_retries + 1;
  EXPECT_GE(secs, 29.0);
  // One a second, the first at once and the last at the deadline itself.
  EXPECT_LE(static_cast<double>(looks), secs / 1.0 + 2) << looks << " looks in " << secs << " s";
}

// A marker keeps the TTL it was written with. The bucket's marker TTL is
// raised while the node is down, after a key it holds expired and its
// marker (on the old, short TTL) came and went: the node must measure its
// window with the old TTL, not resume on the new one. The fold records
// the TTL it measures with. Mutant marker-ttl-raise-at-once.
TEST(RepairSimTest, RaisedMarkerTtlCountsOnlyForMarkersWrittenAfterIt) {
  TtlBucket t(std::chrono::seconds(2));
  for (int i = 0; i < 5; ++i) t.b.Put("p." + std::to_string(i), "v");
  t.b.PutWithTtl("ttl", "v", std::chrono::seconds(3));
  Node n;
  t.Start(n);
  EXPECT_EQ(n.fold->ReadMeta()->marker_ttl_ns, int64_t{2000000000});
  t.b.AdvanceTime(std::chrono::seconds(6));  // expired at 3 s, its marker gone at 5 s
  t.b.SetMessageTtl(std::chrono::seconds(60));
  const auto before = LiveEntries(*n.fold);
  // Repair policy restore without an artifact: the decision to repair is
  // what is checked (auto would relist on this bucket).
  Status s = RunNode(t.b, n, t.Options(ExpiryRepair::kRestore));
  ASSERT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_NE(s.message().find("live 2.0 s"), std::string::npos) << s.message();
  EXPECT_EQ(LiveEntries(*n.fold), before);
}

// The same for an artifact: one anchored before a key's marker was written
// on the old, short TTL is measured with the TTL its exporter recorded, not
// with the bucket's raised one, by a node that has none of its own.
TEST(RepairSimTest, ArtifactAnchoredBeforeARaiseIsMeasuredWithItsExportersTtl) {
  TtlBucket t(std::chrono::seconds(2));
  t.b.SetMaxMsgs(5);  // evicts by volume: a first start needs an artifact
  for (int i = 0; i < 7; ++i) t.b.Put("p." + std::to_string(i), "v");
  t.b.PutWithTtl("ttl", "v", std::chrono::seconds(1));
  Node a, b;
  t.Start(a);
  Artifacts arts;
  arts.Export(*a.fold);                              // "ttl" live in it
  t.b.AdvanceTime(std::chrono::milliseconds(1200));  // its marker, on the 2 s TTL
  t.b.SetMessageTtl(std::chrono::seconds(60));
  t.b.AdvanceTime(std::chrono::seconds(3));  // the marker is gone
  WatchOptions o = t.Options();
  o.artifacts = arts.source();
  Status s = RunNode(t.b, b, o);  // a fresh node: a first start restores
  ASSERT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_EQ(LiveEntries(*b.fold).count("ttl"), 0u);
}

// ---------------------------------------------------------------------------
// Gaps an outside bug-planting check found (each guarded by a mutant).

// Deletes and purges racing the relist's listing: a key the fold holds
// live is deleted (or purged) after the listing read its revision, so the
// listing does not name it. Its tombstone must carry the delete's own
// revision: at the listing's revision the key was still live, and the hook
// would see a phantom delete. Mutant repair-delete-at-listing-revision.
TEST(RepairSimTest, KeyDeletedOrPurgedDuringTheListingIsDeletedAtItsOwnRevision) {
  SimBucket b;
  b.SetHistoryOne(true);
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v0");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  for (int r = 1; r < 4; ++r) {
    for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v" + std::to_string(r));
  }
  bool raced = false;
  b.during_listing = [&] {
    if (raced) return;
    raced = true;
    b.Delete("k.3");
    b.Purge("k.4");
    b.Put("k.5", "raced put");
  };
  Status s = RunNode(b, n);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(raced);
  ExpectConverged(b, n);
  EXPECT_GT(n.by_origin[ChangeOrigin::kRelist], 0);
}

// A separated commit failure is not a consecutive one: a long watch with
// rare transient store errors, each followed by successes, never stops
// with "failed N consecutive times". Mutant commit-failures-never-reset.
TEST(RepairSimTest, SeparatedCommitFailuresNeverAddUp) {
  SimBucket b;
  for (int i = 0; i < 40; ++i) b.Put("k." + std::to_string(i), "v");
  Node n;
  FaultFold faulty(*n.fold);
  for (int at : {2, 5, 9, 14}) faulty.Add(at, Fault::kFailBefore);
  InstantSleepClock clock;
  WatchOptions o = Fast();
  o.clock = &clock;
  o.batch_size = 2;
  o.sync_run_bytes = 1;  // the first sync's runs one key each, as many commits
  o.max_commit_failures = 2;
  o.commit_in_background = false;
  // Time passes between messages, so each failed batch is retried (and
  // succeeds) before the next fault.
  auto pace = [&clock](const Change&) {
    clock.SleepFor(std::chrono::milliseconds(250), std::stop_token());
    return Status::OK();
  };
  Status s = RunNode(b, n, o, &faulty, pace);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(faulty.fired(), 4);
  ExpectConverged(b, n);
  // And the rule itself: two in a row do stop it.
  SimBucket b2;
  for (int i = 0; i < 10; ++i) b2.Put("k." + std::to_string(i), "v");
  Node n2;
  FaultFold twice(*n2.fold);
  twice.Add(1, Fault::kFailBefore);
  twice.Add(2, Fault::kFailBefore);
  Status stopped = RunNode(b2, n2, o, &twice);
  EXPECT_FALSE(stopped.ok());
  EXPECT_NE(stopped.message().find("2 consecutive"), std::string::npos) << stopped.ToString();
}

// Restore from a wider artifact: a whole-bucket exporter serves nodes with
// one or several prefixes, through every repair path that restores (an
// expired cursor, a fresh start, an unanchored fold, a trip mid-watch).
// Keys outside a node's scope never reach its fold or its hook (SPEC §1).
// Mutant restore-ignore-artifact-scope.
TEST(RepairSimTest, WiderArtifactRestoresOnlyTheNodesScope) {
  enum class Path { kExpired, kFreshStart, kUnanchored, kTrip };
  for (Path path : {Path::kExpired, Path::kFreshStart, Path::kUnanchored, Path::kTrip}) {
    for (const std::vector<std::string>& prefixes :
         {std::vector<std::string>{"a."}, std::vector<std::string>{"a.", "c"}}) {
      SCOPED_TRACE(static_cast<int>(path));
      SCOPED_TRACE(prefixes.size());
      const Scope scope = *Scope::Make(prefixes);
      SimBucket b;
      b.SetMaxMsgs(30);
      Artifacts arts;
      Node a, n;
      auto churn = [&](int round) {
        for (const char* k : {"a.1", "a.2", "b.1", "b.2", "c", "d.x"}) {
          b.Put(k, "v" + std::to_string(round));
        }
        if (round == 2) b.Delete("a.2");
      };
      churn(0);
      ASSERT_TRUE(RunNode(b, a).ok());
      WatchOptions o = Fast();
      o.scope = scope;
      o.artifacts = arts.source();
      if (path == Path::kExpired || path == Path::kTrip) {
        ASSERT_TRUE(RunNode(b, n, o).ok());
      }
      if (path == Path::kUnanchored) {
        FoldCommit c;
        c.entries["a.1"] = Entry{1, false, "old"};
        ASSERT_TRUE(n.fold->Commit(c).ok());
      }
      std::function<Status(const Change&)> extra;
      if (path == Path::kTrip) {
        bool overran = false;
        extra = [&, overran](const Change& c) mutable {
          if (overran || c.origin != ChangeOrigin::kLive) return Status::OK();
          overran = true;
          for (int round = 1; round < 8; ++round) {
            churn(round);
            EXPECT_TRUE(RunNode(b, a).ok());  // A keeps up
          }
          arts.Export(*a.fold);
          return Status::OK();
        };
        churn(100);  // something in scope for the trip's watch to receive
      } else {
        for (int round = 1; round < 8; ++round) {
          churn(round);
          ASSERT_TRUE(RunNode(b, a).ok());  // A keeps up
        }
        arts.Export(*a.fold);
      }
      Status s = RunNode(b, n, o, nullptr, extra);
      ASSERT_TRUE(s.ok()) << s.ToString();
      // (After a trip the node may have folded everything in scope live
      // before the restore, which then has nothing to take.)
      EXPECT_TRUE(Logged(n, "restore done"));
      ExpectConverged(b, n, scope);
      n.fold->Scan("", true, [&](std::string_view k, const Entry&) {
        EXPECT_TRUE(scope.Contains(k)) << "out of scope: " << k;
        return true;
      });
      for (const auto& [k, e] : n.hook_view) EXPECT_TRUE(scope.Contains(k)) << "hook saw " << k;
    }
  }
}

// SPEC §1 apply hook: exactly once per committed change, repairs included
// (issue 31, defect 8). A bucket read that fails partway through a repair's
// batch discards the batch; the hook must not have seen it, or the retry
// shows the same change twice.
using HookCalls = std::map<std::tuple<std::string, uint64_t, Op>, int>;
std::function<Status(const Change&)> CountHookCalls(HookCalls* calls) {
  return [calls](const Change& c) {
    ++(*calls)[{std::string(c.key), c.revision, c.op}];
    return Status::OK();
  };
}
void ExpectEachChangeHookedOnce(const HookCalls& calls) {
  for (const auto& [change, count] : calls) {
    EXPECT_EQ(count, 1) << "the hook saw " << std::get<0>(change) << " at " << std::get<1>(change)
                        << " " << count << " times";
  }
}

// On a bucket evicting by volume (25 messages), `a` keeps up with eight
// rewrites of k.0..k.9 while `nb` mirrored only the first writes; `gone`,
// written before them, is deleted in the fifth round: nb holds it live, and
// it is in no artifact of a's. `each_round(r)` adds round r's own writes.
void LagBehindAKeyDeletedInTheGap(SimBucket& b, Node& a, Node& nb, const std::string& gone,
                                  const std::function<void(int)>& each_round = nullptr) {
  b.SetMaxMsgs(25);
  b.Put(gone, "deleted in the gap");
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v0");
  ASSERT_TRUE(RunNode(b, a).ok());
  ASSERT_TRUE(RunNode(b, nb).ok());
  for (int round = 1; round <= 8; ++round) {
    for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v" + std::to_string(round));
    if (each_round) each_round(round);
    if (round == 5) b.Delete(gone);
    ASSERT_TRUE(RunNode(b, a).ok());
  }
}

TEST(RepairSimTest, RestoreReadFailureMidChunkNeverShowsTheHookAChangeTwice) {
  SimBucket b;
  Artifacts arts;
  Node a, nb;
  ASSERT_NO_FATAL_FAILURE(LagBehindAKeyDeletedInTheGap(b, a, nb, "d.del", [&b](int round) {
    if (round != 2) return;
    for (int i = 0; i < 10; ++i) b.Put("c." + std::to_string(i), "evicted in the gap");
  }));
  arts.Export(*a.fold);  // one chunk: c.*, k.*
  // In key order the chunk's c.* come from the artifact alone; then the
  // fold's d.del, in neither the artifact nor the listing: its last
  // message is read, and that read fails once, mid-chunk.
  int reads = 0;
  b.before_last_of_key = [&] {
    if (reads++ == 0) b.FailNextLastOfKey(1);
  };
  HookCalls calls;
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  o.repair_timeout = std::chrono::seconds(30);
  Status s = RunNode(b, nb, o, nullptr, CountHookCalls(&calls));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(reads, 2);  // the failed read, then the retried one
  EXPECT_EQ(Repairs(nb, RepairKind::kRestore, RepairOutcome::kDone), 1u);
  ExpectConverged(b, nb);
  EXPECT_GT(nb.by_origin[ChangeOrigin::kRestore], 10);  // c.0..c.9 taken, d.del deleted, ...
  ExpectEachChangeHookedOnce(calls);
}

// The key listing is taken when the merge meets the first live fold key
// the artifact lacks (k.4z, between k.4 and k.5): the chunks before it are
// committed (under the old cursor), the keys after it not yet. Retention
// read after the listing fails once, and a newer artifact is published
// meanwhile: the next attempt merges it over what the first one wrote,
// and the hook sees each change once.
TEST(RepairSimTest, AListingMidMergeThatFailsIsRetriedOverTheChunksAlreadyMerged) {
  SimBucket b;
  Artifacts arts;
  Node a, nb;
  ASSERT_NO_FATAL_FAILURE(LagBehindAKeyDeletedInTheGap(b, a, nb, "k.4z"));
  arts.Export(*a.fold, /*chunk_bytes=*/1);  // a chunk per key
  Entry k0_artifact;
  ASSERT_TRUE(a.fold->Get("k.0", &k0_artifact).ok());
  int listings = 0;
  bool merged_before_listing = false, k9_after_listing = false;
  b.before_request = [&](std::string_view request) {
    if (request != "list_keys" || listings++ > 0) return;
    Entry k0, k9;
    merged_before_listing = nb.fold->Get("k.0", &k0).ok() && k0 == k0_artifact;
    k9_after_listing = nb.fold->Get("k.9", &k9).ok() && k9.value == "v0";
    // A newer artifact for the next attempt, then the failure.
    for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v9");
    ASSERT_TRUE(RunNode(b, a).ok());
    arts.Export(*a.fold, /*chunk_bytes=*/1);
    b.FailNextCalls(1);  // the retention read after the listing
  };
  HookCalls calls;
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  o.repair_timeout = std::chrono::seconds(30);
  Status s = RunNode(b, nb, o, nullptr, CountHookCalls(&calls));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(merged_before_listing) << "the listing came before the first chunk was merged";
  EXPECT_TRUE(k9_after_listing) << "k.9 was merged before the listing";
  EXPECT_GE(listings, 2);  // the failed attempt's, then the retried one's
  EXPECT_EQ(Repairs(nb, RepairKind::kRestore, RepairOutcome::kDone), 1u);
  ExpectConverged(b, nb);
  Entry gone;
  ASSERT_TRUE(nb.fold->Get("k.4z", &gone).ok());
  EXPECT_TRUE(gone.deleted);
  ExpectEachChangeHookedOnce(calls);
}

TEST(RepairSimTest, RelistReadFailureMidBatchNeverShowsTheHookAChangeTwice) {
  SimBucket b;
  Node n;
  ASSERT_NO_FATAL_FAILURE(MirrorThenOverwriteHistoryOne(b, n));
  b.Delete("k.3");
  b.Delete("k.4");
  b.Delete("k.5");
  b.Put("k.0", "last");
  // k.3's delete is decided (its last message read), then k.4's read fails:
  // the relist stops with k.3's delete uncommitted; the next run repeats it.
  int reads = 0;
  b.before_last_of_key = [&] {
    if (reads++ == 1) b.FailNextLastOfKey(1);
  };
  HookCalls calls;
  Status first = RunNode(b, n, Fast(), nullptr, CountHookCalls(&calls));
  for (int run = 0; run < 3 && !first.ok(); ++run) {
    first = RunNode(b, n, Fast(), nullptr, CountHookCalls(&calls));
  }
  ASSERT_TRUE(first.ok()) << first.ToString();
  EXPECT_GE(reads, 4);
  ExpectConverged(b, n);
  EXPECT_EQ(n.by_origin[ChangeOrigin::kRelist], 3);
  ExpectEachChangeHookedOnce(calls);
}

// A stream that kept its identity with a shorter history (restored from a
// backup) is the same bucket: the fold's eviction memo still speaks for it.
// With its limits removed since, its listing still lacks the keys that aged
// out, so the rebuild after the reset must not relist: auto restores, and
// with no artifact refuses, the fold as it was (review of issue 31, 5).
TEST(RepairSimTest, AStreamResetBelowTheFoldKeepsItsEvictionMemo) {
  SimBucket b;
  b.SetMaxMsgs(10);
  Node n;
  for (int i = 0; i < 30; ++i) {
    b.Put("k." + std::to_string(i % 12), "v" + std::to_string(i));
    ASSERT_TRUE(RunNode(b, n).ok());
  }
  ASSERT_TRUE(n.fold->ReadMeta()->eviction_observed);
  const auto before = LiveEntries(*n.fold);
  b.SetMaxMsgs(0);
  b.RollBackTo(25);  // the same identity, its head below the fold's cursor
  WatchOptions o = Fast();
  o.reconnect_backoff_max = std::chrono::seconds(30);  // the lagging view's patience passes
  Status s = RunNode(b, n, o);
  EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_TRUE(n.violations.empty()) << n.violations.front();
  EXPECT_EQ(LiveEntries(*n.fold), before);
  EXPECT_TRUE(n.fold->ReadMeta()->eviction_observed);
}

// SPEC §5 Restore (issue 31, defect 4): a stream restored from a backup
// keeps its identity (created time) with a lower last_seq, so every artifact
// exported since is ahead of it. Such an artifact describes a history the
// stream no longer has: restore refuses it (otherwise the fold's cursor
// passes the head, the mirror takes the stream as recreated and restores
// the same artifact again, forever).
TEST(RepairSimTest, ArtifactBeyondTheStreamsHeadIsNotRestored) {
  SimBucket b;
  b.SetMaxMsgs(15);
  Artifacts arts;
  Node a;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v" + std::to_string(round));
    ASSERT_TRUE(RunNode(b, a).ok());
  }
  arts.Export(*a.fold);  // cursor 40
  b.RollBackTo(30);
  b.Put("after.backup", "x");  // 31: the head is below the artifact's cursor
  Node nb;
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  // Were it taken, the watch would restore it again and again: stop it.
  std::stop_source stop;
  o.stop = stop.get_token();
  int restores = 0;
  o.log = [&](std::string_view line) {
    if (line.find("restore done") != std::string_view::npos && ++restores >= 3) {
      stop.request_stop();
    }
  };
  Status s = RunNode(b, nb, o);
  EXPECT_EQ(restores, 0);
  EXPECT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_NE(s.message().find("beyond the stream's last sequence"), std::string::npos)
      << s.ToString();
  EXPECT_FALSE(nb.fold->ReadMeta()->cursor.has_value());
  EXPECT_TRUE(LiveEntries(*nb.fold).empty());

  // The way out: a node that follows the stream as it is now exports. The
  // pointer sits beyond the head, so that export replaces it (without the
  // head it would be "unchanged" forever), and the waiting node restores.
  Node c;
  WatchOptions none = Fast();
  none.repair = ExpiryRepair::kNone;
  ASSERT_TRUE(RunNode(b, c, none).ok());
  ASSERT_EQ(c.fold->ReadMeta()->cursor, b.last_seq());
  ExportOptions plain;
  EXPECT_TRUE(ExportArtifact(*c.fold, arts.transport(), plain).status().IsAlreadyExists());
  auto replaced = arts.ExportReadingHead(*c.fold, b);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_EQ(replaced->cursor, b.last_seq());
  EXPECT_EQ(*LatestArtifactId(arts.transport()), replaced->artifact_id);
  // Forward only again within the stream's history: at the head, the
  // pointer stays.
  EXPECT_TRUE(arts.ExportReadingHead(*c.fold, b).status().IsAlreadyExists());
  Node later;
  o = Fast();
  o.artifacts = arts.source();
  s = RunNode(b, later, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(later.fold->ReadMeta()->cursor, b.last_seq());
  EXPECT_EQ(LiveEntries(*later.fold), LiveEntries(*c.fold));
}

// max_age without limit markers on a bucket that allows per-message TTL:
// a message with `Nats-TTL: never` at the head is exempt from max_age, so
// the messages behind it age out (unmarked: an eviction, the key stays in
// the truth) while first_seq stays 1. Such a bucket must count as having
// evicted whatever first_seq says (found by an adversarial review of
// issue 30's change, which had dropped that clause): a reconcile would
// phantom-delete the aged-out key, and a new fold would state-sync
// without it.
struct NeverHeadBucket {
  SimBucket b;
  NeverHeadBucket() {
    b.SetMessageTtl(std::chrono::milliseconds(0));  // TTL allowed, no markers
    b.SetMaxAge(std::chrono::seconds(10));
    b.PutNeverExpires("cfg", "v");  // seq 1, never ages out
    b.Put("a", "1");                // seq 2
  }
};

TEST(RepairSimTest, AReconcileOnAnUnmarkedAgeBucketWithANeverHeadDeletesNothing) {
  NeverHeadBucket t;
  Node n;
  WatchOptions first = Fast();
  first.repair = ExpiryRepair::kNone;  // a first deploy: nothing aged out yet
  ASSERT_TRUE(RunNode(t.b, n, first).ok());
  ASSERT_EQ(LiveEntries(*n.fold).size(), 2u);
  t.b.AdvanceTime(std::chrono::seconds(20));  // "a" ages out, no marker
  t.b.Put("c", "1");
  ASSERT_EQ(t.b.ReadStream()->first_seq, 1u);
  WatchOptions o = Fast();
  o.reconcile_every = std::chrono::milliseconds(1);
  o.until_caught_up = false;
  std::stop_source stop;
  o.stop = stop.get_token();
  int turns = 0;
  o.log = [&](std::string_view line) {
    if (line.find("reconcile") != std::string_view::npos && ++turns >= 2) stop.request_stop();
  };
  Status s = RunNode(t.b, n, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectConverged(t.b, n);
  EXPECT_EQ(LiveEntries(*n.fold).count("a"), 1u);
  EXPECT_EQ(n.fold->ReadMeta()->eviction_cause, "unmarked age");
}

TEST(RepairSimTest, ANewFoldOnAnUnmarkedAgeBucketWithANeverHeadIsRefusedWithoutAnArtifact) {
  NeverHeadBucket t;
  t.b.AdvanceTime(std::chrono::seconds(20));  // "a" ages out, no marker
  t.b.Put("c", "1");
  Node n;
  Status s = RunNode(t.b, n);
  ASSERT_TRUE(s.IsCursorExpired()) << s.ToString();
  EXPECT_TRUE(LiveEntries(*n.fold).empty());
}

// Per-message TTL without limit markers (issue 30, item 4): an expiry
// leaves no trace in the stream, so a key leaves the fold at its deadline
// (its message's time plus its TTL), through the apply hook, by the fold's
// own clock: the anchor of what it received.
TEST(RepairSimTest, AKeyWhoseTtlPassedWithoutAMarkerLeavesTheFoldAtItsDeadline) {
  SimBucket b;
  b.SetHistoryOne(true);
  b.SetMessageTtl(std::chrono::milliseconds(0));  // TTL allowed, no markers
  b.Put("keep", "1");
  b.PutWithTtl("ttl", "v", std::chrono::seconds(5));
  b.PutWithTtl("later", "v", std::chrono::seconds(60));
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  ASSERT_EQ(LiveEntries(*n.fold).size(), 3u);
  Entry ttl;
  ASSERT_TRUE(n.fold->Get("ttl", &ttl).ok());
  EXPECT_GT(ttl.expires_ns, 0);

  b.AdvanceTime(std::chrono::seconds(10));  // "ttl" expires, silently
  ASSERT_TRUE(b.Truth(Scope()).contains("later"));
  ASSERT_FALSE(b.Truth(Scope()).contains("ttl"));
  ASSERT_TRUE(RunNode(b, n).ok());  // a restart: nothing new in the stream
  ExpectConverged(b, n);
  EXPECT_FALSE(LiveEntries(*n.fold).contains("ttl"));
  EXPECT_EQ(n.by_origin[ChangeOrigin::kExpiry], 1);
  Entry gone;
  ASSERT_TRUE(n.fold->Get("ttl", &gone).ok());
  EXPECT_EQ(gone, (Entry{ttl.revision, true, "", 0})) << "a tombstone at the revision that expired";
  EXPECT_EQ(ChangesFrom(n, ChangeOrigin::kExpiry), 1u);

  // Seeded from an artifact, a node knows the deadlines too.
  Artifacts arts;
  arts.Export(*n.fold);
  b.AdvanceTime(std::chrono::seconds(60));  // "later" expires
  Node seeded;
  ASSERT_TRUE(SeedFold(*seeded.fold, arts.transport(), {}).ok());
  ASSERT_TRUE(LiveEntries(*seeded.fold).contains("later"));
  ASSERT_TRUE(RunNode(b, seeded).ok());
  EXPECT_EQ(LiveEntries(*seeded.fold), b.Truth(Scope()));
}

// A deadline applies to the revision that carried it: a key rewritten
// without a TTL before its deadline stays, also when the fold learns of
// the rewrite only after the deadline passed: behind a restart, and behind
// a relist, which re-anchors the fold at its listing but leaves the
// rewrites after the cursor to the delivery. The expiry clock moves only
// with what was received (or a read that found nothing after it), so the
// old deadline never deletes a key the bucket rewrote in time.
TEST(RepairSimTest, AKeyRewrittenBeforeItsDeadlineStays) {
  for (bool relist : {false, true}) {
    SCOPED_TRACE(relist ? "behind a relist" : "behind a restart");
    SimBucket b;
    b.SetHistoryOne(true);
    b.SetMessageTtl(std::chrono::milliseconds(0));  // TTL allowed, no markers
    b.Put("keep", "1");
    b.PutWithTtl("again", "short-lived", std::chrono::seconds(5));
    Node n;
    ASSERT_TRUE(RunNode(b, n).ok());
    b.AdvanceTime(std::chrono::seconds(1));
    if (relist) {
      // A gap only a relist can close: the stream's first message ends up
      // beyond the cursor's next.
      b.Put("gone", "1");
      b.PurgeMarker(b.Delete("gone"));
    }
    b.Put("again", "kept");  // replaces the TTL message, no TTL of its own
    if (relist) b.Put("keep", "2");
    b.AdvanceTime(std::chrono::seconds(10));
    RelistCounter relists;
    WatchOptions o = Fast();
    relists.Arm(o);
    ASSERT_TRUE(RunNode(b, n, o).ok());
    ASSERT_EQ(relists.done, relist ? 1 : 0);
    ExpectConverged(b, n);
    EXPECT_EQ(LiveEntries(*n.fold)["again"].value, "kept");
    EXPECT_EQ(n.by_origin[ChangeOrigin::kExpiry], 0)
        << "the hook saw a delete the bucket never had";
  }
}

// Deadlines come to apply mid-run (the bucket's limit markers were turned
// off) after a key with a TTL was folded while they did not: its deadline
// is read then (from the fold, or the batch not yet committed).
TEST(RepairSimTest, DeadlinesThatComeToApplyMidRunCoverKeysFoldedBefore) {
  SimBucket b;
  b.SetHistoryOne(true);
  b.SetMessageTtl(std::chrono::seconds(1));  // limit markers, at first
  b.Put("keep", "1");
  b.PutWithTtl("ttl", "v", std::chrono::seconds(5));
  Node n;
  WatchOptions o = Fast();
  o.linger = std::chrono::hours(1);  // nothing commits while the watch runs
  o.until_caught_up = false;
  std::stop_source stop;
  o.stop = stop.get_token();
  bool flipped = false;
  int reads_after = 0;
  b.on_read_stream = [&] {
    if (flipped && ++reads_after >= 20) stop.request_stop();
    // The first read after the delivery was folded, not yet committed.
    Entry committed;
    if (flipped || !n.hook_view.contains("ttl") || n.fold->Get("ttl", &committed).ok()) return;
    flipped = true;
    b.SetMessageTtl(std::chrono::milliseconds(0));  // markers off
    b.AdvanceTime(std::chrono::seconds(10));        // "ttl" expires, silently
  };
  ASSERT_TRUE(RunNode(b, n, o).ok());
  b.on_read_stream = nullptr;
  ASSERT_TRUE(flipped);
  ASSERT_FALSE(b.Truth(Scope()).contains("ttl"));
  ExpectConverged(b, n);
  EXPECT_EQ(n.by_origin[ChangeOrigin::kExpiry], 1);
}

// A restore brings each key's deadline with it (merged into a fold that
// already holds keys), and the restored fold drops the key at it.
TEST(RepairSimTest, ARestoredKeyKeepsItsDeadline) {
  SimBucket b;
  b.SetMessageTtl(std::chrono::milliseconds(0));  // TTL allowed, no markers
  b.SetMaxMsgs(25);                               // evicts by volume: a restore
  Artifacts arts;
  Node a, nb;
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v0");
  ASSERT_TRUE(RunNode(b, a).ok());
  ASSERT_TRUE(RunNode(b, nb).ok());
  b.PutWithTtl("ttl", "v", std::chrono::seconds(60));
  for (int round = 1; round <= 4; ++round) {
    for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v" + std::to_string(round));
    ASSERT_TRUE(RunNode(b, a).ok());  // A keeps up
  }
  arts.Export(*a.fold);
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  ASSERT_TRUE(RunNode(b, nb, o).ok());
  ASSERT_EQ(Repairs(nb, RepairKind::kRestore, RepairOutcome::kDone), 1u);
  Entry restored, exported;
  ASSERT_TRUE(nb.fold->Get("ttl", &restored).ok());
  ASSERT_TRUE(a.fold->Get("ttl", &exported).ok());
  EXPECT_GT(exported.expires_ns, 0);
  EXPECT_EQ(restored, exported);

  b.AdvanceTime(std::chrono::seconds(120));  // "ttl" expires, silently
  ASSERT_FALSE(b.Truth(Scope()).contains("ttl"));
  ASSERT_TRUE(RunNode(b, nb).ok());
  ExpectConverged(b, nb);
  EXPECT_EQ(nb.by_origin[ChangeOrigin::kExpiry], 1);
}

// With history, an expiry uncovers the key's previous message, which the
// bucket shows again; nats-server writes a limit marker only for a
// subject's last message, so not even a bucket with markers says so. The
// fold reads the key at its deadline and folds what the bucket shows.
TEST(RepairSimTest, AnExpiryWithHistoryUncoversTheKeysPreviousMessage) {
  for (bool markers : {false, true}) {
    SCOPED_TRACE(markers ? "with limit markers" : "without limit markers");
    SimBucket b;  // history 64
    b.SetMessageTtl(markers ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(0));
    b.Put("k", "old");
    b.PutWithTtl("k", "short-lived", std::chrono::seconds(5));
    b.PutWithTtl("gone", "short-lived", std::chrono::seconds(5));  // nothing under it
    Node n;
    ASSERT_TRUE(RunNode(b, n, Fast()).ok());
    ASSERT_EQ(LiveEntries(*n.fold)["k"].value, "short-lived");

    b.AdvanceTime(std::chrono::seconds(10));
    ASSERT_EQ(b.Truth(Scope())["k"].value, "old");
    ASSERT_FALSE(b.Truth(Scope()).contains("gone"));
    // The first read of the store fails (with markers a relist, past the
    // marker TTL, reads first): the session starts over.
    b.FailNextLastOfKey(1);
    ASSERT_TRUE(RunNode(b, n, Fast()).ok());
    EXPECT_TRUE(markers || Logged(n, "at its deadline: simulated outage"));
    ExpectConverged(b, n);
    EXPECT_EQ(LiveEntries(*n.fold)["k"].value, "old");
    // The uncovered put, and without markers the delete of "gone".
    EXPECT_EQ(n.by_origin[ChangeOrigin::kExpiry], markers ? 1 : 2);
  }
}

// The server's expiry timer may lag a deadline: a key it still holds then
// is looked at again later, until the expiry shows.
TEST(RepairSimTest, AKeyTheServerStillHoldsAtItsDeadlineIsLookedAtAgain) {
  TtlBucket t(std::chrono::milliseconds(0));  // no markers
  SimBucket& b = t.b;
  b.SetHistoryOne(false);
  b.SetTtlLag(std::chrono::milliseconds(1500));
  b.Put("k", "old");
  b.PutWithTtl("k", "short-lived", std::chrono::seconds(2));
  Node n;
  ASSERT_TRUE(RunNode(b, n, t.Options(ExpiryRepair::kNone)).ok());
  b.AdvanceTime(std::chrono::milliseconds(2500));  // past the deadline, not the lag
  ASSERT_EQ(b.Truth(Scope())["k"].value, "short-lived");
  WatchOptions o = t.Options(ExpiryRepair::kNone);
  o.until_caught_up = false;
  std::stop_source stop;
  o.stop = stop.get_token();
  int reads = 0;
  b.on_read_stream = [&] {
    if (++reads >= 600) stop.request_stop();  // about 3 s of idle probes
  };
  ASSERT_TRUE(RunNode(b, n, o, nullptr, [&](const Change& c) {
                if (c.origin == ChangeOrigin::kExpiry) stop.request_stop();
                return Status::OK();
              }).ok());
  b.on_read_stream = nullptr;
  ASSERT_EQ(b.Truth(Scope())["k"].value, "old");
  ExpectConverged(b, n);
  EXPECT_EQ(n.by_origin[ChangeOrigin::kExpiry], 1);
}

// A restore in the middle of a run brings deadlines the run's queue never
// held: the queue is read again after every repair, so a restored key
// leaves the fold at its deadline in the same run.
TEST(RepairSimTest, ARestoreMidRunQueuesTheRestoredDeadlines) {
  SimBucket b;
  b.SetMessageTtl(std::chrono::milliseconds(0));  // TTL allowed, no markers
  b.SetMaxMsgs(20);
  Artifacts arts;
  Node a, nb;
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v0");
  ASSERT_TRUE(RunNode(b, a).ok());
  ASSERT_TRUE(RunNode(b, nb).ok());
  for (int i = 0; i < 10; ++i) b.Put("k." + std::to_string(i), "v1");
  WatchOptions o = Fast();
  o.artifacts = arts.source();
  o.batch_size = 3;
  bool overran = false, advanced = false;
  auto overrun = [&](const Change& c) {
    if (overran || c.origin != ChangeOrigin::kLive) return Status::OK();
    overran = true;
    // While this node is busy, the bucket races past retention with a TTL
    // key in it; node A keeps up and exports.
    EXPECT_TRUE(RunNode(b, a, Fast()).ok());
    b.PutWithTtl("ttl", "v", std::chrono::seconds(30));
    for (int round = 2; round < 8; ++round) {
      for (int i = 0; i < 10; ++i) {
        b.Put("k." + std::to_string(i), "v" + std::to_string(round));
        if (i == 4) {
          EXPECT_TRUE(RunNode(b, a, Fast()).ok());
        }
      }
    }
    EXPECT_TRUE(RunNode(b, a, Fast()).ok());
    arts.Export(*a.fold);
    return Status::OK();
  };
  o.log = [&](std::string_view line) {
    if (advanced || line.find("restore done") == std::string_view::npos) return;
    advanced = true;
    b.AdvanceTime(std::chrono::seconds(60));  // "ttl" expires, silently
  };
  Status s = RunNode(b, nb, o, nullptr, overrun);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(advanced) << "no restore";
  ASSERT_FALSE(b.Truth(Scope()).contains("ttl"));
  ExpectConverged(b, nb);
  EXPECT_EQ(nb.by_origin[ChangeOrigin::kExpiry], 1);
}

// Markers turned on while a node was down announce only the expiries
// after them: one that happened before left no marker, and the node folds
// it by its deadline (history 1, and with history where nothing is left).
TEST(RepairSimTest, MarkersTurnedOnAfterAnExpiryLeaveItToTheFold) {
  for (bool history_one : {true, false}) {
    SCOPED_TRACE(history_one ? "history 1" : "history 64");
    SimBucket b;
    b.SetHistoryOne(history_one);
    b.SetMessageTtl(std::chrono::milliseconds(0));  // no markers, at first
    b.Put("keep", "1");
    b.PutWithTtl("k", "short-lived", std::chrono::seconds(5));
    Node n;
    ASSERT_TRUE(RunNode(b, n).ok());
    b.AdvanceTime(std::chrono::seconds(10));  // "k" expires without a marker
    ASSERT_FALSE(b.Truth(Scope()).contains("k"));
    b.SetMessageTtl(std::chrono::seconds(30));  // markers on, after the expiry
    b.Put("after", "1");
    ASSERT_TRUE(RunNode(b, n).ok());
    ExpectConverged(b, n);
    EXPECT_EQ(n.by_origin[ChangeOrigin::kExpiry], 1);
  }
}

// A fold rebuilt against a recreated stream keeps a surviving key at
// revision 0 until the new stream's message for it arrives: never with
// the old stream's deadline, which would delete it first.
TEST(RepairSimTest, ARebasedKeyKeepsNoOldStreamDeadline) {
  SimBucket b;
  b.SetHistoryOne(true);
  b.SetMessageTtl(std::chrono::milliseconds(0));
  b.PutWithTtl("k", "old", std::chrono::seconds(60));
  b.Put("other", "1");
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  b.Recreate();
  b.SetHistoryOne(true);
  b.SetMessageTtl(std::chrono::milliseconds(0));
  b.AdvanceTime(std::chrono::seconds(120));  // past the old deadline
  for (int i = 0; i < 5; ++i) b.Put("a." + std::to_string(i), "new");
  b.Put("k", "new");  // the new stream holds it, after other keys
  ASSERT_TRUE(RunNode(b, n).ok());
  ExpectConverged(b, n);
  EXPECT_EQ(n.by_origin[ChangeOrigin::kExpiry], 0) << "the hook saw a delete the bucket never had";
}

// With history, an uncovered put with a TTL of its own expires in turn,
// in the same run: its deadline is queued when it is uncovered.
TEST(RepairSimTest, AnUncoveredPutExpiresAtItsOwnDeadline) {
  TtlBucket t(std::chrono::milliseconds(0));  // no markers
  SimBucket& b = t.b;
  b.SetHistoryOne(false);
  b.Put("keep", "1");
  b.Put("k", "older");
  b.PutWithTtl("k", "mid", std::chrono::seconds(2));
  b.PutWithTtl("k", "short", std::chrono::seconds(1));
  Node n;
  WatchOptions o = t.Options(ExpiryRepair::kNone);
  o.until_caught_up = false;
  std::stop_source stop;
  o.stop = stop.get_token();
  int expiries = 0, reads = 0;
  b.on_read_stream = [&] {
    if (++reads >= 2000) stop.request_stop();  // about 10 s of idle probes
  };
  ASSERT_TRUE(RunNode(b, n, o, nullptr, [&](const Change& c) {
                if (c.origin == ChangeOrigin::kExpiry && ++expiries == 2) stop.request_stop();
                return Status::OK();
              }).ok());
  b.on_read_stream = nullptr;
  ASSERT_EQ(b.Truth(Scope())["k"].value, "older");
  ExpectConverged(b, n);
  EXPECT_EQ(n.by_origin[ChangeOrigin::kExpiry], 2);  // "short", then "mid"
}

// With history, a newer message of the key on its way through the delivery
// when its deadline passes is left to the delivery: folded once, as live.
TEST(RepairSimTest, ANewerMessageOnItsWayIsLeftToTheDelivery) {
  SimBucket b;  // history 64
  b.SetMessageTtl(std::chrono::milliseconds(0));
  b.Put("k", "old");
  b.PutWithTtl("k", "short-lived", std::chrono::seconds(5));
  Node n;
  ASSERT_TRUE(RunNode(b, n).ok());
  b.AdvanceTime(std::chrono::seconds(10));  // uncovers "old"
  b.Put("x", "1");                          // stored after the deadline
  b.Put("k", "new");
  int k_live = 0;
  ASSERT_TRUE(RunNode(b, n, Fast(), nullptr, [&](const Change& c) {
                if (c.key == "k") {
                  EXPECT_EQ(c.origin, ChangeOrigin::kLive) << "k's rewrite";
                  k_live += c.origin == ChangeOrigin::kLive;
                }
                return Status::OK();
              }).ok());
  ExpectConverged(b, n);
  EXPECT_EQ(k_live, 1);
}

// A key the server still holds long after its deadline (a restart well
// past it, an expiry timer far behind) is looked at about once a second,
// not at every turn of the loop.
TEST(RepairSimTest, AKeyTheServerStillHoldsIsLookedAtOnceASecond) {
  TtlBucket t(std::chrono::milliseconds(0));  // no markers
  SimBucket& b = t.b;
  b.SetHistoryOne(false);
  b.SetTtlLag(std::chrono::seconds(3));
  b.Put("k", "old");
  b.PutWithTtl("k", "short-lived", std::chrono::seconds(1));
  Node n;
  ASSERT_TRUE(RunNode(b, n, t.Options(ExpiryRepair::kNone)).ok());
  b.AdvanceTime(std::chrono::seconds(3));  // 2 s past the deadline, 1 s before the server acts
  WatchOptions o = t.Options(ExpiryRepair::kNone);
  o.until_caught_up = false;
  std::stop_source stop;
  o.stop = stop.get_token();
  int looks = 0, reads = 0;
  b.before_request = [&](std::string_view request) {
    looks += request == "last_of_key";
    if (request == "read_stream" && ++reads >= 2000) stop.request_stop();  // about 10 s
  };
  ASSERT_TRUE(RunNode(b, n, o, nullptr, [&](const Change& c) {
                if (c.origin == ChangeOrigin::kExpiry) stop.request_stop();
                return Status::OK();
              }).ok());
  b.before_request = nullptr;
  ExpectConverged(b, n);
  EXPECT_EQ(n.by_origin[ChangeOrigin::kExpiry], 1);
  EXPECT_LE(looks, 4) << "about one look a second while the server lags";
}

}  // namespace
}  // namespace kvfold
