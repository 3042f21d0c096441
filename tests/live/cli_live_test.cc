// The kvfold command as scripts use it: real processes, a real nats-server,
// exit codes and output formats checked exactly.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "core/base64.h"
#include "kvfold/fold.h"
#include "live/cli_process.h"
#include "live/kv_client.h"
#include "live/nats_server.h"
#include "test_keys.h"

namespace kvfold::live {
namespace {

using nlohmann::json;

using Exit = CliExit;

class CliLiveTest : public ::testing::Test {
 protected:
  CliLiveTest() : kv_(server_.url()) {}

  Exit Run(const std::vector<std::string>& args) { return RunCli(args, dir_.path()); }

  std::string Fold(const std::string& name = "fold") { return dir_.path() + "/" + name; }

  Exit Mirror(const std::string& bucket, const std::string& fold,
              std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"mirror", "--server", server_.url(), "--bucket",
                                     bucket,   "--fold",   fold,          "--until-caught-up"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Run(args);
  }

  // `dump --json` parsed back into key -> (revision, value).
  std::map<std::string, Entry> Dump(const std::string& fold) {
    Exit e = Run({"dump", "--fold", fold, "--json"});
    EXPECT_EQ(e.code, 0) << e.err;
    std::map<std::string, Entry> out;
    std::istringstream lines(e.out);
    std::string line, previous;
    while (std::getline(lines, line)) {
      json j = json::parse(line);
      EXPECT_EQ(j.size(), 3u) << line;
      const std::string key = j["key"];
      EXPECT_LT(previous, key) << "dump must be sorted by key bytes";
      previous = key;
      out[key] = Entry{j["revision"].get<uint64_t>(), false,
                       *core::Base64Decode(j["value"].get<std::string>())};
    }
    return out;
  }

  // Polls `status` until the fold's cursor reaches `cursor`; a fold a
  // starting mirror has not created yet is simply not there yet.
  bool WaitForCursor(const std::string& fold, uint64_t cursor) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      Exit e = Run({"status", "--fold", fold, "--json"});
      if (e.code == 0) {
        const json c = json::parse(e.out)["cursor"];  // null until the first commit
        if (c.is_number_unsigned() && c.get<uint64_t>() >= cursor) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  json Status(const std::string& fold) {
    Exit e = Run({"status", "--fold", fold, "--json"});
    EXPECT_EQ(e.code, 0) << e.err;
    return json::parse(e.out);
  }

  NatsServer server_;
  KvClient kv_;
  TestDir dir_;
};

TEST_F(CliLiveTest, MirrorThenDumpEqualsTheTruthAndStatusReportsIt) {
  kv_.CreateBucket("app");
  for (int i = 0; i < 40; ++i)
    kv_.Put("app", "cfg." + std::to_string(i % 12), "v" + std::to_string(i));
  kv_.Put("app", "bin", std::string("\x00\xfe\n\"", 4));
  kv_.Delete("app", "cfg.3");
  kv_.Purge("app", "cfg.4");
  Exit m = Mirror("app", Fold());
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(Dump(Fold()), kv_.Truth("app"));
  json st = Status(Fold());
  EXPECT_EQ(st["bucket"], "app");
  EXPECT_EQ(st["cursor"], kv_.LastSeq("app"));
  EXPECT_EQ(st["keys"], kv_.Truth("app").size());
  EXPECT_EQ(st["scope"], json::array({""}));
  EXPECT_TRUE(st["unfinished_seed"].is_null()) << st;
  // Text forms exist too.
  Exit text = Run({"status", "--fold", Fold()});
  EXPECT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("bucket:         app"), std::string::npos) << text.out;
  Exit scoped = Run({"dump", "--fold", Fold(), "--scope", "cfg.1"});
  EXPECT_EQ(scoped.code, 0);
  EXPECT_NE(scoped.out.find("cfg.10\t"), std::string::npos) << scoped.out;
  EXPECT_EQ(scoped.out.find("bin\t"), std::string::npos);
}

// `--filters-in-cache` reaches the fold: RocksDB's options file, written
// at every open by the writer, says whether table filters and indexes go
// through the block cache. A flag that stopped short of the fold would
// leave them in memory, and nothing else would show it.
TEST_F(CliLiveTest, FiltersInCacheReachesTheFoldAndTheMirrorStaysTrue) {
  auto filters_cached = [](const std::string& fold) -> std::optional<bool> {
    std::string newest;  // OPTIONS-NNNNNN: the latest open's
    for (const auto& e : std::filesystem::directory_iterator(fold)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with("OPTIONS-") && name > newest) newest = name;
    }
    std::ifstream in(fold + "/" + newest);
    for (std::string line; std::getline(in, line);) {
      if (line.find("cache_index_and_filter_blocks=") == std::string::npos ||
          line.find("with_high_priority") != std::string::npos) {
        continue;
      }
      return line.find("=true") != std::string::npos;
    }
    return std::nullopt;
  };
  kv_.CreateBucket("app");
  for (int i = 0; i < 30; ++i) kv_.Put("app", "k" + std::to_string(i), "v" + std::to_string(i));
  Exit plain = Mirror("app", Fold());
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(filters_cached(Fold()), false) << "held in memory by default";
  kv_.Put("app", "k3", "w");
  kv_.Delete("app", "k4");
  Exit cached = Mirror("app", Fold(), {"--filters-in-cache"});
  ASSERT_EQ(cached.code, 0) << cached.err;
  EXPECT_EQ(filters_cached(Fold()), true);
  EXPECT_EQ(Dump(Fold()), kv_.Truth("app"));
}

// A seed that stopped part way shows in status (a mirror refuses the fold
// until `kvfold seed` finishes it; the operator must be able to tell why).
TEST_F(CliLiveTest, StatusNamesAnUnfinishedSeed) {
  {
    auto fold = OpenRocksFold(Fold());
    ASSERT_TRUE(fold.ok()) << fold.status().ToString();
    FoldCommit part;
    part.entries["cfg.a"] = Entry{3, false, "from the first chunk"};
    part.bucket = "app";
    part.seeding = "art-1";
    ASSERT_TRUE((*fold)->Commit(part).ok());
  }
  json st = Status(Fold());
  EXPECT_EQ(st["unfinished_seed"], "art-1") << st;
  EXPECT_TRUE(st["cursor"].is_null()) << st;
  Exit text = Run({"status", "--fold", Fold()});
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("unfinished seed: from artifact art-1"), std::string::npos) << text.out;
  kv_.CreateBucket("app");
  Exit m = Mirror("app", Fold());
  EXPECT_NE(m.code, 0);
  EXPECT_NE(m.err.find("unfinished seed from artifact art-1"), std::string::npos) << m.err;
}

