// The directory transport on a file system that keeps only what was synced
// (sim/power_cut_fs.h), the power cut at every operation of two exports in
// a row (the first creates the location, the second moves the pointer on)
// and of nested Puts. After the reboot the latest pointer, if any, names an
// artifact that verifies whole and seeds exactly the exported entries, and
// it is never behind an export that returned. A transport that skips the
// fsync of an object's data before its rename, or of its directory after,
// fails here (mutation points dir-skip-file-fsync and dir-skip-dir-fsync).
// Then an fsync that fails the Linux way at every sync of two exports, each
// export retried as a scheduled exporter retries it, and the power cut
// after: what an answer vouched for must be on the disk (mutation point
// dir-pointer-trust-cache).

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>

#include "artifact/directory_transport.h"
#include "fold_view.h"
#include "kvfold/artifact.h"
#include "sim/power_cut_fs.h"

namespace kvfold {
namespace {

// Below a directory that does not exist yet: opening the location for the
// first export creates two directories.
constexpr char kRoot[] = "/srv/arts";

// A fold as a mirror leaves it after `round` rounds of writes: round 0 is
// 300 keys (some deleted) at cursor 305; round 1 changes 60 of them,
// deletes 15 and adds 40, at cursor 420.
std::unique_ptr<Fold> SourceFold(int round) {
  auto fold = NewMemoryFold();
  FoldCommit c;
  for (int i = 0; i < 300; ++i) {
    c.entries["k" + std::to_string(1000 + i)] = Entry{
        static_cast<uint64_t>(i + 1), i % 7 == 3, i % 7 == 3 ? "" : "value-" + std::to_string(i)};
  }
  c.cursor = 305;
  c.bucket = "cfg";
  c.scope = std::vector<std::string>{""};
  c.stream_created = "2026-01-01T00:00:00Z";
  EXPECT_TRUE(fold->Commit(c).ok());
  if (round == 1) {
    FoldCommit d;
    uint64_t rev = 306;
    for (int i = 0; i < 60; ++i) {
      d.entries["k" + std::to_string(1000 + i * 5)] =
          Entry{rev++, false, "changed-" + std::to_string(i)};
    }
    for (int i = 0; i < 15; ++i)
      d.entries["k" + std::to_string(1002 + i * 11)] = Entry{rev++, true, ""};
    for (int i = 0; i < 40; ++i) {
      d.entries["n" + std::to_string(2000 + i)] = Entry{rev++, false, "new-" + std::to_string(i)};
    }
    d.cursor = 420;
    EXPECT_TRUE(fold->Commit(d).ok());
  }
  return fold;
}

// `attempt` > 0: a retry, which draws a new id as the exporter does.
std::string ArtifactId(uint64_t cursor, int attempt = 0) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%020llu-%012llx", static_cast<unsigned long long>(cursor),
                0xc0deULL + static_cast<unsigned long long>(attempt));
  return buf;
}

class PowerCutTest : public ::testing::Test {
 protected:
  PowerCutTest() {
    for (int round = 0; round < 2; ++round) {
      auto fold = SourceFold(round);
      const uint64_t cursor = *(*fold->ReadMeta()).cursor;
      cursors_.push_back(cursor);
      expected_[cursor] = LiveEntries(*fold);
      folds_.push_back(std::move(fold));
    }
  }

  // Exports round 0, then round 1, each through a transport opened afresh
  // (create_if_missing, as an exporter opens it), on `fs`, until one fails.
  // Returns the cursor of the last export that returned OK (0: none).
  // `ends`, when not null, gets the operation count after each export.
  uint64_t ExportRounds(sim::PowerCutFs& fs, std::vector<uint64_t>* ends = nullptr) {
    uint64_t acknowledged = 0;
    for (size_t round = 0; round < folds_.size(); ++round) {
      auto to = artifact::OpenDirectoryTransportOn(&fs, kRoot, /*create_if_missing=*/true);
      if (!to.ok()) break;
      ExportOptions o;
      o.chunk_raw_bytes = 1500;  // several chunks
      o.fixed_artifact_id = ArtifactId(cursors_[round]);
      o.exporter_id = "power-cut-test";
      if (!ExportArtifact(*folds_[round], **to, o).ok()) break;
      acknowledged = cursors_[round];
      if (ends != nullptr) ends->push_back(fs.operations());
    }
    return acknowledged;
  }

