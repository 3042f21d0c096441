// Kill campaign (issue 7): the real `kvfold mirror`, `export` and `seed`
// SIGKILLed at random moments against a real nats-server under continuous
// writes: mid catch-up, mid-relist on a history-1 bucket, mid-restore from
// exported artifacts on an evicting one, mid-export beside a running mirror
// and mid-seed. Each is restarted; at the end every fold is caught up and
// must equal the truth (invariant 3: a restart converges, never silently
// diverges). Prints one line to stdout: `kills: N, diverged: D`.
//
// KVFOLD_KILLS=N sets the number of kills (default 30; KVFOLD_KILLS_DEEP=1
// makes it 200). KVFOLD_KILLS_SEED=S replays the choices of a seed the test
// printed (timings still vary from run to run).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "core/base64.h"
#include "kvfold/artifact.h"
#include "kvfold/transport.h"
#include "live/cli_process.h"
#include "live/kv_client.h"
#include "live/nats_server.h"
#include "test_dir.h"

namespace kvfold::live {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// History 1, no limits: nothing evicts a current value, so a key listing is
// the truth and a mirror that comes back behind is repaired by relist.
constexpr char kHist[] = "hist";
// discard old + max_msgs: current values are evicted, so a mirror that
// comes back behind the stream's head is repaired from an artifact.
constexpr char kEvict[] = "evict";
constexpr uint64_t kEvictMaxMsgs = 10000;
// One expiry burst: more than half the evicting bucket's limit, so a fold
// that sleeps through two bursts is expired, and less than all of it, so the
// keeper, caught up between bursts, never is.
constexpr uint64_t kBurst = kEvictMaxMsgs * 11 / 20;

// The key space: three prefixes the scoped folds watch and one they never
// do. 5000 keys of 0.5-1.5 KB values make an artifact of two chunks and a
// repair long enough for a kill to land in it.
std::vector<std::string> KeyUniverse() {
  std::vector<std::string> keys;
  for (const auto& [prefix, n] : std::vector<std::pair<std::string, int>>{
           {"a.", 1500}, {"b.", 1500}, {"c.", 1500}, {"z.", 500}}) {
    for (int i = 0; i < n; ++i) keys.push_back(prefix + std::to_string(i));
  }
  return keys;
}

std::string Value(std::mt19937_64& rng) {
  std::string v(500 + rng() % 1000, 'a');
  for (auto& c : v) c = static_cast<char>('a' + rng() % 26);
  return v;
}

// The writer: acknowledged puts and deletes over both buckets, a few
// hundred per second, for the whole campaign. Bursts, KV purges and purges
// of delete markers run with the writer parked (Exclusive), so that a
// burst's sequences are contiguous and the recorded truth stays exact.
//
// KV purges run while the keeper mirror watches: nats-server 2.9.10 (what
// Debian ships; fixed upstream by nats-server PR #3838) moves every
// consumer whose filter covers a purged subject forward to the purge, so a
// watcher that is behind skips every retained message in between, its
// consumer sequence still contiguous. The watcher checks a purge that
// follows a jump against the stream's store and restarts its delivery.
class Writer {
 public:
  Writer(const std::string& url, uint64_t seed) : kv_(url), rng_(seed), keys_(KeyUniverse()) {}
  ~Writer() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  template <class Fn>
  void Exclusive(Fn fn) {
    std::lock_guard lock(mu_);
    fn(kv_, rng_);
  }
  const std::vector<std::string>& keys() const { return keys_; }
  uint64_t ops() const { return ops_; }
  const std::string& error() const { return error_; }
  KvClient& kv() { return kv_; }  // REQUIRES: stopped

