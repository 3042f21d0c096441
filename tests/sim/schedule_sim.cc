// The fault-schedule simulation (SPEC §2's claim, measured): every scenario
// runs under every fault schedule, through the product's own watcher,
// repair and restore code, against the simulated bucket, with the node's
// fold a REAL RocksDB fold on a fault-injecting in-memory file system, and
// artifacts exported mid-run. After each schedule the oracles decide.
//
//   kvfold_sim [--quick|--deep] [--fail-fast] [--scenario NAME] [--threads N] [--limit N]
//   [--verbose] [--count]
//
// Prints exactly one summary line, `sim: N schedules, M scenarios, D
// divergences`, and exits 1 when D > 0 (the first divergences are detailed
// on stderr). The default tier is sized for CI; --deep (nightly) adds every
// pair of commit faults and every commit fault crossed with every store
// fault, about ten times the schedules.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fold_view.h"
#include "kvfold/artifact.h"
#include "kvfold/repair.h"
#include "kvfold/watcher.h"
#include "sim/fault_env.h"
#include "sim/fault_fold.h"
#include "sim/instant_sleep_clock.h"
#include "sim/memory_transport.h"
#include "sim/sim_bucket.h"
#include "store/rocks_fold_env.h"

namespace kvfold::sim {
namespace {

// One injected fault: at a commit attempt (FaultFold) or at a write
// operation inside the store (FaultEnv), both counted over the schedule.
struct Injection {
  bool env = false;
  int at = 0;
  Fault commit = Fault::kNone;
  EnvFault file = EnvFault::kNone;
};

struct Schedule {
  std::vector<Injection> faults;
  int persistent_run = 0;  // this run of the node fails every commit (0: none)
  std::string Name() const {
    std::string n;
    for (const auto& f : faults) {
      if (!n.empty()) n += "+";
      n += std::string(f.env ? EnvFaultName(f.file) : FaultName(f.commit)) + "@" +
           std::to_string(f.at);
    }
    if (persistent_run > 0)
      n += (n.empty() ? "" : "+") + std::string("persistent@run") + std::to_string(persistent_run);
    return n.empty() ? "no-fault" : n;
  }
  // The name without the points: "crash-before+power-cut", a divergence's kind.
  std::string Kind() const {
    std::string k;
    for (const auto& f : faults) {
      if (!k.empty()) k += "+";
      k += f.env ? EnvFaultName(f.file) : FaultName(f.commit);
    }
    if (persistent_run > 0) k += (k.empty() ? "" : "+") + std::string("persistent");
    return k.empty() ? "no-fault" : k;
  }
};

struct Config {
  size_t batch = 1;
  bool server_filters = true;
  std::string Name() const {
    return "batch=" + std::to_string(batch) + (server_filters ? ",filtered" : ",unfiltered");
  }
};

enum class Expect { kOk, kCursorExpired };

// One schedule's world: the bucket, the node under test (RocksDB on the
// fault env, behind the commit-level fault wrapper), the domain state its
// apply hook keeps, an exporter node that keeps up, and the artifacts.
class Harness {
 public:
  Harness(const Config& config, const Schedule& schedule) : config_(config), schedule_(schedule) {
    b.set_idle_clock(&clock_);
    // The env's faults are armed before the first open: opening the
    // store writes too.
    for (const auto& f : schedule.faults) {
      if (f.env) env_.Add(static_cast<uint64_t>(f.at), f.file);
    }
    source_ = NewArtifactSource(artifacts_);
    if (!Open(/*first=*/true)) {  // recorded; the schedule runs on a stand-in
      rocks_ = NewMemoryFold();
      fault_fold_ = std::make_unique<FaultFold>(*rocks_);
    }
    for (const auto& f : schedule.faults) {
      if (!f.env) fault_fold_->Add(f.at, f.commit);
    }
  }

  SimBucket b;
  Scope scope;
  // The exporter node watches the whole bucket (a wider artifact serves
  // the scoped node) instead of the node's scope.
  bool whole_bucket_exporter = false;
  // The exporter's policy: none on a bucket where a first start needs an
  // artifact (per-message TTL), so that it can seed the fleet.
  ExpiryRepair exporter_repair = ExpiryRepair::kAuto;
  // The bucket's clock follows this schedule's own: per-message TTLs and
  // limit markers expire as the watcher's time passes.
  void UseServerClock() { b.set_time_clock(&clock_); }
  // Time passes on this schedule's clock (as a sleep would).
  void Sleep(std::chrono::milliseconds d) { clock_.SleepFor(d, {}); }

  WatchOptions Options() const {
    WatchOptions o;
    o.clock = &clock_;
    o.scope = scope;
    o.batch_size = config_.batch;
    // A first sync in runs of a few keys (some 136 bytes each, counting
    // their bookkeeping): each run boundary is a point to fail or die at.
    o.sync_run_bytes = 400 * config_.batch;
    o.commit_in_background = false;  // input-determined batches: reproducible
    o.linger = std::chrono::milliseconds(1);
    o.reconnect_backoff_min = std::chrono::milliseconds(1);
    o.reconnect_backoff_max = std::chrono::milliseconds(4);
    o.idle_probe = std::chrono::milliseconds(5);
    o.floor_check = std::chrono::milliseconds(0);
    o.repair_timeout = std::chrono::milliseconds(50);
    o.until_caught_up = true;
    // Without a hook (the exporter node) any catch-up of half the fold or
    // more goes uncounted and recounts at its end: exports meet stale counts.
    o.recount_backlog = 1;
    o.artifacts = source_.get();
    if (std::getenv("KVFOLD_SIM_LOG") != nullptr) {
      o.log = [](std::string_view l) {
        std::fprintf(stderr, "watch: %.*s\n", (int)l.size(), l.data());
      };
    }
    return o;
  }