// Key lookups for scripts: get prints a value's bytes or exits 4 with
// nothing said; scan prints a prefix's keys as dump does.
TEST_F(CliLiveTest, GetAndScanAnswerScripts) {
  kv_.CreateBucket("look");
  const uint64_t seq = kv_.Put("look", "cfg.a", "alpha");
  kv_.Put("look", "cfg.b", "beta");
  kv_.Put("look", "bin", std::string("\x00\xfe", 2));
  kv_.Put("look", "gone", "x");
  kv_.Delete("look", "gone");
  ASSERT_EQ(Mirror("look", Fold()).code, 0);
  Exit a = Run({"get", "--fold", Fold(), "cfg.a"});
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, "alpha\n");
  Exit bin = Run({"get", "--fold", Fold(), "bin"});
  EXPECT_EQ(bin.out, std::string("\x00\xfe\n", 3)) << "the value's own bytes";
  Exit j = Run({"get", "--fold", Fold(), "cfg.a", "--json"});
  const json parsed = json::parse(j.out);
  EXPECT_EQ(parsed["revision"], seq);
  EXPECT_EQ(parsed["value"], "YWxwaGE=");
  for (const char* missing : {"nope", "gone"}) {
    Exit e = Run({"get", "--fold", Fold(), missing});
    EXPECT_EQ(e.code, 4) << missing;
    EXPECT_TRUE(e.out.empty() && e.err.empty()) << missing << ": " << e.out << e.err;
  }
  Exit scan = Run({"scan", "--fold", Fold(), "--prefix", "cfg."});
  EXPECT_EQ(scan.code, 0) << scan.err;
  EXPECT_EQ(scan.out, "cfg.a\t" + std::to_string(seq) + "\talpha\ncfg.b\t" +
                          std::to_string(seq + 1) + "\tbeta\n");
  Exit none = Run({"scan", "--fold", Fold(), "--prefix", "zz."});
  EXPECT_EQ(none.code, 0);
  EXPECT_TRUE(none.out.empty());
  Exit no_fold = Run({"get", "--fold", Fold("absent"), "k"});
  EXPECT_EQ(no_fold.code, 1) << "a missing fold is an error, not a missing key";
  EXPECT_FALSE(no_fold.err.empty());
}

TEST_F(CliLiveTest, ScopedMirrorAndRefusalOfAnotherBucketOrScope) {
  kv_.CreateBucket("one");
  kv_.CreateBucket("two");
  for (const char* k : {"a.1", "a.2", "b.1", "c.1"}) kv_.Put("one", k, "x");
  kv_.Put("two", "a.1", "y");
  Exit m = Mirror("one", Fold(), {"--scope", "a.", "--scope", "c."});
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(Dump(Fold()), kv_.Truth("one", *Scope::Make({"a.", "c."})));
  EXPECT_EQ(Status(Fold())["scope"], json::array({"a.", "c."}));
  const auto before = Dump(Fold());

  Exit other = Mirror("two", Fold(), {"--scope", "a.", "--scope", "c."});
  EXPECT_EQ(other.code, 1);
  EXPECT_NE(other.err.find("mirrors bucket one, not two"), std::string::npos) << other.err;
  Exit narrower = Mirror("one", Fold(), {"--scope", "a."});
  EXPECT_EQ(narrower.code, 1);
  EXPECT_NE(narrower.err.find("scope [a., c.]"), std::string::npos) << narrower.err;
  EXPECT_EQ(Dump(Fold()), before);
}

TEST_F(CliLiveTest, ExpiredCursorExitsThreeAndLeavesTheFoldUntouched) {
  kv_.CreateBucket("ev", {{"max_msgs", 25}, {"discard", "old"}});
  for (int i = 0; i < 10; ++i) kv_.Put("ev", "k" + std::to_string(i), "v");
  ASSERT_EQ(Mirror("ev", Fold()).code, 0);
  const auto dump_before = Dump(Fold());
  const json status_before = Status(Fold());
  for (int i = 0; i < 60; ++i) kv_.Put("ev", "later" + std::to_string(i), "w");
  Exit e = Mirror("ev", Fold());
  EXPECT_EQ(e.code, 3) << e.err;
  EXPECT_NE(e.err.find("cursor 10 expired"), std::string::npos) << e.err;
  // Auto, no artifact location: the refusal names the choices.
  EXPECT_NE(e.err.find("--artifacts"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("--repair none"), std::string::npos) << e.err;
  EXPECT_EQ(Dump(Fold()), dump_before);
  // Entries, cursor and counts untouched; only the eviction memo, a fact
  // about the bucket, is recorded.
  json status_after = Status(Fold());
  EXPECT_EQ(status_after["eviction_observed"], true);
  EXPECT_EQ(status_after["eviction_cause"], "volume");
  status_after["eviction_observed"] = status_before["eviction_observed"];
  status_after["eviction_cause"] = status_before["eviction_cause"];
  EXPECT_EQ(status_after, status_before);
}

TEST_F(CliLiveTest, UsageErrorsExitTwoAndHelpExitsZero) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"mirror", "--bucket", "b", "--fold", "f"},  // no --server
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(), "--batch", "0"},
           // CLI11 alone reads a negative count as the type's largest value.
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(), "--batch",
            "-1"},
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(), "--keep", "-2"},
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(),
            "--sync-run-kib", "-1"},
           {"export", "--fold", Fold(), "--to", "dir:x", "--keep", "-1"},
           {"audit", "--fold", Fold(), "--server", server_.url(), "--show", "-1"},
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(), "--scope",
            "a b"},
           {"mirror", "--server", server_.url(), "--bucket", "b.c", "--fold", Fold()},
           {"mirror", "--server", server_.url(), "--bucket", "", "--fold", Fold(), "--export-to",
            "dir:x", "--export-every", "1m"},
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(), "--user", "u"},
           {"dump", "--fold", Fold(), "--bogus"},
           {"export", "--fold", Fold(), "--to", "ftp:x"},
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(), "--export-to",
            "x"},
           {"seed", "--fold", Fold(), "--from", "dir:x", "--password", "p"},
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(), "--repair",
            "sometimes"},
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(), "--artifacts",
            "ftp:x"},
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(),
            "--repair-timeout", "soon"},
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(),
            "--request-timeout", "0s"},
           {"seed", "--fold", Fold(), "--from", "dir:x", "--request-timeout", "later"},
           {"mirror", "--server", server_.url(), "--bucket", "b", "--fold", Fold(),
            "--require-signature"},
           {"artifacts", "list", "dir:x", "--user", "u"},
           {"artifacts", "verify", "dir:x", "--require-signature"},
           {"artifacts", "prune", "dir:x", "--keep", "0"},
           {"frobnicate"},
       }) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    Exit e = Run(args);
    EXPECT_EQ(e.code, 2) << joined << "\n" << e.err;
    EXPECT_FALSE(e.err.empty()) << joined;
  }
  for (const char* cmd : {"mirror", "dump", "scan", "get", "status", "export", "seed"}) {
    Exit e = Run({cmd, "--help"});
    EXPECT_EQ(e.code, 0) << cmd;
    EXPECT_NE(e.out.find("--fold"), std::string::npos) << cmd;
  }
  // The flag at fault is named.
  for (const auto& [args, needle] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--bucket", "", "--export-to", "dir:x", "--export-every", "1m"}, "--bucket"},
           {{"--bucket", "b", "--ready-max-lag", "5s"}, "--ready-max-lag needs --metrics-addr"},
           {{"--bucket", "b", "--metrics-addr", "127.0.0.1:0", "--ready-max-lag", "1500ms"},
            "--ready-max-lag 1500ms is below 2s"},
       }) {
    std::vector<std::string> full = {"mirror", "--server", server_.url(), "--fold", Fold()};
    full.insert(full.end(), args.begin(), args.end());
    Exit e = Run(full);
    EXPECT_EQ(e.code, 2) << e.err;
    EXPECT_NE(e.err.find(needle), std::string::npos) << e.err;
  }
  // Nothing was created by the refused runs.
  EXPECT_FALSE(std::filesystem::exists(Fold()));
}