 private:
  void Loop() {
    try {
      while (!stop_) {
        {
          std::lock_guard lock(mu_);
          const char* bucket = rng_() % 2 ? kHist : kEvict;
          const std::string& key = keys_[rng_() % keys_.size()];
          const int dice = static_cast<int>(rng_() % 100);
          if (dice < 75) {
            kv_.Put(bucket, key, Value(rng_));
          } else {
            kv_.Delete(bucket, key);
          }
          ++ops_;
        }
        std::this_thread::sleep_for(milliseconds(2));
      }
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }

  KvClient kv_;
  std::mt19937_64 rng_;
  const std::vector<std::string> keys_;
  std::mutex mu_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> ops_{0};
  std::string error_;
  std::thread thread_;
};

// A fold the campaign kills and restarts, and how its mirror is run.
struct Target {
  std::string name;
  std::string bucket;
  std::vector<std::string> scope;        // empty: the whole bucket
  std::vector<std::string> repair_args;  // --repair, --artifacts ...
  bool seeded = true;                    // a seed slot is mirrored once seeded
  bool needs_repair = false;             // an expiry happened while it was down
  // Started empty again after a round that finished, or at random after
  // one that was killed: its mirror is killed mid first sync, in its runs.
  bool first_syncs = false;
  bool synced = false;  // its last round ended unkilled
};

// The exit status of `pid` if it has ended (reaped), else nullopt.
std::optional<int> ExitedYet(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

class KillCampaignTest : public ::testing::Test {
 protected:
  KillCampaignTest() : admin_(server_.url()) {}

  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  std::string Arts() const { return "dir:" + Path("arts"); }

  CliExit Run(const std::vector<std::string>& args) { return RunCli(args, dir_.path()); }

  std::vector<std::string> MirrorArgs(const Target& t, bool until_caught_up) {
    std::vector<std::string> args = {"mirror",     "--server",         server_.url(),
                                     "--bucket",   t.bucket,           "--fold",
                                     Path(t.name), "--repair-timeout", "60s"};
    for (const auto& p : t.scope) {
      args.push_back("--scope");
      args.push_back(p);
    }
    args.insert(args.end(), t.repair_args.begin(), t.repair_args.end());
    if (until_caught_up) args.push_back("--until-caught-up");
    // Small batches spread a catch-up over many commits for a kill to fall
    // between; --no-sync is safe against a process kill (the OS keeps it).
    static const char* kBatches[] = {"50", "200", "1000"};
    args.push_back("--batch");
    args.push_back(kBatches[rng_() % 3]);
    // Small runs spread a first sync over many table files the same way.
    static const char* kRuns[] = {"16", "64", "4096"};
    args.push_back("--sync-run-kib");
    args.push_back(t.first_syncs ? kRuns[rng_() % 2] : kRuns[rng_() % 3]);
    if (rng_() % 2) args.push_back("--no-sync");
    // Half the time any catch-up of half the fold goes uncounted, so that
    // kills meet stale counts and a recount too.
    args.push_back("--recount-backlog");
    args.push_back(rng_() % 2 ? "1" : "100000");
    return args;
  }

  // The fold's committed cursor as `status` reads it beside a running
  // mirror; nullopt before the first commit or when it cannot be read.
  std::optional<uint64_t> Cursor(const std::string& name) {
    CliExit e = Run({"status", "--fold", Path(name), "--json"});
    if (e.code != 0) return std::nullopt;
    const json c = json::parse(e.out)["cursor"];
    if (!c.is_number_unsigned()) return std::nullopt;
    return c.get<uint64_t>();
  }

  void WaitKeeper(uint64_t seq) {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      auto c = Cursor("keeper");
      if (c && *c >= seq) return;
      std::this_thread::sleep_for(milliseconds(20));
    }
    FAIL() << "the keeper never reached " << seq << ": " << ReadWholeFile(Path("keeper.err"));
  }

  void StartKeeper() {
    keeper_ = SpawnCli({"mirror", "--server", server_.url(), "--bucket", kEvict, "--fold",
                        Path("keeper"), "--batch", "200"},
                       Path("keeper.out"), Path("keeper.err"));
  }

  void KillKeeper() {
    kill(keeper_, SIGKILL);
    if (WaitExit(keeper_) == 128 + SIGKILL) {
      ++kills_;
      ++kills_by_["keeper"];
    } else {
      ADD_FAILURE() << "the keeper had ended: " << ReadWholeFile(Path("keeper.err"));
    }
  }

  // Spawns `args`, kills it after `delay` unless it ended first; counts a
  // kill that ended a running process. Any other exit must be a success.
  // `repairing`: wait for the repair to start, then kill within `delay`;
  // likewise `wait_for`, a line of the mirror's log.
  int SpawnAndKill(const std::vector<std::string>& args, const std::string& name,
                   milliseconds delay, bool repairing = false, std::string wait_for = "") {
    const std::string err = Path(name + ".err");
    pid_t pid = SpawnCli(args, Path(name + ".out"), err);
    std::optional<int> code;
    if (repairing) wait_for = "repair: ";
    if (!wait_for.empty()) {
      const auto deadline = Clock::now() + std::chrono::seconds(5);
      while (!(code = ExitedYet(pid)) && Clock::now() < deadline &&
             !Contains(ReadWholeFile(err), wait_for)) {
        std::this_thread::sleep_for(milliseconds(1));
      }
    }
    if (!code) {
      std::this_thread::sleep_for(delay);
      kill(pid, SIGKILL);
      code = WaitExit(pid);
    }
    const std::string log = ReadWholeFile(err);
    if (*code == 128 + SIGKILL) {
      ++kills_;
      ++kills_by_[args[0]];
      if (Contains(log, "repair: ") && !Contains(log, "relist done") &&
          !Contains(log, "restore done")) {
        ++kills_mid_repair_;
      }
      if (Contains(log, kUncountedSaid) && !Contains(log, "recounted the fold")) {
        ++kills_uncounted_;
      }
    } else {
      EXPECT_EQ(*code, 0) << name << " ended by itself with " << *code << ": " << log;
    }
    return *code;
  }

  // Every artifact a killed export may have left is whole or not listed,
  // and the pointer names a whole one.
  void CheckArtifacts() {
    auto to = OpenTransport(Arts(), ConnectOptions{});
    ASSERT_TRUE(to.ok()) << to.status().ToString();
    auto all = ListArtifacts(**to, nullptr);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    for (const auto& m : *all) {
      if (!verified_.insert(m.artifact_id).second) continue;
      EXPECT_TRUE(VerifyArtifact(**to, m.artifact_id, {}).ok()) << m.artifact_id;
    }
    auto latest = LatestArtifactId(**to);
    ASSERT_TRUE(latest.ok()) << latest.status().ToString();
    EXPECT_TRUE(verified_.count(*latest)) << "the pointer names an unlisted artifact " << *latest;
  }

  // An export of the keeper, killed at a random moment; then, when asked
  // for, one that finishes so that a restore has a fresh artifact.
  // `within`: the kill falls in the second quarter of a clean export's
  // time (its process started, the artifact not yet published).
  void ExportRound(bool must_publish, bool within = false) {
    // Pruning to the newest few at once (no minimum age) also prunes the
    // artifact a killed seed was reading now and then.
    const std::vector<std::string> args = {"export", "--fold", Path("keeper"), "--to", Arts(),
                                           "--keep", "4",      "--min-age",    "0s"};
    const uint64_t delay =
        within ? export_ms_ / 4 + rng_() % (export_ms_ / 4 + 1) : rng_() % (2 * export_ms_ + 1);
    const int code = SpawnAndKill(args, "export", milliseconds(delay));
    CheckArtifacts();
    if (code != 0 && must_publish) {
      CliExit e = Run(args);
      ASSERT_EQ(e.code, 0) << e.err;
    }
  }

  // A seed into an empty (or half-seeded) slot, killed at a random moment
  // unless `killable` is false.
  void SeedRound(Target& slot, bool killable) {
    std::vector<std::string> args = {"seed", "--fold",   Path(slot.name), "--from",
                                     Arts(), "--bucket", kEvict};
    const std::string err = Path(slot.name + ".err");
    pid_t pid = SpawnCli(args, Path(slot.name + ".out"), err);
    if (killable) {
      std::this_thread::sleep_for(milliseconds(rng_() % (seed_ms_ + 1)));
      kill(pid, SIGKILL);
    }
    const int code = WaitExit(pid);
    if (code == 128 + SIGKILL) {
      ++kills_;
      ++kills_by_["seed"];
      return;
    }
    const std::string log = ReadWholeFile(err);
    if (code != 0 && Contains(log, "--discard-unfinished")) {
      // Its artifact was pruned by an export since the seed was killed.
      args.push_back("--discard-unfinished");
      CliExit e = Run(args);
      ASSERT_EQ(e.code, 0) << e.err;
      ++seeds_discarded_;
    } else {
      // A seed killed after its final commit leaves a seeded fold, which a
      // re-run refuses as not empty.
      ASSERT_TRUE(code == 0 || Contains(log, "not empty")) << log;
    }
    slot.seeded = true;
  }

  // Leaves every fold that is down now behind the stream's retained head.
  // hist: every delete marker is purged (what PurgeDeletes does) and every
  // live key rewritten, so the first retained sequence passes every cursor
  // and deletes a fold missed exist only as absences from the listing.
  // evict: two bursts, the keeper caught up after each.
  void ExpiryEpisode(Writer& writer, const char* bucket) {
    // KV purges while the keeper watches (see Writer): on nats-server
    // before 2.9.12 they move its consumer forward, which it must notice.
    writer.Exclusive([&](KvClient& kv, std::mt19937_64& rng) {
      for (int i = 0; i < 100; ++i) kv.Purge(bucket, writer.keys()[rng() % writer.keys().size()]);
    });
    if (bucket == std::string(kHist)) {
      writer.Exclusive([&](KvClient& kv, std::mt19937_64& rng) {
        const auto live = kv.Truth(kHist);
        std::vector<std::string> rewrite;
        for (const auto& key : writer.keys()) {
          if (live.count(key)) {
            rewrite.push_back(key);
          } else {
            kv.PurgeSubject(kHist, key);
          }
        }
        Burst(kv, rng, kHist, rewrite);
      });
    } else {
      for (int part = 0; part < 2; ++part) {
        uint64_t end = 0;
        writer.Exclusive([&](KvClient& kv, std::mt19937_64& rng) {
          std::vector<std::string> keys;
          for (uint64_t i = 0; i < kBurst; ++i)
            keys.push_back(writer.keys()[rng() % writer.keys().size()]);
          end = Burst(kv, rng, kEvict, keys);
        });
        WaitKeeper(end);
      }
    }
    for (auto& t : targets_) {
      if (t.bucket == bucket) t.needs_repair = true;
    }
    ++episodes_;
  }

  // Publishes a put of each key without waiting for acks, recording each
  // at the sequence it gets (nothing else writes meanwhile); the last one.
  uint64_t Burst(KvClient& kv, std::mt19937_64& rng, const char* bucket,
                 const std::vector<std::string>& keys) {
    const uint64_t base = kv.LastSeq(bucket);
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string value = Value(rng);
      kv.PutNoAck(bucket, keys[i], value);
      kv.RecordPut(bucket, keys[i], value, base + i + 1);
    }
    kv.Flush();
    kv.WaitForLastSeq(bucket, base + keys.size());
    return base + keys.size();
  }