  // Runs the node to completion the way an operator's supervisor would:
  // a run that a fault ended is a dead process, restarted on the reopened
  // store until it completes. A run without a fault must end as expected.
  void Run(WatchOptions o, Expect expect = Expect::kOk) {
    for (int life = 0; life < 16; ++life) {
      ++runs_;
      if (runs_ == schedule_.persistent_run) fault_fold_->FailEveryCommit();
      Status s = Watch(b, *fault_fold_, Hooked(o));
      last_run_ok_ = s.ok();
      if (std::getenv("KVFOLD_SIM_LOG") != nullptr) {
        auto m = fault_fold_->ReadMeta();
        std::fprintf(stderr, "sim: run %d: %s, cursor %s, bucket at %llu\n", runs_,
                     s.ToString().c_str(),
                     m.ok() && m->cursor ? std::to_string(*m->cursor).c_str() : "none",
                     static_cast<unsigned long long>(b.last_seq()));
      }
      // A fault since the store was opened (a store stays failed after a
      // write error) or a death.
      const bool faulted = Fired() != fired_at_open_ || fault_fold_->crashed() || env_.dead();
      if (!faulted) {
        const bool as_expected = expect == Expect::kOk ? s.ok() : s.IsCursorExpired();
        if (!as_expected) Diverge("run " + std::to_string(runs_) + " ended " + s.ToString());
        return;
      }
      if (s.ok() && !fault_fold_->crashed() && !env_.dead()) return;  // absorbed
      if (!Restart()) return;
    }
    Diverge("no convergence after 16 restarts");
  }

  // The exporter node: a clean memory fold that keeps up and exports.
  void KeepUpAndExport() {
    WatchOptions o = ExporterOptions();
    Status s = Watch(b, *exporter_, o);
    if (!s.ok()) return Diverge("exporter: " + s.ToString());
    Export(*exporter_);
  }
  void KeepUp() {
    WatchOptions o = ExporterOptions();
    Status s = Watch(b, *exporter_, o);
    if (!s.ok()) Diverge("exporter: " + s.ToString());
  }
  // A scenario's premise: the latest artifact is a re-attestation.
  void ExpectLatestReattested() {
    auto id = LatestArtifactId(artifacts_);
    auto m = id.ok() ? ReadArtifactManifest(artifacts_, *id, {})
                     : StatusOr<ArtifactManifest>(id.status());
    if (!m.ok() || m->attests.empty()) {
      Diverge("premise: the latest artifact is no re-attestation (" +
              (m.ok() ? m->artifact_id : m.status().ToString()) + ")");
    }
  }

  // Exports the node's own fold as it stands (mid-catch-up when called
  // from the hook). A dead or failing store may refuse; what is published
  // must restore to the truth at its cursor.
  void ExportNode() {
    if (fault_fold_->crashed() || env_.dead()) return;
    Export(*fault_fold_);
  }

  // Runs once per delivered change (after the oracle's bookkeeping).
  std::function<void(const Change&)> on_change;

  Fold& node() { return *fault_fold_; }
  int node_attempts() const { return fault_fold_->attempts(); }
  int runs() const { return runs_; }
  uint64_t env_operations() const { return env_.operations(); }
  // The store's operations in this schedule that were syncs.
  std::vector<int> env_syncs() const {
    std::vector<int> out;
    for (uint64_t op = 1; op <= env_.operations(); ++op) {
      if (env_.WasSync(op)) out.push_back(static_cast<int>(op));
    }
    return out;
  }

  // Writes straight into the node's store before its first run: setup,
  // not under test, so a fault that hits it is lived through.
  void Seed(const FoldCommit& c) {
    for (int tries = 0; tries < 4; ++tries) {
      if (rocks_->Commit(c).ok()) {
        RebuildHook();
        return;
      }
      if (!Restart()) return;
    }
    Diverge("seeding the node failed 4 times");
  }

  // The final oracles; returns the divergences found.
  std::vector<std::string> Finish() {
    // The store's background work (a flush, a compaction after an
    // ingestion) may still meet an armed fault after the last run
    // returned: no more faults, and a store that died that way is judged
    // after a restart, on what it made durable.
    env_.Disarm();
    if (env_.dead() && !fault_fold_->crashed()) Restart();
    if (!fault_fold_->crashed() && !env_.dead()) {
      auto live = LiveEntries(*fault_fold_);
      auto truth = b.Truth(scope);
      if (live != truth) Diverge("fold != truth: " + Diff(live, truth));
      if (hook_ != live) Diverge("hook state != fold: " + Diff(hook_, live));
      AtRest("final");
    } else {
      Diverge("the schedule ended with a dead store");
    }
    CheckExports();
    return divergences_;
  }

 private:
  WatchOptions ExporterOptions() const {
    WatchOptions o = Options();
    o.artifacts = nullptr;
    o.repair = exporter_repair;
    if (whole_bucket_exporter) o.scope = Scope();
    return o;
  }

  int Fired() const {
    return (fault_fold_ ? fault_fold_->fired() : 0) + static_cast<int>(env_.fired());
  }

  void Diverge(const std::string& what) {
    if (divergences_.size() < 4) divergences_.push_back(what);
  }

  static std::string Diff(const std::map<std::string, Entry>& a,
                          const std::map<std::string, Entry>& b) {
    std::string d;
    for (const auto& [k, e] : a) {
      auto it = b.find(k);
      if (it == b.end())
        d += " +" + k + "@" + std::to_string(e.revision);
      else if (!(it->second == e))
        d +=
            " ~" + k + "@" + std::to_string(e.revision) + "/" + std::to_string(it->second.revision);
    }
    for (const auto& [k, e] : b) {
      if (!a.contains(k)) d += " -" + k + "@" + std::to_string(e.revision);
    }
    return d.size() > 300 ? d.substr(0, 300) + "..." : d;
  }