// A scheduled export that cannot work is refused before mirroring starts,
// not logged every round while the mirror runs for hours without exporting.
TEST_F(CliLiveTest, ScheduledExportSetupIsCheckedBeforeMirroring) {
  kv_.CreateBucket("app");
  kv_.Put("app", "k", "v");
  const std::string not_a_key = dir_.path() + "/not-a-key.pem";
  std::ofstream(not_a_key) << "hello\n";
  const std::string arts = "dir:" + dir_.path() + "/arts";
  for (const auto& [extra, needle] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--export-every", "99999999999999999999h"}, "out of range"},
           {{"--export-every", "9999999999999h"}, "out of range"},
           {{"--export-every", "1m", "--lease-bucket", "bad.name"}, "--lease-bucket"},
           {{"--export-every", "1m", "--sign-key", not_a_key}, "--sign-key"},
       }) {
    std::vector<std::string> args = {"--export-to", arts};
    args.insert(args.end(), extra.begin(), extra.end());
    Exit e = Mirror("app", Fold(), args);
    EXPECT_EQ(e.code, 2) << extra.back() << "\n" << e.err;
    EXPECT_NE(e.err.find(needle), std::string::npos) << e.err;
    EXPECT_FALSE(std::filesystem::exists(Fold())) << "nothing mirrored";
  }
  Exit ok = Mirror("app", Fold(), {"--export-to", arts, "--export-every", "1h"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ok.err.find("marker window"), std::string::npos) << ok.err;
}

// Issue 30: on a bucket that evicts by volume and writes limit markers, an
// export period longer than the marker window is said at start; the
// status names the memo's cause.
TEST_F(CliLiveTest, ExportsFurtherApartThanTheMarkerWindowAreWarnedOf) {
  kv_.CreateBucket("vol", {{"max_msgs", 5},
                           {"discard", "old"},
                           {"allow_msg_ttl", true},
                           {"subject_delete_marker_ttl", int64_t{2} * 1000 * 1000 * 1000}});
  if (!kv_.HasLimitMarkers("vol")) GTEST_SKIP() << "this server has no limit markers";
  const std::string arts = "dir:" + dir_.path() + "/arts";
  Exit e = Mirror("vol", Fold(), {"--export-to", arts, "--export-every", "1h", "--repair", "none"});
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.err.find("longer than the marker window of bucket vol"), std::string::npos) << e.err;
  for (int i = 0; i < 10; ++i) kv_.Put("vol", "k" + std::to_string(i), "v");
  Exit again = Mirror("vol", Fold(), {"--repair", "none"});
  EXPECT_EQ(again.code, 0) << again.err;
  const json status = Status(Fold());
  EXPECT_EQ(status["eviction_observed"], true) << status.dump();
  EXPECT_EQ(status["eviction_cause"], "volume") << status.dump();
  // An artifact says until when its anchor keeps it restorable.
  ASSERT_EQ(Run({"export", "--fold", Fold(), "--to", arts}).code, 0);
  Exit inspect = Run({"artifacts", "inspect", arts, "--json"});
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  const json m = json::parse(inspect.out);
  EXPECT_EQ(m["marker_ttl_seconds"], 2.0) << m.dump();
  ASSERT_TRUE(m["anchored"].is_string()) << m.dump();
  ASSERT_TRUE(m["current_by_window_until"].is_string()) << m.dump();
  EXPECT_GT(m["current_by_window_until"].get<std::string>(), m["anchored"].get<std::string>());
  Exit text = Run({"artifacts", "inspect", arts});
  EXPECT_NE(text.out.find("a restore takes it until"), std::string::npos) << text.out;
  // So does the status of a fold, given where its artifacts are.
  Exit st = Run({"status", "--fold", Fold(), "--artifacts", arts, "--json"});
  ASSERT_EQ(st.code, 0) << st.err;
  const json latest = json::parse(st.out)["latest_artifact"];
  EXPECT_EQ(latest["artifact"], m["artifact"]) << st.out;
  EXPECT_EQ(latest["current_by_window_until"], m["current_by_window_until"]) << st.out;
  EXPECT_TRUE(latest["anchor_age_seconds"].is_number()) << st.out;
  EXPECT_TRUE(latest["inside_window"].is_boolean()) << st.out;
  Exit st_text = Run({"status", "--fold", Fold(), "--artifacts", arts});
  EXPECT_NE(st_text.out.find("latest artifact: " + m["artifact"].get<std::string>()),
            std::string::npos)
      << st_text.out;
  Exit nowhere = Run({"status", "--fold", Fold(), "--artifacts", "dir:" + dir_.path() + "/none"});
  EXPECT_EQ(nowhere.code, 1) << nowhere.err;
  EXPECT_NE(nowhere.err.find("--artifacts"), std::string::npos) << nowhere.err;
}