  // One mirror run of `t`, killed at a random moment: while it catches up,
  // idles, or (targeted, mostly, when it is known to need one) repairs.
  // A mirror into a fold its last round left empty or partly synced,
  // killed a little after its first run landed (its cursor appeared).
  int FirstSyncRound(Target& t, bool until) {
    const uint64_t head = admin_.LastSeq(t.bucket);
    const bool empty = !std::filesystem::exists(Path(t.name));
    // Runs of a few dozen keys (MirrorArgs): many of them, and a kill
    // between two.
    pid_t pid = SpawnCli(MirrorArgs(t, until), Path(t.name + ".out"), Path(t.name + ".err"));
    std::optional<int> code;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!(code = ExitedYet(pid)) && Clock::now() < deadline && empty && !Cursor(t.name)) {
      std::this_thread::sleep_for(milliseconds(2));
    }
    if (!code) {
      std::this_thread::sleep_for(milliseconds(rng_() % (first_sync_ms_ / 4 + 1)));
      kill(pid, SIGKILL);
      code = WaitExit(pid);
    }
    if (*code == 128 + SIGKILL) {
      ++kills_;
      ++kills_by_["first sync"];
      // Between two runs: a cursor behind the head at the start, which
      // the first sync goes past.
      auto c = Cursor(t.name);
      if (empty && c && *c < head) ++kills_between_runs_;
    } else {
      EXPECT_EQ(*code, 0) << t.name << ": " << ReadWholeFile(Path(t.name + ".err"));
    }
    return *code;
  }

