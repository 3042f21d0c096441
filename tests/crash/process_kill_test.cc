// Real process kills: `kvfold export` and `kvfold seed` SIGKILLed at
// random moments. After any kill, nothing half-written is visible (every
// listed artifact verifies, the pointer names one of them), and a re-run
// of the seed finishes to exactly the exported fold.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "fold_view.h"
#include "kvfold/artifact.h"
#include "kvfold/fold.h"
#include "live/cli_process.h"
#include "test_dir.h"

namespace kvfold {
namespace {

using live::CliExit;
using live::RunCli;
using live::SpawnCli;
using live::WaitExit;

// A fold as a mirror leaves it, big enough that export and seed take a
// while: 200k entries, 8 MiB chunks' worth of values.
void MakeFold(const std::string& path, int keys = 200000) {
  FoldOptions fo;
  fo.sync = false;
  auto fold = OpenRocksFold(path, fo);
  ASSERT_TRUE(fold.ok());
  std::mt19937_64 rng(7);
  FoldCommit c;
  for (int i = 0; i < keys; ++i) {
    std::string value(40 + rng() % 60, 'a');
    for (auto& ch : value) ch = static_cast<char>('a' + rng() % 26);
    c.entries["key." + std::to_string(i)] = Entry{static_cast<uint64_t>(i + 1), false, value};
    if (c.entries.size() == 20000) {
      ASSERT_TRUE((*fold)->Commit(c).ok());
      c.entries.clear();
    }
  }
  c.cursor = static_cast<uint64_t>(keys);
  c.bucket = "big";
  c.scope = std::vector<std::string>{""};
  c.stream_created = "2026-01-01T00:00:00Z";
  ASSERT_TRUE((*fold)->Commit(c).ok());
}

std::map<std::string, Entry> Live(const std::string& path) {
  FoldOptions ro;
  ro.read_only = true;
  auto fold = OpenRocksFold(path, ro);
  if (!fold.ok()) return {};
  return LiveEntries(**fold);
}

TEST(ProcessKillTest, ExportKilledAnywhereLeavesOnlyWholeArtifacts) {
  TestDir dir;
  const std::string fold = dir.path() + "/fold";
  MakeFold(fold);
  const std::string loc = "dir:" + dir.path() + "/arts";
  // Time one clean export to spread the kills over its run.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(RunCli({"export", "--fold", fold, "--to", loc}, dir.path()).code, 0);
  const auto clean_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  // An older artifact of the same bucket and stream, so each killed export
  // is replacing a pointer that must stay whole.
  const std::string older = dir.path() + "/older";
  MakeFold(older, 2000);
  std::mt19937_64 rng(11);
  int killed_mid_run = 0;
  for (int round = 0; round < 12; ++round) {
    // A location of its own each round: an export to one that already
    // holds this cursor is a quick "up to date" with nothing to kill.
    const std::string round_loc = loc + "-" + std::to_string(round);
    ASSERT_EQ(RunCli({"export", "--fold", older, "--to", round_loc}, dir.path()).code, 0);
    pid_t pid = SpawnCli({"export", "--fold", fold, "--to", round_loc}, dir.path() + "/o",
                         dir.path() + "/e");
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % (clean_us + 1)));
    kill(pid, SIGKILL);
    if (WaitExit(pid) == 128 + SIGKILL) ++killed_mid_run;
    auto to = OpenTransport(round_loc, ConnectOptions{});
    ASSERT_TRUE(to.ok()) << to.status().ToString();
    auto all = ListArtifacts(**to, nullptr);
    ASSERT_TRUE(all.ok());
    ASSERT_FALSE(all->empty());
    for (const auto& m : *all) {
      EXPECT_TRUE(VerifyArtifact(**to, m.artifact_id, {}).ok()) << m.artifact_id;
    }
    // The pointer names a whole artifact: the older one or the new one.
    auto pointer = (*to)->ReadPointer();
    ASSERT_TRUE(pointer.ok() && pointer->has_value());
    EXPECT_TRUE(VerifyArtifact(**to, (*pointer)->artifact_id, {}).ok());
  }
  EXPECT_GT(killed_mid_run, 0) << "no kill landed while an export was running";
}

TEST(ProcessKillTest, SeedKilledAnywhereIsFinishedByAReRun) {
  TestDir dir;
  const std::string fold = dir.path() + "/fold";
  MakeFold(fold);
  const std::string loc = "dir:" + dir.path() + "/arts";
  ASSERT_EQ(RunCli({"export", "--fold", fold, "--to", loc}, dir.path()).code, 0);
  const auto expected = Live(fold);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(RunCli({"seed", "--fold", dir.path() + "/timing", "--from", loc}, dir.path()).code, 0);
  const auto clean_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  std::mt19937_64 rng(13);
  int killed_mid_run = 0;
  for (int round = 0; round < 6; ++round) {
    const std::string target = dir.path() + "/seeded" + std::to_string(round);
    pid_t pid =
        SpawnCli({"seed", "--fold", target, "--from", loc}, dir.path() + "/o", dir.path() + "/e");
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % (clean_us + 1)));
    kill(pid, SIGKILL);
    if (WaitExit(pid) == 128 + SIGKILL) ++killed_mid_run;
    CliExit again = RunCli({"seed", "--fold", target, "--from", loc}, dir.path());
    // Either the kill came after the final commit (the fold is seeded and a
    // re-run is refused as not empty) or the re-run finished it.
    if (again.code != 0) {
      EXPECT_NE(again.err.find("not empty"), std::string::npos) << again.err;
    }
    EXPECT_EQ(Live(target), expected) << "round " << round;
  }
  EXPECT_GT(killed_mid_run, 0) << "no kill landed while a seed was running";
}

}  // namespace
}  // namespace kvfold
