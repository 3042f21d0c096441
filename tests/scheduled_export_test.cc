// ScheduledExport over a real directory transport and a memory fold, with a
// lease the test decides.

#include "kvfold/scheduled_export.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "test_dir.h"
#include "test_keys.h"

namespace kvfold {
namespace {

// A lease whose answer the test sets; records what was asked.
class ScriptedLease final : public ExportLease {
 public:
  StatusOr<bool> TryAcquire(const std::string& key, const std::string& holder,
                            std::chrono::milliseconds ttl) override {
    asked.push_back(key + " " + holder + " " + std::to_string(ttl.count()));
    return answer;
  }
  StatusOr<bool> answer = true;
  std::vector<std::string> asked;
};

class ScheduledExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = OpenTransport("dir:" + dir_.path() + "/arts", ConnectOptions{},
                           TransportOptions{.create_if_missing = true, .s3 = {}});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    to_ = std::move(t).value();
    CommitThrough(10);
    options_.bucket = "cfg";
    options_.every = std::chrono::minutes(1);
    options_.exporter_id = "node-a";
    options_.metrics = &metrics_;
    options_.log = [this](const LogLine& line) { log_.emplace_back(line.text); };
  }

  // The fold as mirrored through `cursor`: one key per sequence.
  void CommitThrough(uint64_t cursor) {
    FoldCommit c;
    c.entries["k" + std::to_string(cursor)] = Entry{cursor, false, "v"};
    c.cursor = cursor;
    c.bucket = "cfg";
    c.scope = std::vector<std::string>{""};
    c.stream_created = "2026-01-01T00:00:00Z";
    ASSERT_TRUE(fold_->Commit(c).ok());
  }

  std::unique_ptr<ScheduledExport> Make() {
    auto e = ScheduledExport::Make(*fold_, lease_, *to_, options_);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }

  size_t Artifacts() {
    auto list = ListArtifacts(*to_, nullptr);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    return list.ok() ? list->size() : 0;
  }

  TestDir dir_;
  std::unique_ptr<Transport> to_;
  std::unique_ptr<Fold> fold_ = NewMemoryFold();
  ScriptedLease lease_;
  ExportMetrics metrics_;
  ScheduledExportOptions options_;
  std::vector<std::string> log_;
};

TEST_F(ScheduledExportTest, ARoundWritesOnlyWhenTheFoldMovedAndCountsEveryOutcome) {
  auto exporter = Make();
  ASSERT_NE(exporter, nullptr);
  ScheduledExport::Round r = exporter->RunRound();
  ASSERT_EQ(r.outcome, ExportOutcome::kWritten) << r.status.ToString();
  ASSERT_TRUE(r.written);
  EXPECT_EQ(r.written->cursor, 10u);
  EXPECT_EQ(r.written->exporter_id, "node-a");
  // The lease is the bucket's, held by this node for one period.
  EXPECT_EQ(lease_.asked, std::vector<std::string>{"export.cfg node-a 60000"});
  auto latest = LatestArtifactId(*to_);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, r.written->artifact_id);

  // Nothing newer: no second artifact, and not a failure.
  EXPECT_EQ(exporter->RunRound().outcome, ExportOutcome::kUnchanged);
  lease_.answer = false;
  EXPECT_EQ(exporter->RunRound().outcome, ExportOutcome::kOtherNode);
  lease_.answer = Status::Unavailable("no server");
  ScheduledExport::Round failed = exporter->RunRound();
  EXPECT_EQ(failed.outcome, ExportOutcome::kFailed);
  EXPECT_NE(failed.status.message().find("no server"), std::string::npos);
  EXPECT_EQ(Artifacts(), 1u);

  const ExportStats s = metrics_.Snapshot();
  EXPECT_EQ(s.written, 1u);
  EXPECT_EQ(s.unchanged, 1u);
  EXPECT_EQ(s.other_node, 1u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.last_cursor, 10u);
  EXPECT_TRUE(s.last_age_seconds);
  // The failure was said, as a warning naming its cause.
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_.back().find("lease: "), std::string::npos) << log_.back();
}