  // An expiry episode on the evict bucket and a fresh artifact, then the
  // folds behind it mirrored in turn, each killed `delay` after its repair
  // began, until one is killed mid-repair.
  void RepairKillRound(Writer& writer, milliseconds delay) {
    ExpiryEpisode(writer, kEvict);
    if (::testing::Test::HasFatalFailure()) return;
    ExportRound(/*must_publish=*/true);
    if (::testing::Test::HasFatalFailure()) return;
    for (auto& t : targets_) {
      if (t.bucket != std::string(kEvict) || !t.seeded || t.first_syncs ||
          !std::filesystem::exists(Path(t.name))) {
        continue;
      }
      SpawnAndKill(MirrorArgs(t, /*until_caught_up=*/false), t.name, delay, /*repairing=*/true);
      if (kills_mid_repair_ > 0) return;
    }
  }

  // A catch-up of every key on hist, larger than half of any fold of it:
  // a hist fold's mirror, with --recount-backlog 1, goes uncounted and is
  // killed within `delay` of saying so (before its recount, unless it
  // finished): its stale counts meet the next run, and the end's check.
  void UncountedKillRound(Writer& writer, milliseconds delay) {
    std::vector<Target*> hist;
    for (auto& t : targets_) {
      if (t.bucket != std::string(kHist) || t.first_syncs) continue;
      hist.push_back(&t);
      if (std::filesystem::exists(Path(t.name))) continue;  // else no round mirrored it yet
      CliExit first = Run(MirrorArgs(t, /*until_caught_up=*/true));
      ASSERT_EQ(first.code, 0) << t.name << ": " << first.err;
    }
    writer.Exclusive(
        [&](KvClient& kv, std::mt19937_64& rng) { Burst(kv, rng, kHist, writer.keys()); });
    for (Target* t : hist) {
      std::vector<std::string> args = MirrorArgs(*t, /*until_caught_up=*/false);
      *(std::find(args.begin(), args.end(), "--recount-backlog") + 1) = "1";
      SpawnAndKill(args, t->name, delay, /*repairing=*/false, kUncountedSaid);
      if (kills_uncounted_ > 0) return;
    }
  }