  WatchOptions Hooked(WatchOptions o) {
    o.apply = [this](const Change& c) {
      const std::string key(c.key);
      if (b.created() != hook_stream_) {  // a recreated stream numbers anew
        hook_revision_.clear();
        hook_stream_ = b.created();
      }
      auto last = hook_revision_.find(key);
      if (c.origin == ChangeOrigin::kExpiry) {
        // An expiry ends a revision the hook saw (a delete at it, or the
        // key's previous message again), never a newer one.
        // (After a torn commit a re-run may expire what an earlier run
        // folded: whether the hook's own record of it survives is not
        // judged here; the fold and the hook's view are, at the end.)
        if (last != hook_revision_.end() && c.revision > last->second) {
          Diverge("hook: expiry of " + key + " at " + std::to_string(c.revision) +
                  ", newer than the hook saw");
        }
      } else if (last != hook_revision_.end() && c.revision <= last->second) {
        Diverge("hook: revision of " + key + " went backward to " + std::to_string(c.revision));
      }
      hook_revision_[key] = c.revision;
      if (c.op == Op::kPut) {
        hook_[key] = Entry{c.revision, false, std::string(c.value), c.expires_ns};
      } else {
        if (b.Truth(scope, c.revision).contains(key)) {
          Diverge("hook: phantom delete of " + key + " at " + std::to_string(c.revision));
        }
        hook_.erase(key);
      }
      if (on_change) on_change(c);
      return Status::OK();
    };
    o.on_applied = [this](uint64_t cursor) { promised_ = std::max(promised_, cursor); };
    return o;
  }

  void Export(Fold& fold) {
    ExportOptions eo;
    eo.chunk_raw_bytes = 256;  // many chunks: restores commit between them
    auto m = ExportArtifact(fold, artifacts_, eo);
    if (m.ok()) {
      exports_.push_back(m->artifact_id);
      return;
    }
    // Unchanged is the one outcome besides a new artifact: an export that
    // fails is judged, not skipped (issue 32). The one failure allowed: a
    // torn commit (entries without their cursor, a store that broke its
    // atomicity) leaves entries beyond the cursor, which the exporter
    // refuses to publish until the watch has caught up past them.
    const bool torn =
        std::any_of(schedule_.faults.begin(), schedule_.faults.end(),
                    [](const Injection& f) { return !f.env && f.commit == Fault::kTorn; });
    if (m.status().IsAlreadyExists()) return;
    if (torn && m.status().IsCorruption() &&
        m.status().message().find("beyond the fold's cursor") != std::string::npos) {
      return;
    }
    Diverge("an export failed: " + m.status().ToString());
  }

  // Opens the node's store (first time, or after a death). Opening writes
  // too, so the process may die or fail right there: it is started again.
  bool Open(bool first) {
    for (int tries = 0; tries < 4; ++tries) {
      const int fired = Fired();
      FoldOptions fo;  // durable commits, as shipped
      auto r = store::OpenRocksFoldOnEnv("/fold", fo, env_.env());
      if (r.ok() && !env_.dead()) {
        rocks_ = std::move(r).value();
        if (fault_fold_) {
          fault_fold_->Reattach(*rocks_);
        } else {
          fault_fold_ = std::make_unique<FaultFold>(*rocks_);
          fault_fold_->SetDeathCheck([this] { return env_.dead(); });
        }
        if (!first) AtRest("restart");
        RebuildHook();
        fired_at_open_ = Fired();
        return true;
      }
      if (!r.ok() && Fired() == fired) {
        Diverge("the store does not open: " + r.status().ToString());
        return false;
      }
      if (r.ok()) std::move(r).value().reset();  // it died while opening: gone
      env_.Restart();
    }
    Diverge("the store never opened");
    return false;
  }

  bool Restart() {
    ++restarts_;
    rocks_.reset();  // the dead process's store goes away
    env_.Restart();
    fault_fold_->StopFailing();  // the operator fixed the persistent failure
    if (Open(/*first=*/false)) return true;
    // Recorded; the rest of the schedule runs on a stand-in.
    rocks_ = NewMemoryFold();
    fault_fold_->Reattach(*rocks_);
    return false;
  }

  // The service's state after a restart is what the fold holds.
  void RebuildHook() {
    hook_.clear();
    hook_revision_.clear();
    // The revisions are of the stream the fold was mirrored from.
    auto meta = fault_fold_->ReadMeta();
    hook_stream_ = meta.ok() ? meta->stream_created : "";
    (void)fault_fold_->Scan("", true, [&](std::string_view k, const Entry& e) {
      hook_revision_[std::string(k)] = e.revision;
      if (!e.deleted) hook_[std::string(k)] = e;
      return true;
    });
  }

  // Consistency at rest (after a crash, and at the end).
  bool last_run_ok_ = false;

  void AtRest(const std::string& when) {
    auto meta = fault_fold_->ReadMeta();
    if (!meta.ok()) return Diverge(when + ": meta unreadable: " + meta.status().ToString());
    uint64_t live = 0, all = 0;
    std::map<std::string, Entry> entries;
    (void)fault_fold_->Scan("", true, [&](std::string_view k, const Entry& e) {
      ++all;
      if (!e.deleted) ++live;
      if (!scope.Contains(k)) Diverge(when + ": out-of-scope key " + std::string(k));
      entries.emplace(std::string(k), e);
      return true;
    });
    if (meta->counts_stale) {
      // A catch-up cut short leaves them stale; one that ended caught up
      // has recounted.
      if (when == "final" && last_run_ok_) Diverge(when + ": counts stale after a caught-up run");
    } else if (meta->live_keys != live || meta->entries != all) {
      Diverge(when + ": counters " + std::to_string(meta->live_keys) + "/" +
              std::to_string(meta->entries) + " but the fold holds " + std::to_string(live) + "/" +
              std::to_string(all));
    }
    const uint64_t cursor = meta->cursor.value_or(0);
    if (meta->stream_created == created_) {
      if (cursor < cursor_) {
        Diverge(when + ": cursor went backward from " + std::to_string(cursor_) + " to " +
                std::to_string(cursor));
      }
      if (cursor < promised_) {
        Diverge(when + ": on_applied reported " + std::to_string(promised_) +
                " but the store holds cursor " + std::to_string(cursor));
      }
    } else {
      promised_ = 0;  // a rebuilt fold starts the new stream's sequences over
    }
    created_ = meta->stream_created;
    cursor_ = cursor;
    // The cursor's meaning: fold + retained tail = truth, where the tail is
    // complete (nothing after the cursor evicted, same stream, no seed or
    // restore half done).
    if (b.created() != meta->stream_created || !meta->seeding.empty() || !meta->cursor ||
        !NoHoles()) {
      return;
    }
    b.ApplyTail(cursor, scope, &entries);
    auto truth = b.Truth(scope);
    if (entries != truth) Diverge(when + ": fold + tail != truth:" + Diff(entries, truth));
  }