// A mirror that signs its exports (--sign-key) restores only what a key it
// trusts signed: its own, without naming it again as --trusted-key. An
// unsigned artifact in its location (anyone who can write there can put
// one) is refused and the fold stays empty (issue 36).
TEST_F(CliLiveTest, AMirrorThatSignsRestoresOnlySignedArtifacts) {
  kv_.CreateBucket("sig", {{"max_msgs", 5}, {"discard", "old"}});
  for (int i = 0; i < 20; ++i) kv_.Put("sig", "k" + std::to_string(i), "v");
  ASSERT_EQ(Mirror("sig", Fold("a"), {"--repair", "none"}).code, 0);
  auto [priv, pub] = MakeKeyPair(dir_.path(), "exporter");
  const std::string arts = "dir:" + dir_.path() + "/arts";
  ASSERT_EQ(Run({"export", "--fold", Fold("a"), "--to", arts}).code, 0);
  const std::vector<std::string> restore = {"--artifacts",      arts, "--sign-key", priv,
                                            "--repair-timeout", "1s"};
  Exit refused = Mirror("sig", Fold("b"), restore);
  EXPECT_EQ(refused.code, 3) << refused.err;
  EXPECT_NE(refused.err.find("unsigned"), std::string::npos) << refused.err;
  EXPECT_TRUE(Dump(Fold("b")).empty());
  kv_.Put("sig", "k1", "v2");  // a newer artifact, signed this time
  ASSERT_EQ(Mirror("sig", Fold("a"), {"--repair", "none"}).code, 0);
  ASSERT_EQ(Run({"export", "--fold", Fold("a"), "--to", arts, "--sign-key", priv}).code, 0);
  Exit restored = Mirror("sig", Fold("b"), restore);
  ASSERT_EQ(restored.code, 0) << restored.err;
  EXPECT_EQ(Dump(Fold("b")), Dump(Fold("a")));
}

TEST_F(CliLiveTest, UnreachableServerAndMissingFoldAreClearErrors) {
  const std::string dead = "nats://127.0.0.1:" + std::to_string(FreePort());
  Exit e = Run({"mirror", "--server", dead, "--bucket", "b", "--fold", Fold()});
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find("cannot connect to " + dead), std::string::npos) << e.err;
  EXPECT_FALSE(std::filesystem::exists(Fold()));
  Exit missing = Run({"mirror", "--server", server_.url(), "--bucket", "nope", "--fold", Fold()});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("bucket nope does not exist"), std::string::npos) << missing.err;
  // Reading a location that does not exist names it and creates nothing.
  for (int again = 0; again < 2; ++again) {
    Exit list = Run({"artifacts", "list", "obj:nope", "--server", server_.url()});
    EXPECT_EQ(list.code, 1);
    EXPECT_NE(list.err.find("object store bucket nope does not exist"), std::string::npos)
        << list.err;
  }
  Exit seed = Run({"seed", "--fold", Fold("seeded"), "--from", "dir:" + Fold("no-arts")});
  EXPECT_EQ(seed.code, 1);
  EXPECT_NE(seed.err.find("no artifact directory at"), std::string::npos) << seed.err;
  EXPECT_FALSE(std::filesystem::exists(Fold("no-arts")));
  EXPECT_FALSE(std::filesystem::exists(Fold("seeded")));
  Exit status = Run({"status", "--fold", Fold("never")});
  EXPECT_EQ(status.code, 1);
  EXPECT_NE(status.err.find("no fold at"), std::string::npos) << status.err;
}

// status and dump read a fold while a mirror process writes it; SIGTERM
// makes the mirror flush and exit 0.
TEST_F(CliLiveTest, ReadersWorkWhileMirrorRunsAndSigtermFlushes) {
  kv_.CreateBucket("live");
  uint64_t last = 0;
  for (int i = 0; i < 20; ++i) last = kv_.Put("live", "k" + std::to_string(i), "v0");
  const std::string out = dir_.path() + "/mirror.out", err = dir_.path() + "/mirror.err";
  pid_t mirror = SpawnCli(
      {"mirror", "--server", server_.url(), "--bucket", "live", "--fold", Fold()}, out, err);
  // Once the mirror has created its fold, every read must succeed.
  ASSERT_TRUE(WaitForCursor(Fold(), last)) << ReadWholeFile(err);
  for (int round = 1; round <= 5; ++round) {
    for (int i = 0; i < 200; ++i) {
      last = kv_.Put("live", "k" + std::to_string(i % 50), "v" + std::to_string(round));
    }
    // Read while it writes: never blocks, never fails.
    Exit s = Run({"status", "--fold", Fold(), "--json"});
    ASSERT_EQ(s.code, 0) << s.err;
    Exit d = Run({"dump", "--fold", Fold(), "--json"});
    ASSERT_EQ(d.code, 0) << d.err;
  }
  EXPECT_TRUE(WaitForCursor(Fold(), last));
  kill(mirror, SIGTERM);
  EXPECT_EQ(WaitExit(mirror), 0) << ReadWholeFile(err);
  EXPECT_EQ(Status(Fold())["cursor"], last);
  EXPECT_EQ(Dump(Fold()), kv_.Truth("live"));
}

// A mirror killed with SIGKILL mid-stream resumes and converges.
TEST_F(CliLiveTest, MirrorKilledWithSigkillResumesToTheTruth) {
  kv_.CreateBucket("kill");
  const std::string out = dir_.path() + "/mirror.out", err = dir_.path() + "/mirror.err";
  pid_t mirror = SpawnCli(
      {"mirror", "--server", server_.url(), "--bucket", "kill", "--fold", Fold(), "--batch", "7"},
      out, err);
  for (int i = 0; i < 3000; ++i) {
    kv_.Put("kill", "k" + std::to_string(i % 300), "v" + std::to_string(i));
    if (i == 1500) kill(mirror, SIGKILL);
  }
  WaitExit(mirror);
  Exit resumed = Mirror("kill", Fold());
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(Dump(Fold()), kv_.Truth("kill"));
  EXPECT_EQ(Status(Fold())["cursor"], kv_.LastSeq("kill"));
}