  Target& Fresh() {
    for (auto& t : targets_) {
      if (t.first_syncs) return t;
    }
    std::abort();
  }

  void MirrorRound(Target& t) {
    if (t.first_syncs && (t.synced || rng_() % 2)) {
      std::filesystem::remove_all(Path(t.name));
      t.synced = false;
    }
    const bool until = rng_() % 10 < 3;
    const bool targeted = t.needs_repair && rng_() % 4 != 0;
    const milliseconds delay(targeted ? rng_() % 80 : rng_() % 700);
    const int code = t.first_syncs ? FirstSyncRound(t, until)
                                   : SpawnAndKill(MirrorArgs(t, until), t.name, delay, targeted);
    if (t.first_syncs && code != 128 + SIGKILL) t.synced = true;
    const std::string log = ReadWholeFile(Path(t.name + ".err"));
    if (Contains(log, "relist done") || Contains(log, "restore done") || code == 0) {
      t.needs_repair = false;
    }
  }

  // The truth read from the stream itself, key by key: on hist (nothing
  // evicts a current value) it must be exactly what the writer recorded;
  // on evict, every key whose last message is still retained must agree.
  // Checks the oracle before the folds are judged by it.
  void CheckTruthAgainstStream(KvClient& kv, const char* bucket, bool complete) {
    const auto recorded = kv.Truth(bucket);
    int disagree = 0, absent = 0;
    for (const auto& key : KeyUniverse()) {
      auto stored = kv.StoredLast(bucket, key);
      auto it = recorded.find(key);
      if (!stored) {
        ++absent;
        if (complete && it != recorded.end()) ++disagree;
        continue;
      }
      if (stored->deleted ? it != recorded.end()
                          : (it == recorded.end() || !(it->second == *stored))) {
        if (++disagree <= 5)
          ADD_FAILURE() << bucket << ": the stream and the writer differ on " << key;
      }
    }
    EXPECT_EQ(disagree, 0) << bucket;
    std::fprintf(stderr, "kill campaign: %s: %zu live keys, %d with no retained message\n", bucket,
                 recorded.size(), absent);
  }

  // `dump --json` of a fold, parsed.
  std::map<std::string, Entry> Dump(const std::string& name) {
    CliExit e = Run({"dump", "--fold", Path(name), "--json"});
    EXPECT_EQ(e.code, 0) << e.err;
    std::map<std::string, Entry> out;
    std::istringstream lines(e.out);
    std::string line;
    while (std::getline(lines, line)) {
      json j = json::parse(line);
      out[j["key"]] = Entry{j["revision"].get<uint64_t>(), false,
                            core::Base64Decode(j["value"].get<std::string>()).value_or("<bad>")};
    }
    return out;
  }