  // Whether the retained messages carry every change: a message that is
  // gone is fine only when a later retained message of its key supersedes
  // it (history 1, a purge's roll-up). Eviction and a purged delete marker
  // leave holes, and a fold may have missed what fell into one, behind its
  // cursor as well as after it (only a repair or a reconcile can tell).
  bool NoHoles() const {
    std::map<std::string, uint64_t> last_retained;
    for (const auto& r : b.log()) {
      if (r.retained) last_retained[r.message.key] = r.message.seq;
    }
    for (const auto& r : b.log()) {
      if (r.retained) continue;
      auto it = last_retained.find(r.message.key);
      if (it == last_retained.end() || it->second < r.message.seq) return false;
    }
    return true;
  }

  // Every artifact published during the schedule restores to the truth: a
  // new node seeded from it catches up to the bucket. (An artifact is not
  // the truth at its cursor: a later purge has already rolled up what it
  // lacks.) One retention has left behind is refused, not restored.
  void CheckExports() {
    for (const auto& id : exports_) {
      auto fold = NewMemoryFold();
      SeedOptions so;
      so.artifact_id = id;
      auto m = SeedFold(*fold, artifacts_, so);
      if (!m.ok()) {
        Diverge("artifact " + id + " does not seed: " + m.status().ToString());
        continue;
      }
      if (m->stream_created != b.created()) continue;  // an older stream's
      WatchOptions o = Options();
      o.artifacts = nullptr;
      auto artifact_scope = Scope::Make(m->scope);
      if (!artifact_scope.ok()) {
        Diverge("artifact " + id + " has no usable scope");
        continue;
      }
      o.scope = *artifact_scope;
      Status s = Watch(b, *fold, o);
      if (s.IsCursorExpired()) {
        // Refused: only right when retention has left the artifact behind
        // (evicted past its cursor, or on a bucket with limit markers
        // anything stored after it, whose markers may be gone).
        auto st = b.ReadStream();
        const bool behind = !st.ok() || st->first_seq > m->cursor + 1 ||
                            (st->marker_ttl_ns > 0 && st->last_seq > m->cursor);
        if (!behind) {
          Diverge("a node seeded from " + id + " (cursor " + std::to_string(m->cursor) +
                  ") is refused though the stream holds everything after it: " + s.ToString());
        }
        continue;
      }
      if (!s.ok()) {
        Diverge("a node seeded from " + id + " does not catch up: " + s.ToString());
        continue;
      }
      auto live = LiveEntries(*fold);
      auto truth = b.Truth(o.scope);
      if (live != truth) Diverge("a node seeded from " + id + " != truth:" + Diff(live, truth));
    }
  }

