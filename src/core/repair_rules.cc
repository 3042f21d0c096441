#include "core/repair_rules.h"

#include <algorithm>

#include "core/marker_window.h"
#include "core/mutation.h"

namespace kvfold {

namespace {
constexpr ExpiryRepair kPolicies[] = {ExpiryRepair::kAuto, ExpiryRepair::kRelist,
                                      ExpiryRepair::kRestore, ExpiryRepair::kNone};
}  // namespace

// The policy's names, beside the rule that picks by policy.
std::string_view ExpiryRepairName(ExpiryRepair repair) {
  switch (repair) {
    case ExpiryRepair::kNone:
      return "none";
    case ExpiryRepair::kRelist:
      return "relist";
    case ExpiryRepair::kRestore:
      return "restore";
    case ExpiryRepair::kAuto:
      return "auto";
  }
  return "?";
}

StatusOr<ExpiryRepair> ParseExpiryRepair(std::string_view name) {
  std::string names;
  for (ExpiryRepair r : kPolicies) {
    if (name == ExpiryRepairName(r)) return r;
    names += std::string(names.empty() ? "" : ", ") + std::string(ExpiryRepairName(r));
  }
  return Status::InvalidArgument("unknown repair policy \"" + std::string(name) + "\"; choose " +
                                 names);
}

namespace core {

const char* RepairCauseName(RepairCause cause) {
  switch (cause) {
    case RepairCause::kExpired:
      return "expired cursor";
    case RepairCause::kFloorTrip:
      return "floor guard trip";
    case RepairCause::kUnanchored:
      return "unanchored fold";
    case RepairCause::kFreshStart:
      return "cursor-less start";
    case RepairCause::kRecreated:
      return "recreated stream";
    case RepairCause::kReconcile:
      return "reconcile";
  }
  return "?";
}

const char* RepairActionName(RepairAction action) {
  switch (action) {
    case RepairAction::kRelist:
      return "relist";
    case RepairAction::kRestore:
      return "restore";
    case RepairAction::kResync:
      return "none (re-list current values, delete nothing)";
    case RepairAction::kRefuse:
      return "refuse";
  }
  return "?";
}

RepairChoice ChooseRepair(ExpiryRepair policy, RepairCause cause, const Retention& r) {
  const std::string listing =
      r.listing_is_truth ? "the key listing is the truth"
                         : "the key listing is not the truth (the bucket evicts current values "
                           "and has evicted, or this fold saw it evict)";
  if (cause == RepairCause::kReconcile) {
    if (r.listing_is_truth) return {RepairAction::kRelist, listing};
    return {RepairAction::kRefuse, "reconcile skipped: " + listing};
  }
  switch (policy) {
    case ExpiryRepair::kNone:
      if (cause == RepairCause::kRecreated) {
        return {RepairAction::kRefuse,
                "repair policy none cannot rebuild a fold of a recreated stream (its revisions "
                "are not comparable); use auto, relist or restore"};
      }
      return {RepairAction::kResync, "repair policy none"};
    case ExpiryRepair::kRelist:
      if (r.listing_is_truth || KVFOLD_MUTANT("choose-relist-on-evicting")) {
        return {RepairAction::kRelist, listing};
      }
      return {RepairAction::kRefuse, "relist refused: " + listing};
    case ExpiryRepair::kRestore:
      return {RepairAction::kRestore, "repair policy restore"};
    case ExpiryRepair::kAuto:
      if (r.listing_is_truth) return {RepairAction::kRelist, "auto: " + listing};
      return {RepairAction::kRestore, "auto: " + listing};
  }
  return {RepairAction::kRefuse, "unknown policy"};
}

Status CheckRestore(const ArtifactManifest& m, const RestoreTarget& t) {
  const std::string what = "artifact " + m.artifact_id;
  if (m.bucket != t.bucket) {
    return Status::FailedPrecondition(what + " is of bucket " + m.bucket + ", not " + t.bucket);
  }
  if (m.stream_created != t.stream_created && !KVFOLD_MUTANT("restore-ignore-identity")) {
    return Status::FailedPrecondition(
        what + " comes from the stream created at " + m.stream_created +
        ", but the bucket's stream was created at " + t.stream_created);
  }
  if (t.last_seq && m.cursor > *t.last_seq && !KVFOLD_MUTANT("restore-ignore-head")) {
    return Status::FailedPrecondition(
        what + " is at cursor " + std::to_string(m.cursor) +
        ", beyond the stream's last sequence " + std::to_string(*t.last_seq) +
        ": the stream was restored from a backup since (same identity, shorter history), so the "
        "artifact describes writes it no longer has; export from a node that follows the stream "
        "as it is now (its export replaces this pointer, artifacts/FORMAT.md)");
  }
  auto scope = Scope::Make(m.scope);
  if (!m.has_scope || !scope.ok()) {
    return Status::FailedPrecondition(what + " records no usable scope");
  }
  if (!t.scope.CoveredBy(*scope) && !KVFOLD_MUTANT("restore-ignore-scope")) {
    return Status::FailedPrecondition(what + " covers scope " + scope->ToString() +
                                      " but the watch needs " + t.scope.ToString() +
                                      "; export from a node watching that scope or wider");
  }
  if (t.fold_cursor && m.cursor <= *t.fold_cursor && !KVFOLD_MUTANT("restore-ignore-ahead")) {
    return Status::FailedPrecondition(what + " is at cursor " + std::to_string(m.cursor) +
                                      ", not ahead of the fold's cursor " +
                                      std::to_string(*t.fold_cursor) + " (stale)");
  }
  if (t.first_seq > m.cursor + 1 && !KVFOLD_MUTANT("restore-ignore-retention")) {
    return Status::FailedPrecondition(what + " is at cursor " + std::to_string(m.cursor) +
                                      ", outside retention: the bucket retains sequences from " +
                                      std::to_string(t.first_seq) +
                                      " (export more often than retention turns over)");
  }
  // A stream that stored nothing after the artifact's cursor holds no
  // marker it could have missed, whatever the artifact's age.
  const bool quiet_since =
      t.last_seq && *t.last_seq == m.cursor && !KVFOLD_MUTANT("restore-ignore-quiet-head");
  StreamState stream;
  stream.marker_ttl_ns = t.marker_ttl_ns;
  if (auto window = MarkerWindowNs(stream);
      window && !quiet_since && !InsideMarkerWindow(m.cursor_time_ns, t.server_time_ns, *window) &&
      !KVFOLD_MUTANT("restore-ignore-marker-window")) {
    return Status::FailedPrecondition(
        DescribeMarkerWindowMiss(what + " at cursor " + std::to_string(m.cursor), t.bucket,
                                 m.cursor_time_ns, t.server_time_ns, stream) +
        " after it (export more often than the marker TTL, less a tenth)");
  }
  return Status::OK();
}

std::optional<KeyChange> RestoreKey(const std::optional<Entry>& fold,
                                    const std::optional<Entry>& artifact, bool listed_live,
                                    uint64_t delete_revision, bool rebase) {
  if (artifact) {
    if (fold && !rebase && fold->revision >= artifact->revision &&
        !KVFOLD_MUTANT("restore-artifact-always-wins")) {
      return std::nullopt;  // the fold is newer (or the same)
    }
    if (fold && *fold == *artifact) return std::nullopt;
    return KeyChange{*artifact, true};
  }
  if (!fold) return std::nullopt;
  if (rebase) {
    // Old-stream revisions say nothing about the new stream: a surviving
    // entry keeps its state at revision 0, so any new message wins.
    if (fold->deleted || listed_live) {
      if (fold->revision == 0) return std::nullopt;
      Entry e = *fold;
      e.revision = 0;
      // An old-stream deadline says nothing of the new stream's message.
      if (!KVFOLD_MUTANT("rebase-keep-deadline")) e.expires_ns = 0;
      return KeyChange{e, false};
    }
    return KeyChange{Entry{delete_revision, true, ""}, true};
  }
  if (fold->deleted || KVFOLD_MUTANT("repair-never-deletes")) return std::nullopt;
  // Only the fold has it: its value may be a write after the artifact's
  // cursor that the resume will deliver, so delete only what the bucket
  // does not list live.
  if (listed_live && !KVFOLD_MUTANT("restore-delete-listed")) return std::nullopt;
  if (fold->revision >= delete_revision) return std::nullopt;
  return KeyChange{Entry{delete_revision, true, ""}, true};
}

std::optional<KeyChange> RelistKey(const Entry& fold, bool listed_live, uint64_t listing_revision,
                                   bool rebase) {
  return RestoreKey(fold, std::nullopt, listed_live, listing_revision, rebase);
}

bool FloorHolds(uint64_t first_seq, uint64_t frontier) { return first_seq <= frontier + 1; }

bool NothingInScopeToCome(uint64_t last_seq, std::optional<uint64_t> first_in_scope_after) {
  if (KVFOLD_MUTANT("probe-ignore-in-flight")) return true;
  return !first_in_scope_after || *first_in_scope_after > last_seq;
}

std::chrono::milliseconds NextFloorProbe(const StreamState& stream, uint64_t frontier,
                                         double write_rate, std::chrono::milliseconds longest) {
  using std::chrono::milliseconds;
  const milliseconds shortest(10);
  milliseconds next = longest;
  // A bucket that evicts by count or size can turn over in a burst the
  // rate has not seen yet: never sleep long on one.
  if (stream.max_msgs > 0 || stream.max_bytes > 0) next = std::min(next, milliseconds(200));
  if (stream.max_age_ns > 0) {
    next = std::min(next, milliseconds(std::max<int64_t>(stream.max_age_ns / 4000000, 1)));
  }
  if (write_rate < 0) return std::clamp(milliseconds(50), shortest, next);
  uint64_t headroom = frontier + 1 > stream.first_seq ? frontier + 1 - stream.first_seq : 0;
  if (stream.max_msgs > 0 && static_cast<uint64_t>(stream.max_msgs) > stream.messages) {
    headroom += static_cast<uint64_t>(stream.max_msgs) - stream.messages;
  }
  if (write_rate > 0) {
    // A quarter of the time retention needs to reach the frontier: the
    // probe itself, and the writer's bursts, take some of it.
    const double ms = 1000.0 * static_cast<double>(headroom) / write_rate / 4;
    if (ms < static_cast<double>(next.count())) next = milliseconds(static_cast<int64_t>(ms));
  }
  return std::clamp(next, shortest, std::max(shortest, longest));
}

}  // namespace core
}  // namespace kvfold