// A round that finds a valid artifact ahead of its fold says so (outcome
// pointer_ahead, one warning per streak) instead of "unchanged", which
// counts as fresh; one whose pointer names nothing valid replaces it and
// says what was wrong (issue 36, item 3).
TEST_F(ScheduledExportTest, APointerAheadIsItsOwnOutcomeAndAForgedOneIsReplaced) {
  auto exporter = Make();
  ASSERT_NE(exporter, nullptr);
  ASSERT_EQ(exporter->RunRound().outcome, ExportOutcome::kWritten);
  // Another node's fold, further on, exports to the same location.
  auto other = NewMemoryFold();
  std::swap(fold_, other);
  CommitThrough(20);
  std::swap(fold_, other);
  auto ahead = ExportArtifact(*other, *to_, ExportOptions{});
  ASSERT_TRUE(ahead.ok()) << ahead.status().ToString();
  log_.clear();
  for (int i = 0; i < 3; ++i) {
    ScheduledExport::Round r = exporter->RunRound();
    EXPECT_EQ(r.outcome, ExportOutcome::kPointerAhead) << r.status.ToString();
  }
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_NE(log_[0].find("ahead of this fold's cursor 10"), std::string::npos) << log_[0];
  EXPECT_EQ(metrics_.Snapshot().pointer_ahead, 3u);
  EXPECT_EQ(metrics_.Snapshot().unchanged, 0u);
  // This fold passes it (written), then another node exports further
  // again: a new streak, warned of again.
  CommitThrough(30);
  ASSERT_EQ(exporter->RunRound().outcome, ExportOutcome::kWritten);
  std::swap(fold_, other);
  CommitThrough(40);
  std::swap(fold_, other);
  ASSERT_TRUE(ExportArtifact(*other, *to_, ExportOptions{}).ok());
  log_.clear();
  EXPECT_EQ(exporter->RunRound().outcome, ExportOutcome::kPointerAhead);
  EXPECT_EQ(log_.size(), 1u) << "a second streak is warned of too";
  // The pointer rewritten by hand to name nothing, at the highest cursor.
  log_.clear();
  std::ofstream(dir_.path() + "/arts/LATEST", std::ios::trunc)
      << R"({"artifact":"nothing","cursor":18446744073709551615,"bucket":"cfg",)"
      << R"("stream_created":"2026-01-01T00:00:00Z"})";
  ScheduledExport::Round r = exporter->RunRound();
  ASSERT_EQ(r.outcome, ExportOutcome::kWritten) << r.status.ToString();
  EXPECT_EQ(*LatestArtifactId(*to_), r.written->artifact_id);
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_[0].find("replaced the latest pointer"), std::string::npos) << log_[0];
  EXPECT_NE(log_[0].find("artifact nothing"), std::string::npos) << log_[0];
}

TEST_F(ScheduledExportTest, KeepPrunesAfterEachArtifactWritten) {
  options_.keep = 1;
  auto young_kept = Make();
  ASSERT_NE(young_kept, nullptr);
  ASSERT_EQ(young_kept->RunRound().outcome, ExportOutcome::kWritten);
  CommitThrough(20);
  ASSERT_EQ(young_kept->RunRound().outcome, ExportOutcome::kWritten);
  EXPECT_EQ(Artifacts(), 2u) << "both younger than an hour";

  options_.keep_younger_than = std::chrono::milliseconds(0);
  auto exporter = Make();
  ASSERT_NE(exporter, nullptr);
  CommitThrough(30);
  ScheduledExport::Round r = exporter->RunRound();
  ASSERT_EQ(r.outcome, ExportOutcome::kWritten);
  auto list = ListArtifacts(*to_, nullptr);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().artifact_id, r.written->artifact_id);
}

// An exporter that signs prunes only artifacts its own key (or a trusted
// one) signed: a manifest anyone could have written in the location never
// makes a round remove anything.
TEST_F(ScheduledExportTest, AnExporterThatSignsPrunesOnlyWhatATrustedKeySigned) {
  options_.keep = 1;
  options_.keep_younger_than = std::chrono::milliseconds(0);
  auto unsigned_exporter = Make();
  ASSERT_NE(unsigned_exporter, nullptr);
  ScheduledExport::Round unsigned_round = unsigned_exporter->RunRound();
  ASSERT_EQ(unsigned_round.outcome, ExportOutcome::kWritten);

  options_.sign_key_file = MakeKeyPair(dir_.path(), "exporter").first;
  auto exporter = Make();
  ASSERT_NE(exporter, nullptr);
  std::vector<std::string> written;
  for (uint64_t cursor : {20, 30}) {
    CommitThrough(cursor);
    ScheduledExport::Round r = exporter->RunRound();
    ASSERT_EQ(r.outcome, ExportOutcome::kWritten) << r.status.ToString();
    // Signed with sign_key_file: a node that requires signatures takes it.
    EXPECT_TRUE(r.written->is_signed);
    written.push_back(r.written->artifact_id);
  }
  auto list = ListArtifacts(*to_, nullptr);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ(list->front().artifact_id, unsigned_round.written->artifact_id);
  EXPECT_EQ(list->back().artifact_id, written.back());
}

TEST_F(ScheduledExportTest, ABadSetupIsRefusedBeforeAnyRound) {
  options_.every = std::chrono::milliseconds(0);
  EXPECT_TRUE(ScheduledExport::Check(options_).IsInvalidArgument());
  options_.every = std::chrono::minutes(1);
  options_.bucket = "";
  EXPECT_TRUE(ScheduledExport::Check(options_).IsInvalidArgument());
  options_.bucket = "cfg";
  options_.sign_key_file = dir_.path() + "/missing.pem";
  auto made = ScheduledExport::Make(*fold_, lease_, *to_, options_);
  EXPECT_FALSE(made.ok());
  EXPECT_TRUE(lease_.asked.empty());
}

TEST_F(ScheduledExportTest, RunEndsOnStopWithoutARound) {
  auto exporter = Make();
  ASSERT_NE(exporter, nullptr);
  std::stop_source stop;
  stop.request_stop();
  exporter->Run(stop.get_token());
  EXPECT_TRUE(lease_.asked.empty());
}

}  // namespace
}  // namespace kvfold