  // Keys where the fold and the truth differ, plus one for a cursor that
  // is not the stream's last sequence.
  int Diverged(const std::string& name, const std::map<std::string, Entry>& truth,
               uint64_t last_seq) {
    const auto fold = Dump(name);
    int d = 0;
    for (const auto& [key, entry] : truth) {
      auto it = fold.find(key);
      if (it == fold.end() || !(it->second == entry)) {
        if (++d <= 5) {
          std::fprintf(stderr, "kill campaign: %s diverged on %s: truth rev %llu, fold %s\n",
                       name.c_str(), key.c_str(), static_cast<unsigned long long>(entry.revision),
                       it == fold.end() ? "missing"
                                        : ("rev " + std::to_string(it->second.revision)).c_str());
        }
      }
    }
    for (const auto& [key, entry] : fold) {
      if (!truth.count(key) && ++d <= 5) {
        std::fprintf(stderr, "kill campaign: %s holds %s (rev %llu) the truth does not\n",
                     name.c_str(), key.c_str(), static_cast<unsigned long long>(entry.revision));
      }
    }
    // The counts a converged (caught-up) fold stores are exact: status
    // counts for itself only while they are stale.
    CliExit status = Run({"status", "--fold", Path(name), "--json"});
    const json st = status.code == 0 ? json::parse(status.out) : json::object();
    const uint64_t keys = st.value("keys", uint64_t{0});
    if (keys != fold.size() || st.value("counts_stale", true)) {
      ++d;
      std::fprintf(stderr, "kill campaign: %s counts %llu live keys (stale: %s), holds %zu\n",
                   name.c_str(), static_cast<unsigned long long>(keys),
                   st.value("counts_stale", true) ? "yes" : "no", fold.size());
    }
    const auto cursor = Cursor(name);
    if (cursor != last_seq) {
      ++d;
      std::fprintf(stderr, "kill campaign: %s cursor %s, stream last_seq %llu\n", name.c_str(),
                   cursor ? std::to_string(*cursor).c_str() : "none",
                   static_cast<unsigned long long>(last_seq));
    }
    if (d > 0) {
      std::fprintf(stderr, "kill campaign: %s: %d diverged; status %s; its last mirror said:\n%s\n",
                   name.c_str(), d, Run({"status", "--fold", Path(name), "--json"}).out.c_str(),
                   ReadWholeFile(Path(name + ".err")).c_str());
    }
    return d;
  }

  NatsServer server_;
  KvClient admin_;
  TestDir dir_;
  std::mt19937_64 rng_;
  std::vector<Target> targets_;
  pid_t keeper_ = -1;
  uint64_t export_ms_ = 0, seed_ms_ = 0, first_sync_ms_ = 0;
  int kills_between_runs_ = 0;  // of a first sync: its fold partly synced
  // What a mirror logs as its catch-up goes uncounted.
  static constexpr char kUncountedSaid[] = "the fold's counts wait for one recount";
  int kills_uncounted_ = 0;
  int kills_ = 0, kills_mid_repair_ = 0, episodes_ = 0, seeds_discarded_ = 0;
  std::map<std::string, int> kills_by_;
  std::set<std::string> verified_;
};

int KillTarget() {
  if (const char* n = std::getenv("KVFOLD_KILLS")) return std::atoi(n);
  if (const char* deep = std::getenv("KVFOLD_KILLS_DEEP"); deep && std::string(deep) == "1") {
    return 200;
  }
  return 30;
}