  // The invariants after a reboot; an empty string when they hold.
  std::string CheckDurableState(sim::PowerCutFs& fs, uint64_t acknowledged) {
    auto to = artifact::OpenDirectoryTransportOn(&fs, kRoot, /*create_if_missing=*/false);
    std::optional<ArtifactPointer> pointer;
    if (to.ok()) {
      auto p = (*to)->ReadPointer();
      if (!p.ok()) return "the pointer cannot be read: " + p.status().ToString();
      pointer = *p;
    } else if (!to.status().IsNotFound()) {
      return "the location cannot be opened: " + to.status().ToString();
    }
    if (!pointer) {
      if (acknowledged != 0) {
        return "no pointer (" + (to.ok() ? std::string("no LATEST") : to.status().ToString()) +
               ") though the export at cursor " + std::to_string(acknowledged) + " returned";
      }
      return "";
    }
    if (pointer->cursor < acknowledged) {
      return "the pointer moved backward: it names cursor " + std::to_string(pointer->cursor) +
             " though the export at cursor " + std::to_string(acknowledged) + " returned";
    }
    auto expected = expected_.find(pointer->cursor);
    if (expected == expected_.end() ||
        pointer->artifact_id.substr(0, 20) != ArtifactId(pointer->cursor).substr(0, 20)) {
      return "the pointer names an artifact nobody exported: " + pointer->artifact_id;
    }
    Status verified = VerifyArtifact(**to, pointer->artifact_id, {});
    if (!verified.ok()) {
      return "the latest artifact " + pointer->artifact_id +
             " does not verify: " + verified.ToString();
    }
    auto seeded = NewMemoryFold();
    auto m = SeedFold(*seeded, **to, {});
    if (!m.ok()) return "a seed from the latest artifact fails: " + m.status().ToString();
    if (m->artifact_id != pointer->artifact_id ||
        *(*seeded->ReadMeta()).cursor != pointer->cursor) {
      return "the seed used " + m->artifact_id + ", not the latest " + pointer->artifact_id;
    }
    if (LiveEntries(*seeded) != expected->second) {
      return "a seed from " + pointer->artifact_id + " does not give the exported entries";
    }
    return "";
  }

  // ExportRounds where each round that fails is tried once more with a new
  // id, as the next round of a scheduled exporter would. A retry that finds
  // the pointer already at its cursor answers "unchanged", which vouches
  // for that cursor too.
  uint64_t ExportRoundsWithRetry(sim::PowerCutFs& fs) {
    uint64_t acknowledged = 0;
    for (size_t round = 0; round < folds_.size(); ++round) {
      bool done = false;
      for (int attempt = 0; attempt < 2 && !done; ++attempt) {
        auto to = artifact::OpenDirectoryTransportOn(&fs, kRoot, /*create_if_missing=*/true);
        if (!to.ok()) continue;
        ExportOptions o;
        o.chunk_raw_bytes = 1500;
        o.fixed_artifact_id = ArtifactId(cursors_[round], attempt);
        o.exporter_id = "power-cut-test";
        auto m = ExportArtifact(*folds_[round], **to, o);
        done = m.ok() || m.status().IsAlreadyExists();
      }
      if (!done) break;
      acknowledged = cursors_[round];
    }
    return acknowledged;
  }

  std::vector<std::unique_ptr<Fold>> folds_;
  std::vector<uint64_t> cursors_;
  std::map<uint64_t, std::map<std::string, Entry>> expected_;
};

// Invariant: an export is all or nothing across a power cut, and one that
// returned survives it; the pointer never names a torn or missing artifact
// and never moves backward.
TEST_F(PowerCutTest, EveryCutPointOfTwoExports) {
  const auto started = std::chrono::steady_clock::now();
  std::vector<uint64_t> ends;
  {
    sim::PowerCutFs fs;
    ASSERT_EQ(ExportRounds(fs, &ends), cursors_.back()) << "the exports fail without a power cut";
  }
  const uint64_t total = ends.back();
  ASSERT_GT(ends[0], 20u);
  ASSERT_GT(ends[1] - ends[0], 20u);
  // Cut point total + 1: the power goes off after both exports returned.
  uint64_t checked = 0, failed = 0;
  for (uint64_t cut = 1; cut <= total + 1; ++cut) {
    sim::PowerCutFs fs;
    fs.CutAt(cut);
    const uint64_t acknowledged = ExportRounds(fs);
    const std::string at = fs.power_cut() ? fs.Describe(cut) : "after both exports returned";
    fs.CutNow();
    fs.Reboot();
    std::string fault = CheckDurableState(fs, acknowledged);
    if (fault.empty()) {
      // The location stays usable: exporting the newest round again
      // succeeds (or finds it is already the latest) and leaves it the latest.
      auto to = artifact::OpenDirectoryTransportOn(&fs, kRoot, /*create_if_missing=*/true);
      ExportOptions o;
      o.chunk_raw_bytes = 1500;
      o.fixed_artifact_id = ArtifactId(cursors_.back());
      auto again = to.ok() ? ExportArtifact(*folds_.back(), **to, o) : to.status();
      if (!again.ok() && !again.status().IsAlreadyExists()) {
        fault = "exporting again after the reboot fails: " + again.status().ToString();
      } else {
        fault = CheckDurableState(fs, cursors_.back());
        if (!fault.empty()) fault = "after exporting again: " + fault;
      }
    }
    ++checked;
    if (!fault.empty() && ++failed <= 3) {  // the first few tell the story
      ADD_FAILURE() << "power cut at operation " << cut << " of " << total << " (" << at
                    << "): " << fault;
    }
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - started)
                      .count();
  std::printf(
      "power cut: %llu cut points checked (%llu operations in the first export, %llu in the "
      "second, one after both), %llu failed, %lld ms\n",
      static_cast<unsigned long long>(checked), static_cast<unsigned long long>(ends[0]),
      static_cast<unsigned long long>(ends[1] - ends[0]), static_cast<unsigned long long>(failed),
      static_cast<long long>(ms));
  RecordProperty("cut_points", static_cast<int>(checked));
  EXPECT_EQ(failed, 0u);
  EXPECT_EQ(checked, total + 1);
}

