// The watch loop's floor guard checks (watch/watch_loop.h): the mid-watch
// floor check, the marker window of a stretch read, the probe that proves
// quiet stretches, and the lagging view of a replica behind what this
// watch saw. FloorGuard (watch/floor_guard.h) owns the positions; these
// read the stream and turn a failed check into a repair.

#include <algorithm>

#include "core/marker_window.h"
#include "core/mutation.h"
#include "core/window.h"
#include "watch/watch_loop.h"

namespace kvfold {

namespace {

// How long the server's view of the stream may lag what a watch received
// before it counts as a reset (LaggingView): longer than a cluster's
// replica takes to catch up after a partition heals.
constexpr std::chrono::seconds kLaggingViewPatience{120};

}  // namespace

Status WatchLoop::LaggingView(const StreamState& state) {
  // The position the window check compares the head with: what was
  // received, or above it the frontier a relist raised to its listing's
  // head. A head below either is a view behind what this watch saw.
  std::optional<uint64_t> received = guard_.received();
  if (received && !KVFOLD_MUTANT("window-lagging-below-received-only")) {
    received = std::max(*received, guard_.Frontier(state));
  }
  if (stream_created_.empty() || state.created != stream_created_ || !received ||
      state.last_seq >= *received || KVFOLD_MUTANT("window-trust-lagging-view")) {
    // An episode ends with the first view that is not behind: the next
    // one waits its own patience.
    if (!KVFOLD_MUTANT("lagging-since-never-cleared")) lagging_since_.reset();
    return Status::OK();
  }
  source_.NoteLaggingView();  // it may be this server's copy that lags
  const auto now = clock_.Now();
  if (!lagging_since_) lagging_since_ = now;
  if (now - *lagging_since_ >= kLaggingViewPatience) return Status::OK();
  return Status::Unavailable(
      "stream KV_" + source_.bucket() + " as the server reports it ends at sequence " +
      std::to_string(state.last_seq) + ", before sequence " + std::to_string(*received) +
      " this watch already received or listed from the same stream: a replica that has not caught "
      "up "
      "(after a partition, say); waiting for it (a view behind for " +
      std::to_string(
          std::chrono::duration_cast<std::chrono::seconds>(kLaggingViewPatience).count()) +
      " s is taken for a reset of the stream)");
}

StatusOr<StreamState> WatchLoop::CheckFloor() {
  const auto received = guard_.received();
  auto state = ReadState();
  if (!state.ok()) return state.status();
  last_floor_check_ = clock_.Now();
  NoteRetention(*state);
  guard_.SampleWrites(last_floor_check_, state->last_seq);
  std::string why;
  auto fault =
      core::CheckWindow(source_.bucket(), *state, guard_.Frontier(*state), stream_created_, &why);
  if (KVFOLD_MUTANT("floor-skip-midwatch")) fault = core::WindowFault::kNone;
  switch (fault) {
    case core::WindowFault::kRecreated:
      NeedRepair(core::RepairCause::kRecreated, why);
      return state;
    case core::WindowFault::kExpired:
      if (opt_.metrics) opt_.metrics->RecordFloorTrip();
      NeedRepair(core::RepairCause::kFloorTrip, "retention passed the frontier mid-watch: " + why);
      return state;
    case core::WindowFault::kNone:
      break;
  }
  // A repair already due (a stretch read outside the marker window) keeps
  // the frontier where it is.
  if (repair_cause_) return state;
  if (guard_.received() == received) guard_.VerifyReceived();
  AdvanceCursor();
  return state;
}

bool WatchLoop::MarkerStretchHolds(int64_t now_ns, const std::string& stretch) {
  const auto window = core::MarkerWindowNs(last_state_);
  if (!window || KVFOLD_MUTANT("floor-ignore-marker-window")) return true;
  if (guard_.ReceivedInsideWindow(now_ns, *window)) return true;
  const bool first = guard_.LoseAnchor();
  if (repair_cause_) return false;
  if (opt_.metrics && first) opt_.metrics->RecordFloorTrip();
  NeedRepair(core::RepairCause::kFloorTrip,
             stretch + " was read outside the marker window: " +
                 core::DescribeMarkerWindowMiss(
                     "sequence " + std::to_string(guard_.received().value_or(0)), source_.bucket(),
                     guard_.received_anchor(), now_ns, last_state_));
  return false;
}

// Proves that everything in scope up to the stream's last sequence has
// arrived, so the cursor can pass stretches with nothing in scope. last_seq
// is read first; then the stream's store (not a consumer counter, which a
// newer or clustered server updates late) must hold nothing in scope
// between what arrived and last_seq; then a fresh floor check must pass,
// which proves nothing in that stretch was evicted before the store was
// asked.
Status WatchLoop::Probe() {
  auto first = CheckFloor();
  if (!first.ok()) return first.status();
  if (repair_cause_) return Status::OK();
  const uint64_t last = first->last_seq;
  const uint64_t received = guard_.received().value_or(0);
  if (last > received) {
    auto next = source_.FirstRetainedInScope(opt_.scope, received + 1);
    if (!next.ok()) return next.status();
    if (!core::NothingInScopeToCome(last, *next)) {
      probe_soon_ = true;  // something in scope is still on its way
      return TryCommit(/*force=*/false);
    }
    // The store was searched just now: on a bucket with limit markers the
    // stretch passes only if that was within the window.
    if (!MarkerStretchHolds(ServerNow(), "the stretch from sequence " +
                                             std::to_string(received + 1) + " to " +
                                             std::to_string(last))) {
      return Status::OK();
    }
    // Everything after `last` was stored after the first read.
    guard_.ReceiveQuietStretch(last, first->server_time_ns);
    auto second = CheckFloor();
    if (!second.ok()) return second.status();
    if (repair_cause_) return Status::OK();
  } else if (guard_.received() && !guard_.anchor_lost()) {
    guard_.ReanchorReceived(first->server_time_ns);  // nothing at all after received
    AdvanceCursor();
  }
  return TryCommit(/*force=*/true);
}

Status WatchLoop::ProveFrontier() {
  if (guard_.unverified() && !repair_cause_) {
    auto checked = CheckFloor();
    if (!checked.ok() && !checked.status().IsUnavailable()) return checked.status();
  }
  return Status::OK();
}

}  // namespace kvfold