// Issue 6, live 9: SIGKILL mid-restore (between chunks), several times,
// then a restart: the restore completes and the fold equals the exporter's
// and the truth. (The hook's view across such crashes is checked in process
// by RepairSimTest.CrashAtEveryRestoreCommitThenRestartConverges.)
TEST_F(CliLiveTest, MirrorKilledMidRestoreFinishesTheRestoreOnRestart) {
  kv_.CreateBucket("rk", {{"max_msgs", 30000}, {"discard", "old"}, {"max_msgs_per_subject", 1}});
  auto burst = [&](int from, int n, const std::string& value) {
    const uint64_t base = kv_.LastSeq("rk");
    for (int i = 0; i < n; ++i) {
      const std::string key = "k" + std::to_string(from + i);
      kv_.PutNoAck("rk", key, value);
      kv_.RecordPut("rk", key, value, base + i + 1);
    }
    kv_.Flush();
    kv_.WaitForLastSeq("rk", base + n);
  };
  burst(0, 1000, "v0");
  ASSERT_EQ(Mirror("rk", Fold("b")).code, 0);
  ASSERT_EQ(Mirror("rk", Fold("a")).code, 0);
  for (int part = 0; part < 4; ++part) {  // evicts past B's cursor; A keeps up
    burst(1000 + part * 10000, 10000, "v1");
    ASSERT_EQ(Mirror("rk", Fold("a")).code, 0);
  }
  kv_.Delete("rk", "k5");
  ASSERT_EQ(Mirror("rk", Fold("a")).code, 0);
  const std::string arts = "dir:" + dir_.path() + "/arts";
  ASSERT_EQ(Run({"export", "--fold", Fold("a"), "--to", arts}).code, 0);
  const std::vector<std::string> args = {
      "mirror",  "--server",          server_.url(), "--bucket", "rk",      "--fold",
      Fold("b"), "--until-caught-up", "--artifacts", arts,       "--batch", "200"};
  const std::string out = dir_.path() + "/m.out", err = dir_.path() + "/m.err";
  int killed = 0;
  for (int delay_ms : {150, 300, 450}) {
    pid_t m = SpawnCli(args, out, err);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(m, SIGKILL);
    if (WaitExit(m) == 128 + SIGKILL) ++killed;
  }
  EXPECT_GT(killed, 0);
  Exit done = Run(args);
  ASSERT_EQ(done.code, 0) << done.err;
  EXPECT_NE(Status(Fold("b"))["last_repair"].get<std::string>().find("restore from artifact"),
            std::string::npos);
  EXPECT_EQ(Dump(Fold("b")), kv_.Truth("rk"));
  EXPECT_EQ(Dump(Fold("b")), Dump(Fold("a")));
  EXPECT_EQ(Status(Fold("b"))["cursor"], kv_.LastSeq("rk"));
}

}  // namespace
}  // namespace kvfold::live