// Invariant: after an fsync that failed the Linux way (the error reported
// once, the pages dropped, later fsyncs succeeding without them) and the
// retries that follow, a power cut keeps every export an answer vouched
// for, and the pointer names an artifact that verifies.
TEST_F(PowerCutTest, EveryFailedSyncOfTwoExportsThenAPowerCut) {
  std::vector<uint64_t> syncs;
  {
    sim::PowerCutFs fs;
    ASSERT_EQ(ExportRoundsWithRetry(fs), cursors_.back());
    for (uint64_t op = 1; op <= fs.operations(); ++op) {
      if (fs.Describe(op).starts_with("fsync")) syncs.push_back(op);
    }
  }
  ASSERT_GT(syncs.size(), 10u);
  uint64_t failed = 0;
  for (uint64_t at : syncs) {
    sim::PowerCutFs fs;
    fs.FailSyncAt(at);
    const uint64_t acknowledged = ExportRoundsWithRetry(fs);
    const std::string what = fs.Describe(at);
    EXPECT_EQ(fs.failed_syncs(), 1u) << what;
    fs.CutNow();
    fs.Reboot();
    const std::string fault = CheckDurableState(fs, acknowledged);
    if (!fault.empty() && ++failed <= 3) {
      ADD_FAILURE() << "failed sync at operation " << at << " (" << what
                    << "), then a power cut: " << fault;
    }
  }
  std::printf("failed sync: %zu sync points of two exports checked, %llu failed\n", syncs.size(),
              static_cast<unsigned long long>(failed));
  EXPECT_EQ(failed, 0u);
}

// Invariant: an object is its old bytes or its new bytes after a power cut,
// never torn, never gone once it was stored, and the new bytes once its Put
// returned; also for a name whose directories the Put creates.
TEST(PowerCutPutTest, EveryCutPointOfNestedPuts) {
  const std::string name = "a/b/c/object";
  const std::string v1(3000, '1'), v2(5000, '2');
  auto run = [&](sim::PowerCutFs& fs) -> std::string {  // the last value acknowledged
    std::string acknowledged;
    auto to = artifact::OpenDirectoryTransportOn(&fs, kRoot, /*create_if_missing=*/true);
    if (!to.ok()) return acknowledged;
    for (const std::string* v : {&v1, &v2}) {
      if (!(*to)->Put(name, *v).ok()) break;
      acknowledged = *v;
    }
    return acknowledged;
  };
  uint64_t total = 0;
  {
    sim::PowerCutFs fs;
    ASSERT_EQ(run(fs), v2);
    total = fs.operations();
  }
  uint64_t checked = 0, failed = 0;
  for (uint64_t cut = 1; cut <= total + 1; ++cut) {
    sim::PowerCutFs fs;
    fs.CutAt(cut);
    const std::string acknowledged = run(fs);
    const std::string at = fs.power_cut() ? fs.Describe(cut) : "after both Puts returned";
    fs.CutNow();
    fs.Reboot();
    auto to = artifact::OpenDirectoryTransportOn(&fs, kRoot, /*create_if_missing=*/false);
    StatusOr<std::string> got = to.ok() ? (*to)->Get(name, 1 << 20) : to.status();
    const bool missing = got.status().IsNotFound();
    const bool ok = acknowledged.empty() ? (missing || (got.ok() && (*got == v1 || *got == v2)))
                    : acknowledged == v1 ? (got.ok() && (*got == v1 || *got == v2))
                                         : (got.ok() && *got == v2);
    ++checked;
    if (!ok && ++failed <= 3) {
      ADD_FAILURE()
          << "power cut at operation " << cut << " of " << total << " (" << at << "): found "
          << (got.ok() ? std::to_string(got->size()) + " bytes \"" + got->substr(0, 8) + "...\""
                       : got.status().ToString())
          << " where "
          << (acknowledged.empty() ? "nothing" : std::to_string(acknowledged.size()) + " bytes")
          << " had been acknowledged";
    }
  }
  std::printf("power cut: %llu cut points checked over %llu operations of two Puts, %llu failed\n",
              static_cast<unsigned long long>(checked), static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(failed));
  EXPECT_EQ(failed, 0u);
  EXPECT_EQ(checked, total + 1);
}

}  // namespace
}  // namespace kvfold