TEST_F(KillCampaignTest, EveryKilledFoldConvergesToTheTruth) {
  const int target = KillTarget();
  const uint64_t seed = std::getenv("KVFOLD_KILLS_SEED")
                            ? std::strtoull(std::getenv("KVFOLD_KILLS_SEED"), nullptr, 10)
                            : std::random_device{}();
  std::fprintf(stderr, "kill campaign: seed %llu (KVFOLD_KILLS_SEED replays it), target %d kills\n",
               static_cast<unsigned long long>(seed), target);
  rng_.seed(seed);
  const auto started = Clock::now();

  admin_.CreateBucket(kHist, {{"max_msgs_per_subject", 1}});
  admin_.CreateBucket(kEvict, {{"max_msgs", kEvictMaxMsgs}, {"discard", "old"}});
  Writer writer(server_.url(), seed + 1);
  // Every key written once before the campaign, so repairs have work.
  writer.Exclusive([&](KvClient& kv, std::mt19937_64& rng) {
    Burst(kv, rng, kHist, writer.keys());
    Burst(kv, rng, kEvict, writer.keys());
  });
  StartKeeper();
  writer.Start();
  WaitKeeper(writer.keys().size());

  // One clean export and seed, timed, to spread the kills over their runs.
  auto t0 = Clock::now();
  ASSERT_EQ(Run({"export", "--fold", Path("keeper"), "--to", Arts()}).code, 0);
  export_ms_ = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
  t0 = Clock::now();
  ASSERT_EQ(Run({"seed", "--fold", Path("seed0"), "--from", Arts()}).code, 0);
  seed_ms_ = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
  t0 = Clock::now();
  ASSERT_EQ(Run({"mirror", "--server", server_.url(), "--bucket", kHist, "--fold",
                 Path("first-sync"), "--until-caught-up", "--sync-run-kib", "64"})
                .code,
            0);
  first_sync_ms_ = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
  std::filesystem::remove_all(Path("first-sync"));
  std::fprintf(
      stderr, "kill campaign: a clean export takes %llu ms, a seed %llu ms, a first sync %llu ms\n",
      static_cast<unsigned long long>(export_ms_), static_cast<unsigned long long>(seed_ms_),
      static_cast<unsigned long long>(first_sync_ms_));
  CheckArtifacts();

  const std::vector<std::string> restore = {"--repair", "restore", "--artifacts", Arts()};
  const std::vector<std::string> auto_restore = {"--artifacts", Arts()};  // auto -> restore
  targets_ = {
      {"h-ac", kHist, {"a.", "c."}, {"--repair", "relist"}},
      {"h-all", kHist, {}, {}},  // auto -> relist
      {"h-fresh", kHist, {}, {}, true, false, /*first_syncs=*/true},
      {"e-ab", kEvict, {"a.", "b."}, restore},
      {"e-all", kEvict, {}, auto_restore},
      {"seed0", kEvict, {}, auto_restore, true},
      {"seed1", kEvict, {}, auto_restore, false},
      {"seed2", kEvict, {}, auto_restore, false},
      {"seed3", kEvict, {}, auto_restore, false},
  };

  // At least one kill between the runs of a first sync, whatever the
  // dice say later.
  for (int tries = 0; tries < 5 && kills_between_runs_ == 0; ++tries) {
    std::filesystem::remove_all(Path("h-fresh"));
    FirstSyncRound(Fresh(), /*until=*/false);
  }
  auto last_export = Clock::now();
  for (int round = 0; kills_ < target; ++round) {
    ASSERT_LT(round, target * 10) << "too few rounds ended in a kill";
    ASSERT_TRUE(writer.error().empty()) << writer.error();
    // An artifact at most a few seconds old, so that a fold expired by the
    // writer's steady traffic alone still finds one inside retention.
    if (Clock::now() - last_export > std::chrono::seconds(3)) {
      ExportRound(/*must_publish=*/true);
      last_export = Clock::now();
      continue;
    }
    const int dice = static_cast<int>(rng_() % 100);
    if (dice < 12) {
      ExpiryEpisode(writer, rng_() % 2 ? kHist : kEvict);
      if (::testing::Test::HasFatalFailure()) return;
      ExportRound(/*must_publish=*/true);
      last_export = Clock::now();
    } else if (dice < 20) {
      ExportRound(/*must_publish=*/false);
    } else if (dice < 30) {
      std::vector<Target*> slots;
      for (auto& t : targets_) {
        if (!t.seeded) slots.push_back(&t);
      }
      if (slots.empty()) continue;
      SeedRound(*slots[rng_() % slots.size()], /*killable=*/true);
    } else if (dice < 36) {
      // The keeper, mirroring without pause under the writer, killed and
      // restarted at once (it must never fall out of retention).
      std::this_thread::sleep_for(milliseconds(rng_() % 200));
      KillKeeper();
      StartKeeper();
    } else {
      std::vector<Target*> ready;
      for (auto& t : targets_) {
        if (t.seeded) ready.push_back(&t);
      }
      // A quarter of the rounds are first syncs.
      MirrorRound(rng_() % 4 == 0 ? Fresh() : *ready[rng_() % ready.size()]);
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  // At least one kill mid-repair, whatever the dice said: the campaign's
  // rounds find a repair only after an expiry episode, and may kill every
  // one of them before it starts or after it ends. A restore takes about
  // a seed's time: the kill falls within its first half (its chunks are
  // committed under the old cursor), at its start only on the last try.
  for (int tries = 0; tries < 5 && kills_mid_repair_ == 0; ++tries) {
    RepairKillRound(writer, milliseconds(tries < 4 ? rng_() % (seed_ms_ / 2 + 1) : 0));
    if (::testing::Test::HasFatalFailure()) return;
  }
  // And one mid an uncounted catch-up: the first try kills within a first
  // sync's time of its start, the last at its start.
  for (int tries = 0; tries < 5 && kills_uncounted_ == 0; ++tries) {
    UncountedKillRound(writer, milliseconds(tries < 4 ? rng_() % (first_sync_ms_ / 2 + 1) : 0));
    if (::testing::Test::HasFatalFailure()) return;
  }
  // And at least one export killed (half of them finish first).
  for (int tries = 0; tries < 5 && kills_by_["export"] == 0; ++tries) {
    ExportRound(/*must_publish=*/true, /*within=*/true);
    if (::testing::Test::HasFatalFailure()) return;
  }
  const auto campaign_end = Clock::now();

  // The end: writes stop, the keeper catches up and exports, unfinished
  // seeds finish, and every fold catches up, unkilled.
  writer.Stop();
  ASSERT_TRUE(writer.error().empty()) << writer.error();
  KvClient& kv = writer.kv();
  const uint64_t hist_last = kv.LastSeq(kHist), evict_last = kv.LastSeq(kEvict);
  WaitKeeper(evict_last);
  kill(keeper_, SIGTERM);
  EXPECT_EQ(WaitExit(keeper_), 0) << ReadWholeFile(Path("keeper.err"));
  CliExit final_export = Run({"export", "--fold", Path("keeper"), "--to", Arts()});
  ASSERT_EQ(final_export.code, 0) << final_export.err;
  for (auto& t : targets_) {
    if (!t.seeded) SeedRound(t, /*killable=*/false);
    const std::string err = Path(t.name + ".err");
    const int code =
        WaitExit(SpawnCli(MirrorArgs(t, /*until_caught_up=*/true), Path(t.name + ".out"), err));
    EXPECT_EQ(code, 0) << t.name << ": " << ReadWholeFile(err);
  }

  CheckTruthAgainstStream(kv, kHist, /*complete=*/true);
  CheckTruthAgainstStream(kv, kEvict, /*complete=*/false);
  int diverged = 0;
  targets_.push_back({"keeper", kEvict, {}, {}});
  for (const auto& t : targets_) {
    auto scope = Scope::Make(t.scope.empty() ? std::vector<std::string>{""} : t.scope);
    ASSERT_TRUE(scope.ok());
    const int d = Diverged(t.name, kv.Truth(t.bucket, *scope),
                           t.bucket == std::string(kHist) ? hist_last : evict_last);
    diverged += d;
  }
  std::string by;
  for (const auto& [what, n] : kills_by_) by += " " + what + " " + std::to_string(n);
  std::fprintf(stderr,
               "kill campaign: killed%s; %d mid-repair; %d between the runs of a first sync; %d "
               "mid an uncounted catch-up; %d expiry episodes; %d seeds discarded; %llu writes; "
               "campaign %lld ms, whole test %lld ms\n",
               by.c_str(), kills_mid_repair_, kills_between_runs_, kills_uncounted_, episodes_,
               seeds_discarded_, static_cast<unsigned long long>(writer.ops()),
               static_cast<long long>(
                   std::chrono::duration_cast<milliseconds>(campaign_end - started).count()),
               static_cast<long long>(
                   std::chrono::duration_cast<milliseconds>(Clock::now() - started).count()));
  std::printf("kills: %d, diverged: %d\n", kills_, diverged);
  std::fflush(stdout);
  EXPECT_EQ(diverged, 0);
  EXPECT_GE(kills_, target);
  // Kills must have landed where the campaign says they do.
  EXPECT_GT(kills_mid_repair_, 0);
  EXPECT_GT(kills_between_runs_, 0);
  EXPECT_GT(kills_by_["export"], 0);
  EXPECT_GT(kills_uncounted_, 0);
}

}  // namespace
}  // namespace kvfold::live