  Config config_;
  Schedule schedule_;
  // This schedule's own clock: real time, except that sleeps and the
  // delivery's idle waits pass at once. Not shared with the other worker
  // threads, so their waits do not move it (batches cut by linger stay as
  // in the clean run the fault points were counted on).
  mutable InstantSleepClock clock_;
  FaultEnv env_;
  std::unique_ptr<Fold> rocks_;
  std::unique_ptr<FaultFold> fault_fold_;
  std::unique_ptr<Fold> exporter_ = NewMemoryFold();
  MemoryTransport artifacts_;
  std::unique_ptr<ArtifactSource> source_;
  std::vector<std::string> exports_;
  std::map<std::string, Entry> hook_;
  std::map<std::string, uint64_t> hook_revision_;
  std::string hook_stream_;
  uint64_t promised_ = 0;
  uint64_t cursor_ = 0;
  std::string created_;
  int runs_ = 0;
  int restarts_ = 0;
  int fired_at_open_ = 0;
  std::vector<std::string> divergences_;
};

// A mixed history over three prefixes: overwrites, deletes, purges, re-puts.
void WriteHistory(SimBucket& b, int from, int rounds) {
  for (int i = from; i < from + rounds; ++i) {
    const std::string n = std::to_string(i % 4);
    b.Put("a." + n, "v" + std::to_string(i));
    b.Put("b." + n, "w" + std::to_string(i));
    if (i % 3 == 1) b.Delete("a." + n);
    if (i % 5 == 2) b.Purge("b." + n);
    if (i % 4 == 3) b.Put("c", "c" + std::to_string(i));
  }
}

struct Scenario {
  const char* name;
  std::function<void(Harness&)> run;
  bool order_matters = false;  // also run with the server not filtering
};

std::vector<Scenario> Scenarios() {
  std::vector<Scenario> s;
  s.push_back({"normal", [](Harness& h) {
                 WriteHistory(h.b, 0, 8);
                 h.Run(h.Options());
               }});
  s.push_back({"resume", [](Harness& h) {
                 WriteHistory(h.b, 0, 4);
                 h.Run(h.Options());
                 WriteHistory(h.b, 4, 6);
                 h.Run(h.Options());
               }});
  s.push_back({"fresh-history-one", [](Harness& h) {
                 h.b.SetHistoryOne(true);
                 WriteHistory(h.b, 0, 8);
                 h.Run(h.Options());
                 WriteHistory(h.b, 8, 3);
                 h.Run(h.Options());
               }});
  s.push_back({"single-prefix",
               [](Harness& h) {
                 h.scope = *Scope::Make({"a."});
                 WriteHistory(h.b, 0, 4);
                 h.Run(h.Options());
                 WriteHistory(h.b, 4, 6);
                 h.Run(h.Options());
               },
               true});
  s.push_back({"multi-prefix",
               [](Harness& h) {
                 h.scope = *Scope::Make({"a.", "c"});
                 WriteHistory(h.b, 0, 4);
                 h.Run(h.Options());
                 WriteHistory(h.b, 4, 6);
                 h.Run(h.Options());
               },
               true});
  // Retention by size here, by count in the trip and auto scenarios, by
  // age in relist-refused-evicting: the watcher must treat them alike.
  s.push_back({"resume-expired", [](Harness& h) {
                 h.b.SetMaxBytes(20 * 21);  // about 20 messages
                 WriteHistory(h.b, 0, 3);
                 h.KeepUp();
                 h.Run(h.Options());
                 // About 33 messages more: retention passes the node's cursor.
                 for (int r = 3; r < 15; ++r) {
                   WriteHistory(h.b, r, 1);
                   h.KeepUp();
                 }
                 h.KeepUpAndExport();
                 h.b.Put("after.export", "x");
                 h.Run(h.Options());
               }});
  s.push_back({"mid-watch-trip", [](Harness& h) {
                 h.b.SetMaxMsgs(20);
                 WriteHistory(h.b, 0, 2);
                 h.KeepUp();
                 h.Run(h.Options());
                 WriteHistory(h.b, 2, 6);
                 bool overran = false;
                 h.on_change = [&](const Change& c) {
                   if (overran || c.origin != ChangeOrigin::kLive) return;
                   overran = true;  // the bucket races past the busy node
                   for (int r = 4; r < 10; ++r) {
                     WriteHistory(h.b, r, 1);
                     h.KeepUp();
                   }
                   h.KeepUpAndExport();
                 };
                 WatchOptions o = h.Options();
                 o.batch_size = std::min<size_t>(o.batch_size, 3);
                 h.Run(o);
                 h.on_change = nullptr;
                 h.Run(h.Options());  // whatever the trip left, a restart finishes
               }});
  s.push_back({"unanchored", [](Harness& h) {
                 WriteHistory(h.b, 0, 4);
                 FoldCommit stale;  // data without a cursor
                 stale.entries["a.0"] = Entry{1, false, "v0"};
                 stale.entries["gone"] = Entry{1, false, "deleted long ago"};
                 h.Seed(stale);
                 h.Run(h.Options());
               }});
  s.push_back({"mid-catch-up-artifacts", [](Harness& h) {
                 WriteHistory(h.b, 0, 3);
                 h.Run(h.Options());
                 WriteHistory(h.b, 3, 6);
                 int n = 0;
                 h.on_change = [&](const Change&) {
                   if (++n % 7 == 0) h.ExportNode();
                 };
                 h.Run(h.Options());
                 h.on_change = nullptr;
                 h.ExportNode();
               }});
  s.push_back({"relist-keep-current", [](Harness& h) {
                 h.b.SetHistoryOne(true);
                 WriteHistory(h.b, 0, 3);
                 h.Run(h.Options());
                 WriteHistory(h.b, 3, 6);
                 const uint64_t marker = h.b.Delete("b.1");
                 h.b.Put("a.0", "last");
                 h.b.PurgeMarker(marker);
                 WatchOptions o = h.Options();
                 o.repair = ExpiryRepair::kRelist;
                 o.listing_memory_keys = 3;  // spills
                 h.Run(o);
               }});
  s.push_back({"auto-relist", [](Harness& h) {
                 h.b.SetHistoryOne(true);
                 WriteHistory(h.b, 0, 3);
                 h.Run(h.Options());
                 WriteHistory(h.b, 3, 6);
                 const uint64_t marker = h.b.Delete("a.2");
                 h.b.PurgeMarker(marker);
                 h.Run(h.Options());  // auto: the listing is the truth here
               }});
  s.push_back({"auto-refuse-then-restore", [](Harness& h) {
                 h.b.SetMaxMsgs(15);
                 WriteHistory(h.b, 0, 2);
                 h.KeepUp();
                 h.Run(h.Options());
                 for (int r = 2; r < 14; ++r) {
                   WriteHistory(h.b, r, 1);
                   h.KeepUp();
                 }
                 h.Run(h.Options(), Expect::kCursorExpired);  // no artifact yet
                 h.KeepUpAndExport();
                 h.Run(h.Options());
               }});
  s.push_back({"relist-refused-evicting", [](Harness& h) {
                 h.b.SetMaxAge(std::chrono::seconds(40));
                 WriteHistory(h.b, 0, 2);
                 h.KeepUp();
                 h.Run(h.Options());
                 for (int r = 2; r < 14; ++r) {
                   h.b.AdvanceTime(std::chrono::seconds(10));
                   WriteHistory(h.b, r, 1);
                   h.KeepUp();
                 }
                 WatchOptions o = h.Options();
                 o.repair = ExpiryRepair::kRelist;
                 h.Run(o, Expect::kCursorExpired);
                 h.KeepUpAndExport();
                 o.repair = ExpiryRepair::kRestore;
                 h.Run(o);
               }});
  s.push_back({"purged-marker-reconcile", [](Harness& h) {
                 WriteHistory(h.b, 0, 4);
                 h.Run(h.Options());
                 const uint64_t marker = h.b.Delete("a.3");
                 h.b.Put("c", "after");
                 h.b.PurgeMarker(marker);
                 WatchOptions o = h.Options();
                 o.reconcile_every = std::chrono::milliseconds(1);
                 o.until_caught_up = false;
                 std::stop_source stop;
                 o.stop = stop.get_token();
                 o.log = [stop](std::string_view line) mutable {
                   if (line.find("reconcile done") != std::string_view::npos) stop.request_stop();
                 };
                 h.Run(o);
               }});
  s.push_back({"recreated-stream", [](Harness& h) {
                 WriteHistory(h.b, 0, 4);
                 h.Run(h.Options());
                 h.b.Recreate();
                 WriteHistory(h.b, 10, 3);
                 h.Run(h.Options());
                 WriteHistory(h.b, 13, 2);
                 h.Run(h.Options());
               }});
  s.push_back({"lagging-counters", [](Harness& h) {
                 WriteHistory(h.b, 0, 3);
                 h.Run(h.Options());
                 WriteHistory(h.b, 3, 4);
                 h.b.LagPending(8);
                 h.b.StallDeliveries(3);
                 h.Run(h.Options());
               }});
  s.push_back({"purge-while-behind",
               [](Harness& h) {
                 h.b.SetRollupSkips(true);  // nats-server < 2.9.12
                 WriteHistory(h.b, 0, 3);
                 h.Run(h.Options());
                 WriteHistory(h.b, 3, 4);
                 bool purged = false;
                 h.on_change = [&](const Change&) {
                   if (purged) return;
                   purged = true;  // stored while the delivery is behind
                   h.b.Put("a.9", "x");
                   h.b.Purge("b.1");
                   h.b.Put("c", "after the purge");
                 };
                 h.Run(h.Options());
                 h.on_change = nullptr;
                 h.Run(h.Options());  // what came after the first run's end
               },
               true});
  for (const bool history_one : {false, true}) {
    // The same during a fresh node's state sync: last-per-subject, or
    // sequential from the first retained message on a history-1 bucket.
    s.push_back({history_one ? "purge-during-history-one-sync" : "purge-during-sync",
                 [history_one](Harness& h) {
                   h.b.SetRollupSkips(true);
                   h.b.SetHistoryOne(history_one);
                   WriteHistory(h.b, 0, 6);
                   bool purged = false;
                   h.on_change = [&](const Change&) {
                     if (purged) return;
                     purged = true;
                     h.b.Put("a.9", "x");
                     h.b.Purge("b.1");
                   };
                   h.Run(h.Options());
                   h.on_change = nullptr;
                   h.Run(h.Options());
                 }});
  }
  // A whole-bucket exporter serves a node of two prefixes: what the
  // restore takes is filtered to the node's scope (the at-rest oracle
  // flags any key outside it).
  s.push_back({"scoped-from-wider",
               [](Harness& h) {
                 h.scope = *Scope::Make({"a.", "c"});
                 h.whole_bucket_exporter = true;
                 h.b.SetMaxMsgs(20);
                 WriteHistory(h.b, 0, 2);
                 h.KeepUp();
                 h.Run(h.Options());
                 for (int r = 2; r < 10; ++r) {
                   WriteHistory(h.b, r, 1);
                   h.KeepUp();
                 }
                 h.KeepUpAndExport();
                 h.Run(h.Options());
               },
               true});
  // The exporter folds one prefix; after its artifact only other prefixes
  // are written, evicting what the node missed: the exporter re-attests
  // (a manifest naming the same chunks at its new cursor), and the node
  // restores from that.
  s.push_back({"reattested",
               [](Harness& h) {
                 h.scope = *Scope::Make({"a."});
                 h.b.SetMaxMsgs(20);
                 WriteHistory(h.b, 0, 2);
                 h.KeepUp();
                 h.Run(h.Options());
                 WriteHistory(h.b, 2, 2);
                 h.KeepUpAndExport();
                 for (int i = 0; i < 24; ++i) {
                   h.b.Put("b.other" + std::to_string(i % 4), "x");
                   h.KeepUp();
                 }
                 h.KeepUpAndExport();
                 h.ExpectLatestReattested();
                 h.Run(h.Options());
               },
               true});
  // Deletes, purges and a put race the relist's listing.
  s.push_back({"relist-races-deletes", [](Harness& h) {
                 h.b.SetHistoryOne(true);
                 WriteHistory(h.b, 0, 3);
                 h.Run(h.Options());
                 WriteHistory(h.b, 3, 6);
                 bool raced = false;
                 h.b.during_listing = [&] {
                   if (raced) return;
                   raced = true;
                   h.b.Delete("a.1");
                   h.b.Purge("b.2");
                   h.b.Put("a.3", "raced");
                 };
                 h.Run(h.Options());
                 h.b.during_listing = nullptr;
                 h.Run(h.Options());  // what the race wrote after the first run's end
               }});
  // nats-server 2.11+ per-message TTL with limit markers: keys expire on
  // the server's clock, their markers expire in turn. The node resumes
  // inside the marker window (folding the markers) and restores from the
  // exporter's artifact outside it.
  s.push_back({"ttl-markers", [](Harness& h) {
                 using std::chrono::seconds;
                 h.UseServerClock();
                 h.b.SetHistoryOne(true);
                 h.b.SetMessageTtl(seconds(60));
                 h.exporter_repair = ExpiryRepair::kNone;
                 WriteHistory(h.b, 0, 3);
                 for (int i = 0; i < 3; ++i) {
                   h.b.PutWithTtl("a.t" + std::to_string(i), "t", seconds(30));
                 }
                 h.KeepUpAndExport();
                 h.Run(h.Options());  // a first start: restored from the artifact
                 WriteHistory(h.b, 3, 2);
                 h.b.PutWithTtl("b.t", "t", seconds(15));
                 h.b.AdvanceTime(seconds(20));  // b.t's marker, well inside the window
                 h.KeepUp();
                 h.Run(h.Options());
                 for (int r = 5; r < 13; ++r) {  // 80 s: the node's cursor leaves the window
                   h.b.AdvanceTime(seconds(10));
                   WriteHistory(h.b, r, 1);
                   h.KeepUp();
                 }
                 h.KeepUpAndExport();
                 h.Run(h.Options());
               }});
  // Per-message TTL without limit markers (issue 30, item 4): an expiry
  // leaves no trace, so the node deletes each key at its deadline, while
  // up and across restarts, and a key rewritten before its deadline stays.
  s.push_back({"ttl-no-markers", [](Harness& h) {
                 using std::chrono::seconds;
                 h.UseServerClock();
                 h.b.SetHistoryOne(true);
                 h.b.SetMessageTtl(std::chrono::milliseconds(0));
                 WriteHistory(h.b, 0, 3);
                 for (int i = 0; i < 3; ++i) {
                   h.b.PutWithTtl("a.t" + std::to_string(i), "t", seconds(10 * (i + 1)));
                 }
                 h.b.PutWithTtl("b.t", "t", seconds(5));
                 h.KeepUpAndExport();
                 h.Run(h.Options());
                 h.b.AdvanceTime(seconds(15));  // a.t0 and b.t expire
                 h.b.Put("a.t1", "rewritten");  // before its deadline, without a TTL
                 WriteHistory(h.b, 3, 1);
                 h.KeepUp();
                 h.Run(h.Options());
                 h.b.AdvanceTime(seconds(30));  // a.t2 expires
                 h.KeepUpAndExport();
                 h.Run(h.Options());
               }});
  // With history a TTL's expiry uncovers the key's previous message, and
  // no marker says so even where markers are on (nats-server writes one
  // only for a subject's last message).
  for (bool markers : {false, true}) {
    s.push_back({markers ? "ttl-history-markers" : "ttl-history", [markers](Harness& h) {
                   using std::chrono::seconds;
                   h.UseServerClock();
                   h.b.SetMessageTtl(markers ? std::chrono::milliseconds(30000)
                                             : std::chrono::milliseconds(0));
                   WriteHistory(h.b, 0, 2);
                   h.b.Put("a.t0", "before");
                   h.b.PutWithTtl("a.t0", "t", seconds(5));
                   h.b.PutWithTtl("b.t", "t", seconds(5));  // nothing under it
                   h.KeepUpAndExport();
                   h.Run(h.Options());
                   h.b.AdvanceTime(seconds(10));  // a.t0 uncovers "before"; b.t goes
                   h.b.PutWithTtl("a.t1", "t", seconds(5));
                   h.b.Delete("a.t1");
                   h.b.PutWithTtl("a.t1", "t", seconds(20));  // uncovers the delete
                   WriteHistory(h.b, 2, 1);
                   h.KeepUp();
                   h.Run(h.Options());
                   h.b.AdvanceTime(seconds(25));
                   h.KeepUpAndExport();
                   h.Run(h.Options());
                 }});
  }
  // Multi-change schedules (issue 32): the marker TTL raised, raised again
  // while the first raise is waited out, then lowered, with the node down
  // and up between the changes and keys expiring throughout.
  s.push_back({"ttl-marker-changes", [](Harness& h) {
                 using std::chrono::seconds;
                 h.UseServerClock();
                 h.b.SetHistoryOne(true);
                 h.b.SetMessageTtl(seconds(20));
                 h.exporter_repair = ExpiryRepair::kNone;
                 WriteHistory(h.b, 0, 2);
                 h.b.PutWithTtl("a.t0", "t", seconds(5));
                 h.KeepUpAndExport();
                 h.Run(h.Options());
                 h.b.SetMessageTtl(seconds(60));  // raised
                 h.b.PutWithTtl("a.t1", "t", seconds(5));
                 h.b.AdvanceTime(seconds(10));
                 h.KeepUp();
                 h.b.SetMessageTtl(seconds(120));  // raised again, mid-wait
                 h.b.PutWithTtl("b.t2", "t", seconds(5));
                 h.b.AdvanceTime(seconds(10));
                 h.Run(h.Options());
                 h.b.SetMessageTtl(seconds(10));  // lowered
                 for (int r = 2; r < 6; ++r) {
                   h.b.AdvanceTime(seconds(15));
                   WriteHistory(h.b, r, 1);
                   h.KeepUp();
                 }
                 h.KeepUpAndExport();
                 h.Run(h.Options());
               }});
  // Two lagging-view episodes in one watch (a replica behind twice), the
  // second long after the first began.
  s.push_back({"lagging-twice", [](Harness& h) {
                 WriteHistory(h.b, 0, 3);
                 h.Run(h.Options());
                 // Behind what the node has received: a lagging view.
                 const uint64_t behind = h.b.last_seq() - 1;
                 WriteHistory(h.b, 3, 2);
                 int reads = 0;
                 h.b.before_request = [&h, &reads, behind](std::string_view request) {
                   if (request != "read_stream") return;
                   ++reads;
                   if (reads == 1) h.b.ReportStaleHead(2, behind);
                   if (reads == 4) {
                     h.Sleep(std::chrono::seconds(300));
                     h.b.ReportStaleHead(2, behind);
                   }
                 };
                 h.Run(h.Options());
                 h.b.before_request = nullptr;
               }});
  s.push_back({"limit-markers", [](Harness& h) {
                 WriteHistory(h.b, 0, 3);
                 h.Run(h.Options());
                 h.b.LimitMarker("a.0");
                 h.b.LimitMarker("b.1");
                 WriteHistory(h.b, 3, 2);
                 h.Run(h.Options());
               }});
  return s;
}

struct Job {
  const Scenario* scenario;
  Config config;
  Schedule schedule;
};

// Each schedule kind of the issue, over the points a clean run reaches.
// Pairs look `window` points ahead (every pair with --deep).
std::vector<Schedule> Schedules(int commits, int ops, const std::vector<int>& syncs, int runs,
                                bool deep, bool quick) {
  const Fault kTransient[] = {Fault::kFailBefore, Fault::kFailAfter};
  const Fault kCrash[] = {Fault::kCrashBefore, Fault::kCrashAfter, Fault::kTorn};
  const EnvFault kEnv[] = {EnvFault::kError, EnvFault::kKill, EnvFault::kKillTorn,
                           EnvFault::kPowerCut};
  auto commit = [](int at, Fault f) { return Injection{false, at, f, EnvFault::kNone}; };
  std::vector<Schedule> out;
  out.push_back({});
  // Faults change the run (retries, restarts): look a little past the end.
  const int last = commits + 2;
  for (int at = 1; at <= last; ++at) {
    for (Fault f : kTransient) out.push_back({{commit(at, f)}});
    for (Fault f : kCrash) out.push_back({{commit(at, f)}});
  }
  for (int at = 1; at <= ops + 4; ++at) {
    for (EnvFault f : kEnv) out.push_back({{Injection{true, at, Fault::kNone, f}}});
  }
  // A sync that fails the Linux way ("fsyncgate": the pages it should have
  // written are dropped and a later sync succeeds), then the power cut, at
  // once or a few store writes later (in the failed process, or in the
  // restart that recovers from what the page cache still shows). No cursor
  // or on_applied may cover what the failed sync lost.
  for (int at : syncs) {
    for (int later : {1, 2, 4, 8, 16}) {
      if (quick && later > 2) break;
      out.push_back({{Injection{true, at, Fault::kNone, EnvFault::kSyncLost},
                      Injection{true, at + later, Fault::kNone, EnvFault::kPowerCut}}});
    }
  }
  // Several transient faults in one watch, each followed by successes: the
  // "consecutive failures" rule must not add them up.
  if (!quick) {
    for (int a = 1; a + 6 <= last + 6; ++a) {
      out.push_back({{commit(a, Fault::kFailBefore), commit(a + 3, Fault::kFailAfter),
                      commit(a + 6, Fault::kFailBefore)}});
    }
  }
  const int window = deep ? last : quick ? 0 : 8;
  for (int a = 1; a <= last; ++a) {
    for (int b = a + 1; b <= std::min(last, a + window); ++b) {
      for (Fault f1 : kTransient) {
        for (Fault f2 : kTransient) out.push_back({{commit(a, f1), commit(b, f2)}});
        for (Fault f2 : kCrash) out.push_back({{commit(a, f1), commit(b, f2)}});
      }
      for (Fault f1 : kCrash) {
        for (Fault f2 : kCrash) out.push_back({{commit(a, f1), commit(b, f2)}});
      }
    }
  }
  // The two fault layers crossed (--deep, ten times the CI tier): every
  // commit fault at every commit attempt, with every store fault at every
  // store write, before it (the run the commit fault then meets is a
  // recovered one) or after (the retry or the restart meets it, and must
  // not trust what the failed attempt wrote).
  if (deep) {
    for (int a = 1; a <= last; ++a) {
      for (Fault f : {Fault::kFailBefore, Fault::kFailAfter, Fault::kCrashBefore,
                      Fault::kCrashAfter, Fault::kTorn}) {
        for (int at = 1; at <= ops + 4; ++at) {
          for (EnvFault e : kEnv)
            out.push_back({{commit(a, f), Injection{true, at, Fault::kNone, e}}});
        }
      }
    }
  }
  for (int r = 1; r <= runs; ++r) {
    Schedule p;
    p.persistent_run = r;
    out.push_back(p);
  }
  return out;
}

struct Options {
  bool deep = false;
  bool quick = false;      // single faults at batch size 1 only (the mutation runs)
  bool fail_fast = false;  // stop at the first divergence
  bool verbose = false;
  bool count = false;  // count the schedules, run only the clean runs (sizing a tier)
  std::string only;
  int threads = 4;   // a schedule waits on its watcher's threads now and then
  size_t limit = 0;  // schedules per scenario and configuration (0: all)
};

int Main(const Options& opt) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Scenario> scenarios = Scenarios();
  std::vector<Job> jobs;
  int scenario_count = 0;
  for (const Scenario& sc : scenarios) {
    if (!opt.only.empty() && opt.only != sc.name) continue;
    ++scenario_count;
    std::vector<Config> configs = {{1, true}, {100, true}};
    if (sc.order_matters) configs.push_back({1, false}), configs.push_back({100, false});
    if (opt.quick) configs.resize(1);
    for (const Config& c : configs) {
      Harness clean(c, Schedule{});
      sc.run(clean);
      const int commits = clean.node_attempts();
      const int ops = static_cast<int>(clean.env_operations());
      const int runs = clean.runs();
      std::vector<Schedule> all =
          Schedules(commits, ops, clean.env_syncs(), runs, opt.deep, opt.quick);
      if (opt.limit > 0 && all.size() > opt.limit) all.resize(opt.limit);
      if (opt.verbose) {
        std::fprintf(stderr, "sim: %s %s: %d commits, %d store writes, %d runs, %zu schedules\n",
                     sc.name, c.Name().c_str(), commits, ops, runs, all.size());
      }
      for (auto& s : all) jobs.push_back(Job{&sc, c, std::move(s)});
    }
  }
  if (scenario_count == 0) {
    std::fprintf(stderr, "sim: no scenario named %s\n", opt.only.c_str());
    return 2;
  }
  if (opt.count) {
    std::printf("sim: %zu schedules, %d scenarios (counted; only the clean runs ran)\n",
                jobs.size(), scenario_count);
    return 0;
  }

