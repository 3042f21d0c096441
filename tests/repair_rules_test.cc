// The pure repair decisions (src/core/repair_rules.h, kvfold/retention.h)
// against their specification in SPEC §3–5, case by case.

#include "core/repair_rules.h"

#include <gtest/gtest.h>

#include "nats/kv_subjects.h"

namespace kvfold::core {
namespace {

StreamState Evicting(uint64_t first) {
  StreamState s;
  s.created = "t1";
  s.first_seq = first;
  s.last_seq = first + 100;
  s.max_msgs = 3000;
  return s;
}

StreamState Keeping(uint64_t first) {
  StreamState s = Evicting(first);
  s.max_msgs = -1;
  s.history = 1;
  return s;
}

TEST(RetentionTest, WhatEvictsCurrentValues) {
  StreamState s = Keeping(1);
  EXPECT_FALSE(ClassifyRetention(s, false).evicts_current_values);
  EXPECT_EQ(ClassifyRetention(s, false).eviction_cause, "");
  s.max_age_ns = 1;  // without limit markers: keys age out without a trace
  EXPECT_TRUE(ClassifyRetention(s, false).evicts_current_values);
  EXPECT_EQ(ClassifyRetention(s, false).eviction_cause, "unmarked age");
  s.discard_new = true;  // max_age removes whatever discard says
  EXPECT_TRUE(ClassifyRetention(s, false).evicts_current_values);
  s = Keeping(1);
  s.max_bytes = 1 << 20;
  EXPECT_TRUE(ClassifyRetention(s, false).evicts_current_values);
  EXPECT_EQ(ClassifyRetention(s, false).eviction_cause, "volume");
  s.discard_new = true;  // rejects writes instead
  EXPECT_FALSE(ClassifyRetention(s, false).evicts_current_values);
}

// An expiry is a delete, not an eviction (SPEC §4, corrected 2026-12-03):
// per-message TTL, with or without limit markers, and max_age with limit
// markers leave the key listing the truth, whatever first_seq says.
// Mutant retention-expiry-evicts (the old rule) fails each of these.
TEST(RetentionTest, ExpiriesAreDeletesNotEvictions) {
  StreamState ttl = Keeping(1);
  ttl.allow_msg_ttl = true;
  ttl.marker_ttl_ns = 2000000000;
  EXPECT_FALSE(ClassifyRetention(ttl, false).evicts_current_values);
  EXPECT_TRUE(ClassifyRetention(ttl, false).listing_is_truth);
  ttl.first_seq = 500;  // interior and head expiries
  EXPECT_TRUE(ClassifyRetention(ttl, false).listing_is_truth);
  EXPECT_FALSE(ClassifyRetention(ttl, false).has_evicted);
  StreamState unmarked_ttl = Keeping(500);
  unmarked_ttl.allow_msg_ttl = true;  // a TTL expiry without a marker is still a delete
  EXPECT_TRUE(ClassifyRetention(unmarked_ttl, false).listing_is_truth);
  StreamState marked_age = Keeping(500);
  marked_age.max_age_ns = int64_t{3600} * 1000000000;
  marked_age.marker_ttl_ns = 2000000000;
  EXPECT_FALSE(ClassifyRetention(marked_age, false).evicts_current_values);
  EXPECT_TRUE(ClassifyRetention(marked_age, false).listing_is_truth);
  // TTL beside a volume limit that has evicted: not the truth.
  StreamState both = Evicting(2);
  both.allow_msg_ttl = true;
  both.marker_ttl_ns = 2000000000;
  EXPECT_FALSE(ClassifyRetention(both, false).listing_is_truth);
  EXPECT_EQ(ClassifyRetention(both, false).eviction_cause, "volume");
  // ... but it is while the volume limit has evicted nothing.
  EXPECT_TRUE(ClassifyRetention(Evicting(1), false).listing_is_truth);
  // Unmarked age where TTLs are allowed: a `Nats-TTL: never` head keeps
  // first_seq at 1 while what follows it ages out.
  StreamState never_head = Keeping(1);
  never_head.max_age_ns = 10 * int64_t{1000000000};
  never_head.allow_msg_ttl = true;
  EXPECT_TRUE(ClassifyRetention(never_head, false).has_evicted);
  EXPECT_FALSE(ClassifyRetention(never_head, false).listing_is_truth);
  never_head.allow_msg_ttl = false;  // then age removes from the head only
  EXPECT_TRUE(ClassifyRetention(never_head, false).listing_is_truth);
}

TEST(RetentionTest, ListingIsTruthUntilEvictionIsSeenAndForeverAfter) {
  EXPECT_TRUE(ClassifyRetention(Keeping(5000), false).listing_is_truth);  // superseded only
  EXPECT_TRUE(ClassifyRetention(Evicting(1), false).listing_is_truth);    // never evicted
  EXPECT_FALSE(ClassifyRetention(Evicting(2), false).listing_is_truth);
  EXPECT_TRUE(ClassifyRetention(Evicting(2), false).has_evicted);
  // The memo: once seen, a listing is never the truth again, even with the
  // limit removed (aged-out keys stay missing from listings).
  EXPECT_FALSE(ClassifyRetention(Keeping(5000), true).listing_is_truth);
}

TEST(ChooseRepairTest, EachPolicyOnEachBucketKind) {
  const Retention truth = ClassifyRetention(Keeping(9), false);
  const Retention evicted = ClassifyRetention(Evicting(9), false);
  const auto c = RepairCause::kExpired;
  EXPECT_EQ(ChooseRepair(ExpiryRepair::kAuto, c, truth).action, RepairAction::kRelist);
  EXPECT_EQ(ChooseRepair(ExpiryRepair::kAuto, c, evicted).action, RepairAction::kRestore);
  EXPECT_EQ(ChooseRepair(ExpiryRepair::kRelist, c, truth).action, RepairAction::kRelist);
  EXPECT_EQ(ChooseRepair(ExpiryRepair::kRelist, c, evicted).action, RepairAction::kRefuse);
  EXPECT_EQ(ChooseRepair(ExpiryRepair::kRestore, c, truth).action, RepairAction::kRestore);
  EXPECT_EQ(ChooseRepair(ExpiryRepair::kNone, c, evicted).action, RepairAction::kResync);
  EXPECT_EQ(ChooseRepair(ExpiryRepair::kNone, RepairCause::kRecreated, truth).action,
            RepairAction::kRefuse);
  EXPECT_EQ(ChooseRepair(ExpiryRepair::kNone, RepairCause::kReconcile, truth).action,
            RepairAction::kRelist);
  EXPECT_EQ(ChooseRepair(ExpiryRepair::kAuto, RepairCause::kReconcile, evicted).action,
            RepairAction::kRefuse);
}

ArtifactManifest Manifest(uint64_t cursor, std::vector<std::string> scope = {""}) {
  ArtifactManifest m;
  m.artifact_id = "a1";
  m.bucket = "b";
  m.stream_created = "t1";
  m.scope = std::move(scope);
  m.has_scope = true;
  m.cursor = cursor;
  return m;
}

TEST(CheckRestoreTest, EveryCondition) {
  RestoreTarget t{"b", "t1", Scope(), uint64_t{100}, 150};
  EXPECT_TRUE(CheckRestore(Manifest(200), t).ok());
  EXPECT_TRUE(CheckRestore(Manifest(149), t).ok());  // first_seq == A + 1
  // (b) strictly ahead
  EXPECT_NE(CheckRestore(Manifest(100), t).message().find("stale"), std::string::npos);
  // (c) inside retention
  EXPECT_NE(CheckRestore(Manifest(148), t).message().find("outside retention"), std::string::npos);
  // (a) scope covers
  RestoreTarget narrow = t;
  narrow.scope = *Scope::Make({"a.", "b."});
  EXPECT_TRUE(CheckRestore(Manifest(200, {"a."}), narrow).IsFailedPrecondition());
  EXPECT_TRUE(CheckRestore(Manifest(200, {""}), narrow).ok());
  EXPECT_TRUE(CheckRestore(Manifest(200, {"a.", "b."}), narrow).ok());
  // (d) same stream identity and bucket
  RestoreTarget other = t;
  other.stream_created = "t2";
  EXPECT_TRUE(CheckRestore(Manifest(200), other).IsFailedPrecondition());
  other = t;
  other.bucket = "c";
  EXPECT_TRUE(CheckRestore(Manifest(200), other).IsFailedPrecondition());
  // No fold cursor (unanchored, fresh start): any artifact inside retention.
  RestoreTarget fresh = t;
  fresh.fold_cursor.reset();
  EXPECT_TRUE(CheckRestore(Manifest(149), fresh).ok());
  // Not beyond the stream's head (issue 31, defect 4): a stream restored
  // from a backup keeps its identity with a lower last_seq.
  RestoreTarget rolled_back = t;
  rolled_back.last_seq = 180;
  EXPECT_TRUE(CheckRestore(Manifest(180), rolled_back).ok());
  Status ahead = CheckRestore(Manifest(200), rolled_back);
  EXPECT_TRUE(ahead.IsFailedPrecondition()) << ahead.ToString();
  EXPECT_NE(ahead.message().find("beyond the stream's last sequence 180"), std::string::npos)
      << ahead.ToString();
}

// On a bucket with limit markers an artifact is current inside the marker
// window of its anchor, or at any age when the stream stored nothing after
// its cursor (SPEC §4, "Currency of a position"). Mutant
// restore-ignore-quiet-head refuses the quiet one.
TEST(CheckRestoreTest, MarkerWindowOrAQuietHead) {
  constexpr int64_t kSec = 1000000000;
  RestoreTarget t{"b", "t1", Scope(), uint64_t{100}, 1};
  t.marker_ttl_ns = 2 * kSec;  // window 1.75 s
  t.server_time_ns = 1000 * kSec;
  t.last_seq = 250;
  ArtifactManifest m = Manifest(200);
  m.cursor_time_ns = t.server_time_ns - kSec;
  EXPECT_TRUE(CheckRestore(m, t).ok());
  m.cursor_time_ns = t.server_time_ns - 2 * kSec;  // a marker after 200 may be gone
  Status old = CheckRestore(m, t);
  EXPECT_TRUE(old.IsFailedPrecondition()) << old.ToString();
  EXPECT_NE(old.message().find("limit markers"), std::string::npos) << old.ToString();
  m.cursor_time_ns = 0;  // unknown: proves nothing
  EXPECT_TRUE(CheckRestore(m, t).IsFailedPrecondition());
  // Nothing stored after the cursor: no marker could have come and gone.
  t.last_seq = 200;
  EXPECT_TRUE(CheckRestore(m, t).ok()) << CheckRestore(m, t).ToString();
  m.cursor_time_ns = t.server_time_ns - 3600 * kSec;
  EXPECT_TRUE(CheckRestore(m, t).ok());
  // Unknown head: the window decides.
  t.last_seq.reset();
  EXPECT_TRUE(CheckRestore(m, t).IsFailedPrecondition());
}

Entry Live(uint64_t rev, std::string v = "v") { return Entry{rev, false, std::move(v)}; }
Entry Dead(uint64_t rev) { return Entry{rev, true, ""}; }

TEST(RestoreKeyTest, NewerWinsAndDeleteOnlyWhatIsNotListedLive) {
  // both: newer wins
  EXPECT_FALSE(RestoreKey(Live(9), Live(5), false, 50, false));
  EXPECT_EQ(RestoreKey(Live(5), Live(9, "a"), false, 50, false)->entry, Live(9, "a"));
  // only the artifact: taken, unless a fold tombstone is newer
  EXPECT_EQ(RestoreKey(std::nullopt, Live(9), false, 50, false)->entry, Live(9));
  EXPECT_FALSE(RestoreKey(Dead(12), Live(9), false, 50, false));
  EXPECT_EQ(RestoreKey(Dead(3), Live(9), false, 50, false)->entry, Live(9));
  // only the fold: deleted only when not listed live, at the listing's revision
  EXPECT_FALSE(RestoreKey(Live(7), std::nullopt, true, 50, false));
  auto del = RestoreKey(Live(7), std::nullopt, false, 50, false);
  ASSERT_TRUE(del);
  EXPECT_EQ(del->entry, Dead(50));
  EXPECT_TRUE(del->hook);
  EXPECT_FALSE(RestoreKey(Dead(7), std::nullopt, false, 50, false));
  // rebase (recreated stream): old revisions are not compared
  EXPECT_EQ(RestoreKey(Live(900), Live(3, "n"), false, 50, true)->entry, Live(3, "n"));
  auto kept = RestoreKey(Live(900, "x"), std::nullopt, true, 50, true);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->entry, Live(0, "x"));
  EXPECT_FALSE(kept->hook);
}

TEST(FloorTest, HoldsWhileNextIsRetainedAndProofNeedsTheStore) {
  EXPECT_TRUE(FloorHolds(11, 10));
  EXPECT_FALSE(FloorHolds(12, 10));
  EXPECT_TRUE(NothingInScopeToCome(100, std::nullopt));
  EXPECT_TRUE(NothingInScopeToCome(100, uint64_t{101}));
  EXPECT_FALSE(NothingInScopeToCome(100, uint64_t{100}));
}

TEST(FloorTest, ProbeComesSoonerWhenTheHeadApproaches) {
  using std::chrono::milliseconds;
  StreamState s;
  s.first_seq = 1001;
  s.last_seq = 4000;
  s.messages = 3000;
  s.max_msgs = 3000;
  EXPECT_EQ(NextFloorProbe(s, 4000, -1, milliseconds(1000)), milliseconds(50));  // not measured
  EXPECT_EQ(NextFloorProbe(s, 4000, 0, milliseconds(1000)), milliseconds(200));  // count limit
  EXPECT_EQ(NextFloorProbe(s, 4000, 10000, milliseconds(1000)), milliseconds(75));
  EXPECT_EQ(NextFloorProbe(s, 1010, 10000, milliseconds(1000)), milliseconds(10));
  s.messages = 1000;  // room for 2000 more before the head moves at all
  EXPECT_EQ(NextFloorProbe(s, 4000, 10000, milliseconds(1000)), milliseconds(125));
  s.max_age_ns = int64_t{200} * 1000 * 1000;
  EXPECT_EQ(NextFloorProbe(s, 4000, 0, milliseconds(1000)), milliseconds(50));
  StreamState keep;  // keeps current values: no hurry at all
  keep.first_seq = 1;
  keep.last_seq = 10;
  EXPECT_EQ(NextFloorProbe(keep, 10, 0, milliseconds(1000)), milliseconds(1000));
}

TEST(KvOperationTest, LimitMarkersAreDeletes) {
  using nats::OpOfHeaders;
  EXPECT_EQ(OpOfHeaders("", ""), Op::kPut);
  EXPECT_EQ(OpOfHeaders("DEL", ""), Op::kDelete);
  EXPECT_EQ(OpOfHeaders("PURGE", ""), Op::kPurge);
  for (const char* reason : {"MaxAge", "Purge", "Remove"}) {
    EXPECT_EQ(OpOfHeaders("", reason), Op::kDelete) << reason;
  }
}

// Invariant: an operation kvfold does not know is a put, as nats.go folds
// it, never an error a restarted mirror would meet again at the same
// message; a KV-Operation is the message's operation even beside a marker
// reason (nats.go reads the reason only without one).
TEST(KvOperationTest, UnknownOperationsArePuts) {
  using nats::OpOfHeaders;
  EXPECT_EQ(OpOfHeaders("FROB", ""), Op::kPut);
  EXPECT_EQ(OpOfHeaders("del", ""), Op::kPut);
  EXPECT_EQ(OpOfHeaders("FROB", "MaxAge"), Op::kPut);
  EXPECT_EQ(OpOfHeaders("DEL", "MaxAge"), Op::kDelete);
}

}  // namespace
}  // namespace kvfold::core