namespace kvfold::live {
namespace {

// The Prometheus text parsed into "name{labels}" -> value.
std::map<std::string, double> ParseMetrics(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

// The port a mirror's metrics server bound, from the JSON log line that
// announces it (0 when none did); every line must be a JSON log line.
int MetricsPort(const std::string& err_path) {
  int port = 0;
  std::istringstream lines(ReadWholeFile(err_path));
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not a JSON line: " << line;
    if (j.is_discarded()) continue;
    EXPECT_TRUE(j.contains("time") && j.contains("level") && j.contains("msg")) << line;
    EXPECT_EQ(j["command"], "mirror");
    const std::string msg = j.value("msg", "");
    const size_t at = msg.find("http://127.0.0.1:");
    if (at != std::string::npos) port = std::stoi(msg.substr(at + 17));
  }
  return port;
}

// kvfold mirror --metrics-addr: scraped while the mirror runs, the series
// agree with the fold (its cursor, what was written), and the log is JSON
// lines when asked for.
TEST_F(CliLiveTest, MetricsEndpointAgreesWithTheFoldWhileMirroring) {
  kv_.CreateBucket("metered");
  uint64_t last = 0;
  for (int i = 0; i < 120; ++i) last = kv_.Put("metered", "k" + std::to_string(i), "v");
  for (int i = 0; i < 20; ++i) last = kv_.Delete("metered", "k" + std::to_string(i));
  const std::string out = dir_.path() + "/mirror.out", err = dir_.path() + "/mirror.err";
  pid_t mirror = SpawnCli({"mirror", "--server", server_.url(), "--bucket", "metered", "--fold",
                           Fold(), "--metrics-addr", "127.0.0.1:0", "--log-format", "json"},
                          out, err);
  ASSERT_TRUE(WaitForCursor(Fold(), last)) << ReadWholeFile(err);
  const int port = MetricsPort(err);
  ASSERT_GT(port, 0) << ReadWholeFile(err);

  // The series follow the commit a moment after the fold shows it.
  auto scrape = [&](uint64_t cursor) {
    std::map<std::string, double> m;
    for (int i = 0; i < 200; ++i) {
      m = ParseMetrics(MonitorGet(port, "/metrics"));
      if (m["kvfold_cursor"] >= static_cast<double>(cursor)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return m;
  };
  std::map<std::string, double> m = scrape(last);
  EXPECT_EQ(m["kvfold_cursor"], static_cast<double>(last));
  EXPECT_EQ(m["kvfold_cursor"], Status(Fold())["cursor"].get<double>());
  EXPECT_EQ(m["kvfold_stream_last_sequence"], static_cast<double>(last));
  EXPECT_EQ(m["kvfold_lag_messages"], 0);
  // A new fold starts with a state sync: each key's last message.
  EXPECT_EQ(m["kvfold_changes_total{op=\"put\",origin=\"live\"}"], 100);
  EXPECT_EQ(m["kvfold_changes_total{op=\"delete\",origin=\"live\"}"], 20);
  EXPECT_GE(m["kvfold_commits_total"], 1);
  EXPECT_EQ(m["kvfold_commit_duration_seconds_count"],
            m["kvfold_commits_total"] + m["kvfold_commit_failures_total"]);
  EXPECT_EQ(m["kvfold_delivery_resets_total{cause=\"consumer_gap\"}"], 0);
  EXPECT_EQ(m["kvfold_lag_seconds"], 0);
  EXPECT_LT(m["kvfold_last_activity_age_seconds"], 30);
  EXPECT_EQ(m["kvfold_caught_up"], 1);
  EXPECT_EQ(m["kvfold_repairing"], 0);
  // The probes: the watch turns, and the fold caught up.
  EXPECT_EQ(HttpGet(port, "/healthz").first, 200);
  const auto [ready, why] = HttpGet(port, "/readyz");
  EXPECT_EQ(ready, 200) << why;
  EXPECT_EQ(why.rfind("caught up", 0), 0u) << why;

  // More writes while it runs: the cursor series follows the fold.
  for (int i = 0; i < 30; ++i) last = kv_.Put("metered", "k" + std::to_string(i), "w");
  ASSERT_TRUE(WaitForCursor(Fold(), last));
  m = scrape(last);
  EXPECT_EQ(m["kvfold_cursor"], static_cast<double>(last));
  EXPECT_EQ(m["kvfold_changes_total{op=\"put\",origin=\"live\"}"], 130);

  kill(mirror, SIGTERM);
  EXPECT_EQ(WaitExit(mirror), 0) << ReadWholeFile(err);
  EXPECT_EQ(Status(Fold())["cursor"], last);
}

// kvfold mirror --audit-every: the audit runs beside the watch, its verdict
// is served and a divergence is logged with the key named.
TEST_F(CliLiveTest, MirrorAuditEveryServesTheVerdictAndNamesTheDivergentKey) {
  kv_.CreateBucket("audited");
  uint64_t last = 0;
  for (int i = 0; i < 10; ++i) last = kv_.Put("audited", "k" + std::to_string(i), "v");
  ASSERT_EQ(Mirror("audited", Fold()).code, 0);
  {
    auto fold = OpenRocksFold(Fold());
    ASSERT_TRUE(fold.ok()) << fold.status().ToString();
    FoldCommit damage;
    damage.entries["ghost"] = Entry{3, false, "never written"};
    ASSERT_TRUE((*fold)->Commit(damage).ok());
  }
  const std::string out = dir_.path() + "/mirror.out", err = dir_.path() + "/mirror.err";
  pid_t mirror =
      SpawnCli({"mirror", "--server", server_.url(), "--bucket", "audited", "--fold", Fold(),
                "--metrics-addr", "127.0.0.1:0", "--audit-every", "200ms", "--log-format", "json"},
               out, err);
  int port = 0;
  for (int i = 0; i < 100 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    port = MetricsPort(err);
  }
  ASSERT_GT(port, 0) << ReadWholeFile(err);
  std::map<std::string, double> m;
  for (int i = 0; i < 200; ++i) {
    m = ParseMetrics(MonitorGet(port, "/metrics"));
    if (m["kvfold_audits_total{outcome=\"divergent\"}"] >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(m["kvfold_audits_total{outcome=\"divergent\"}"], 1);
  EXPECT_EQ(m["kvfold_audits_total{outcome=\"equal\"}"], 0);
  EXPECT_EQ(m["kvfold_audit_divergent_keys"], 1);
  EXPECT_GT(m["kvfold_audit_last_success_timestamp_seconds"], 1.7e9);
  EXPECT_EQ(m["kvfold_cursor"], static_cast<double>(last));
  kill(mirror, SIGTERM);
  EXPECT_EQ(WaitExit(mirror), 0) << ReadWholeFile(err);
  const std::string log = ReadWholeFile(err);
  EXPECT_NE(log.find("audit: the fold DIFFERS from its bucket: 1 keys (missing 0, stale 0, "
                     "phantom 1)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("first: phantom ghost"), std::string::npos) << log;
}

// Issue 31, defect 3: a mirror that caught up and is then cut off from the
// server (frozen: the connection stays, nothing answers) must stop being
// ready within --ready-max-lag plus an idle probe, stay alive, and be ready
// again once the server answers and the fold caught up.
TEST_F(CliLiveTest, ReadyzFailsWhileTheServerIsFrozenAndHealsAfter) {
  using std::chrono::steady_clock;
  kv_.CreateBucket("frozen");
  uint64_t last = 0;
  for (int i = 0; i < 10; ++i) last = kv_.Put("frozen", "k" + std::to_string(i), "v");
  const std::string out = dir_.path() + "/mirror.out", err = dir_.path() + "/mirror.err";
  pid_t mirror = SpawnCli({"mirror", "--server", server_.url(), "--bucket", "frozen", "--fold",
                           Fold(), "--metrics-addr", "127.0.0.1:0", "--ready-max-lag", "3s"},
                          out, err);
  ASSERT_TRUE(WaitForCursor(Fold(), last)) << ReadWholeFile(err);
  int port = 0;
  for (int i = 0; i < 100 && port == 0; ++i) {
    const std::string log = ReadWholeFile(err);
    const size_t at = log.find("http://127.0.0.1:");
    if (at != std::string::npos) port = std::stoi(log.substr(at + 17));
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(port, 0) << ReadWholeFile(err);
  // Polls /readyz until it answers `code`; the time it took, or nullopt.
  auto wait_ready = [&](int code, std::chrono::milliseconds patience) {
    const auto start = steady_clock::now();
    std::pair<int, std::string> r;
    while (steady_clock::now() - start < patience) {
      r = HttpGet(port, "/readyz");
      if (r.first == code) {
        return std::optional(std::chrono::duration<double>(steady_clock::now() - start).count());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "/readyz still answers " << r.first << " " << r.second << " after "
                  << patience.count() << " ms";
    return std::optional<double>();
  };
  ASSERT_TRUE(wait_ready(200, std::chrono::seconds(30)));
  // Quiet and healthy, it stays ready: under a 7 s bound the mirror reads
  // every second rather than counting the server's 5 s heartbeats as reads.
  for (const auto until = steady_clock::now() + std::chrono::seconds(12);
       steady_clock::now() < until;) {
    const auto [quiet_code, quiet_why] = HttpGet(port, "/readyz");
    ASSERT_EQ(quiet_code, 200) << "a quiet, healthy mirror: " << quiet_why;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }

  server_.Freeze();
  // 3 s without a stream read, plus up to an idle probe (1 s) since the last.
  const auto not_ready = wait_ready(503, std::chrono::seconds(9));
  const auto [code, why] = HttpGet(port, "/readyz");
  const int alive = HttpGet(port, "/healthz").first;
  server_.Thaw();
  ASSERT_TRUE(not_ready) << ReadWholeFile(err);
  EXPECT_LE(*not_ready, 3.0 + 1.0 + 0.5);
  EXPECT_EQ(code, 503);
  EXPECT_EQ(why.rfind("no stream read has succeeded for ", 0), 0u) << why;
  EXPECT_EQ(alive, 200) << "cut off is not stuck: a restart would not reach the server either";

  // Healed: the server answers, the mirror folds what came meanwhile.
  last = kv_.Put("frozen", "after", "thaw");
  ASSERT_TRUE(WaitForCursor(Fold(), last)) << ReadWholeFile(err);
  EXPECT_TRUE(wait_ready(200, std::chrono::seconds(30))) << ReadWholeFile(err);

  kill(mirror, SIGTERM);
  EXPECT_EQ(WaitExit(mirror), 0) << ReadWholeFile(err);
}

// A metrics address that is malformed is a usage error; one that cannot be
// bound is a clear failure; neither touches the fold.
TEST_F(CliLiveTest, BadMetricsAddressIsAClearError) {
  kv_.CreateBucket("m2");
  kv_.Put("m2", "k", "v");
  Exit bad = Mirror("m2", Fold(), {"--metrics-addr", "nonsense"});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("is not HOST:PORT"), std::string::npos) << bad.err;
  Exit taken =
      Mirror("m2", Fold(), {"--metrics-addr", "127.0.0.1:" + std::to_string(server_.port())});
  EXPECT_EQ(taken.code, 1) << taken.err;
  EXPECT_NE(taken.err.find("cannot listen on"), std::string::npos) << taken.err;
  EXPECT_FALSE(std::filesystem::exists(Fold()));
  // Nor can a second mirror take the port of a running one (no
  // SO_REUSEPORT: scrapes would alternate between two folds).
  const std::string addr = "127.0.0.1:" + std::to_string(FreePort());
  const std::string err = dir_.path() + "/first.err";
  pid_t first = SpawnCli({"mirror", "--server", server_.url(), "--bucket", "m2", "--fold",
                          Fold("first"), "--metrics-addr", addr},
                         dir_.path() + "/first.out", err);
  for (int i = 0; i < 200 && ReadWholeFile(err).find("serving metrics") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Exit second = Mirror("m2", Fold("second"), {"--metrics-addr", addr});
  EXPECT_EQ(second.code, 1) << second.err;
  EXPECT_NE(second.err.find("cannot listen on"), std::string::npos) << second.err;
  kill(first, SIGTERM);
  EXPECT_EQ(WaitExit(first), 0) << ReadWholeFile(err);
}

// A TCP connection to 127.0.0.1:`port`, or -1.
int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` on a new connection and reads until the server closes
// it (at most 3 s): the whole answer, "" when none.
std::string RawHttp(int port, const std::string& request) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  timeval tv{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

// The port a mirror announced in its log `err` ("serving metrics on
// http://127.0.0.1:PORT"), waiting up to 10 s; 0 when it did not.
int AnnouncedMetricsPort(const std::string& err) {
  for (int i = 0; i < 200; ++i) {
    const std::string log = ReadWholeFile(err);
    const size_t at = log.find("http://127.0.0.1:");
    if (at != std::string::npos) return std::stoi(log.substr(at + 17));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

// A peer of the metrics port must not be able to starve the probes: idle
// connections, requests that never finish and more connections than the
// server keeps all leave /healthz answering at once; a parked connection is
// closed by the server; a method other than GET or HEAD is refused without
// waiting for its body.
TEST_F(CliLiveTest, ProbesAnswerWhilePeersHoldConnectionsOpen) {
  using std::chrono::steady_clock;
  kv_.CreateBucket("held");
  const uint64_t last = kv_.Put("held", "k", "v");
  const std::string err = dir_.path() + "/mirror.err";
  pid_t mirror = SpawnCli({"mirror", "--server", server_.url(), "--bucket", "held", "--fold",
                           Fold(), "--metrics-addr", "127.0.0.1:0"},
                          dir_.path() + "/mirror.out", err);
  ASSERT_TRUE(WaitForCursor(Fold(), last)) << ReadWholeFile(err);
  const int port = AnnouncedMetricsPort(err);
  ASSERT_GT(port, 0) << ReadWholeFile(err);
  auto timed_healthz = [&] {
    const auto start = steady_clock::now();
    const int code = HttpGet(port, "/healthz").first;
    return std::make_pair(code, std::chrono::duration<double>(steady_clock::now() - start).count());
  };

  // More idle connections than httplib's default thread pool (8 here), and
  // a few that start a request and never finish it.
  const unsigned pool = std::max(8u, std::thread::hardware_concurrency() - 1);
  std::vector<int> held;
  for (unsigned i = 0; i < pool + 4; ++i) held.push_back(ConnectLoopback(port));
  for (int i = 0; i < 4; ++i) {
    held.push_back(ConnectLoopback(port));
    const std::string part = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    (void)!send(held.back(), part.data(), part.size(), MSG_NOSIGNAL);
  }
  for (int fd : held) ASSERT_GE(fd, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all accepted
  for (int i = 0; i < 3; ++i) {
    const auto [code, took] = timed_healthz();
    EXPECT_EQ(code, 200);
    EXPECT_LT(took, 1.0) << "/healthz waited on connections that send nothing";
  }
  EXPECT_EQ(HttpGet(port, "/readyz").first, 200);

  // The server does not keep a parked connection: it closes it within its
  // request deadline (2 s), answering nothing.
  {
    const auto start = steady_clock::now();
    timeval tv{5, 0};
    setsockopt(held[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char byte;
    EXPECT_EQ(read(held[0], &byte, 1), 0) << "an idle connection must be closed, not kept";
    EXPECT_LT(std::chrono::duration<double>(steady_clock::now() - start).count(), 3.0);
  }
  for (int fd : held) close(fd);
  held.clear();

  // More connections than the server serves at once (32): the oldest make
  // way, the probe is answered. The burst itself is accepted at once (a
  // full accept queue drops SYNs, each retried a second later).
  {
    const auto start = steady_clock::now();
    for (int i = 0; i < 48; ++i) held.push_back(ConnectLoopback(port));
    EXPECT_LT(std::chrono::duration<double>(steady_clock::now() - start).count(), 1.0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    const auto [code, took] = timed_healthz();
    EXPECT_EQ(code, 200);
    EXPECT_LT(took, 1.0) << "a full table of parked connections starved /healthz";
  }
  for (int fd : held) close(fd);

  // GET and HEAD only. A POST announcing a body it never sends is refused
  // at once: the server does not wait to read it.
  {
    const auto start = steady_clock::now();
    const std::string answer = RawHttp(
        port, "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n");
    EXPECT_EQ(answer.rfind("HTTP/1.1 405 ", 0), 0u) << answer;
    EXPECT_NE(answer.find("Allow: GET, HEAD\r\n"), std::string::npos) << answer;
    EXPECT_LT(std::chrono::duration<double>(steady_clock::now() - start).count(), 1.0);
  }
  for (const char* method : {"PUT", "DELETE", "OPTIONS", "PATCH"}) {
    const std::string answer =
        RawHttp(port, std::string(method) + " /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    EXPECT_EQ(answer.rfind("HTTP/1.1 405 ", 0), 0u) << method << ": " << answer;
  }
  // With `Expect: 100-continue` a refused method gets its 405 as the first
  // answer, never an invitation to send the body; a GET still gets 200.
  {
    const std::string answer =
        RawHttp(port,
                "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n"
                "Expect: 100-continue\r\n\r\n");
    EXPECT_EQ(answer.rfind("HTTP/1.1 405 ", 0), 0u) << answer;
    EXPECT_EQ(answer.find("100 Continue"), std::string::npos) << answer;
    const std::string get =
        RawHttp(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n\r\n");
    EXPECT_EQ(get.find("405"), std::string::npos) << get;
    EXPECT_NE(get.find("HTTP/1.1 200 "), std::string::npos) << get;
  }
  // A method httplib does not know fails its request-line parse.
  const std::string brew = RawHttp(port, "BREW /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(brew.rfind("HTTP/1.1 400 ", 0), 0u) << brew;
  const std::string head = RawHttp(port, "HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200 ", 0), 0u) << head;
  EXPECT_EQ(head.substr(head.find("\r\n\r\n") + 4), "") << "HEAD answers without a body";

  kill(mirror, SIGTERM);
  EXPECT_EQ(WaitExit(mirror), 0) << ReadWholeFile(err);
}

// A password or token given as a flag shows in the process listing (ps,
// /proc/PID/cmdline) to every local user: the CLI says so, once, on stderr
// (also under -q), without the secret, and points to the variables that
// carry it instead; those are not warned about. (This server asks for no
// credentials and takes any.)
TEST_F(CliLiveTest, SecretsGivenAsFlagsAreWarnedAbout) {
  kv_.CreateBucket("secrets");
  kv_.Put("secrets", "k", "v");
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const std::string listing = "in the process listing to every local user";
  struct Case {
    std::vector<std::string> flags;
    std::string warning;  // what the line starts with
    std::string hint;     // where the secret goes instead
    std::string secret;
  };
  const std::string url_with_password = "nats://kvuser:pw-in-url@" + server_.url().substr(7);
  for (const Case& c :
       std::vector<Case>{{{"--server", server_.url(), "--user", "kvuser", "--password", "pw-flag"},
                          "--password on the command line",
                          "set KVFOLD_PASSWORD instead",
                          "pw-flag"},
                         {{"--server", server_.url(), "--token", "tok-flag"},
                          "--token on the command line",
                          "set KVFOLD_TOKEN instead",
                          "tok-flag"},
                         {{"--server", url_with_password},
                          "--server holds credentials",
                          "set KVFOLD_SERVER instead",
                          "pw-in-url"}}) {
    for (const bool quiet : {false, true}) {
      std::vector<std::string> args = {"mirror", "--bucket", "secrets",
                                       "--fold", Fold(),     "--until-caught-up"};
      if (quiet) args.insert(args.begin(), "-q");
      args.insert(args.end(), c.flags.begin(), c.flags.end());
      Exit e = Run(args);
      EXPECT_EQ(e.code, 0) << e.err;
      EXPECT_EQ(count(e.err, listing), 1u) << e.err;
      EXPECT_NE(e.err.find("kvfold mirror: WARNING: " + c.warning), std::string::npos) << e.err;
      EXPECT_NE(e.err.find(c.hint), std::string::npos) << e.err;
      EXPECT_EQ(e.err.find(c.secret), std::string::npos) << "the warning repeats the secret";
    }
  }
  // From the environment: no warning.
  Exit env =
      RunCli({"mirror", "--bucket", "secrets", "--fold", Fold(), "--until-caught-up"}, dir_.path(),
             {"KVFOLD_SERVER=" + url_with_password, "KVFOLD_USER=kvuser", "KVFOLD_PASSWORD=pw-env",
              "KVFOLD_TOKEN=tok-env"});
  EXPECT_EQ(env.code, 0) << env.err;
  EXPECT_EQ(count(env.err, listing), 0u) << env.err;
  // --help says it too.
  Exit help = Run({"mirror", "--help"});
  EXPECT_NE(help.out.find("as a flag it shows in ps, so prefer the variable"), std::string::npos)
      << help.out;
}

// -q keeps the log to warnings and errors; a KVFOLD_SERVER from the
// environment stands in for --server, and a flag wins over it.
TEST_F(CliLiveTest, QuietLogAndServerFromTheEnvironment) {
  kv_.CreateBucket("envb");
  const uint64_t last = kv_.Put("envb", "k", "v");
  const std::string live = "KVFOLD_SERVER=" + server_.url();
  Exit e = RunCli({"-q", "mirror", "--bucket", "envb", "--fold", Fold(), "--until-caught-up"},
                  dir_.path(), {live});
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(e.err, "");  // nothing at info level
  EXPECT_EQ(Status(Fold())["cursor"], last);
  // A dead server in the environment, the live one on the command line.
  const std::string dead = "KVFOLD_SERVER=nats://127.0.0.1:1";
  Exit flag = RunCli({"mirror", "--server", server_.url(), "--bucket", "envb", "--fold", Fold(),
                      "--until-caught-up"},
                     dir_.path(), {dead});
  EXPECT_EQ(flag.code, 0) << flag.err;
  Exit env_only = RunCli({"mirror", "--bucket", "envb", "--fold", Fold(), "--until-caught-up"},
                         dir_.path(), {dead});
  EXPECT_EQ(env_only.code, 1) << env_only.err;
  // The same on a nested subcommand (artifacts list): the flag wins, and a
  // command that never connects ignores the variables.
  ASSERT_EQ(
      Run({"export", "--fold", Fold(), "--to", "obj:envarts", "--server", server_.url()}).code, 0);
  Exit listed =
      RunCli({"artifacts", "list", "obj:envarts", "--server", server_.url()}, dir_.path(), {dead});
  EXPECT_EQ(listed.code, 0) << listed.err;
  EXPECT_NE(listed.out.find("cursor"), std::string::npos) << listed.out;
  Exit dump = RunCli({"dump", "--fold", Fold()}, dir_.path(),
                     {dead, "KVFOLD_CREDS=/nonexistent.creds", "KVFOLD_REQUEST_TIMEOUT=bogus"});
  EXPECT_EQ(dump.code, 0) << dump.err;
  // A bad request timeout from the environment is named; the flag wins.
  const std::string bad_timeout = "KVFOLD_REQUEST_TIMEOUT=bogus";
  Exit timeout_env = RunCli({"artifacts", "list", "obj:envarts", "--server", server_.url()},
                            dir_.path(), {bad_timeout});
  EXPECT_EQ(timeout_env.code, 2) << timeout_env.err;
  EXPECT_NE(timeout_env.err.find("KVFOLD_REQUEST_TIMEOUT (for --request-timeout)"),
            std::string::npos)
      << timeout_env.err;
  Exit timeout_flag = RunCli(
      {"artifacts", "list", "obj:envarts", "--server", server_.url(), "--request-timeout", "30s"},
      dir_.path(), {bad_timeout});
  EXPECT_EQ(timeout_flag.code, 0) << timeout_flag.err;
  Exit no_server = RunCli({"mirror", "--bucket", "envb", "--fold", Fold()}, dir_.path());
  EXPECT_EQ(no_server.code, 2) << no_server.err;
  EXPECT_NE(no_server.err.find("--server (or KVFOLD_SERVER) is required"), std::string::npos)
      << no_server.err;
}

}  // namespace
}  // namespace kvfold::live