  std::atomic<size_t> next{0};
  std::atomic<size_t> diverged{0};
  std::mutex out_mu;
  std::map<std::string, int> by_kind;
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      if (opt.fail_fast && diverged.load() > 0) break;
      const Job& j = jobs[i];
      Harness h(j.config, j.schedule);
      j.scenario->run(h);
      std::vector<std::string> d = h.Finish();
      if (d.empty()) continue;
      {
        std::lock_guard lock(out_mu);
        const std::string kind = j.schedule.Kind();
        ++by_kind[std::string(j.scenario->name) + " " + kind];
      }
      if (diverged++ < 10) {
        std::lock_guard lock(out_mu);
        std::fprintf(stderr, "DIVERGED %s [%s] %s:\n", j.scenario->name, j.config.Name().c_str(),
                     j.schedule.Name().c_str());
        for (const auto& line : d) std::fprintf(stderr, "  %s\n", line.c_str());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < opt.threads; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  const auto secs =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
          .count();
  for (const auto& [what, n] : by_kind) std::fprintf(stderr, "diverged: %s: %d\n", what.c_str(), n);
  if (opt.verbose) std::fprintf(stderr, "sim: %lld s\n", static_cast<long long>(secs));
  std::printf("sim: %zu schedules, %d scenarios, %zu divergences\n", jobs.size(), scenario_count,
              diverged.load());
  return diverged.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kvfold::sim

int main(int argc, char** argv) {
  kvfold::sim::Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--deep") {
      opt.deep = true;
    } else if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--fail-fast") {
      opt.fail_fast = true;
    } else if (a == "--verbose") {
      opt.verbose = true;
    } else if (a == "--count") {
      opt.count = true;
    } else if (a == "--scenario" && i + 1 < argc) {
      opt.only = argv[++i];
    } else if (a == "--threads" && i + 1 < argc) {
      opt.threads = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--limit" && i + 1 < argc) {
      opt.limit = static_cast<size_t>(std::atoll(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: kvfold_sim [--quick|--deep] [--fail-fast] [--scenario NAME] [--threads "
                   "N] [--limit N] [--verbose] [--count]\n");
      return 2;
    }
  }
  return kvfold::sim::Main(opt);
}
