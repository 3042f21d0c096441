#include "kvfold/watch_metrics.h"

#include <algorithm>

#include "core/mutation.h"

namespace kvfold {

// The arrays of WatchStats are indexed by these enums.
static_assert(static_cast<size_t>(Op::kPurge) + 1 == WatchStats::kOps);
static_assert(static_cast<size_t>(ChangeOrigin::kExpiry) + 1 == WatchStats::kOrigins);
static_assert(static_cast<size_t>(ResetCause::kOther) + 1 == WatchStats::kResetCauses);
static_assert(static_cast<size_t>(RepairKind::kRefuse) + 1 == WatchStats::kRepairKinds);
static_assert(static_cast<size_t>(RepairOutcome::kFailed) + 1 == WatchStats::kRepairOutcomes);

using SteadyClock = std::chrono::steady_clock;

std::string_view RepairOutcomeName(RepairOutcome outcome) {
  switch (outcome) {
    case RepairOutcome::kDone:
      return "done";
    case RepairOutcome::kRefused:
      return "refused";
    case RepairOutcome::kInterrupted:
      return "interrupted";
    case RepairOutcome::kAbandoned:
      return "abandoned";
    case RepairOutcome::kFailed:
      return "failed";
  }
  return "failed";
}

std::string_view RepairKindName(RepairKind kind) {
  switch (kind) {
    case RepairKind::kRelist:
      return "relist";
    case RepairKind::kRestore:
      return "restore";
    case RepairKind::kReconcile:
      return "reconcile";
    case RepairKind::kResync:
      return "resync";
    case RepairKind::kRefuse:
      return "refuse";
  }
  return "refuse";
}

WatchStats WatchMetrics::Snapshot() const {
  std::lock_guard lock(mu_);
  WatchStats s = stats_;
  const auto now = SteadyClock::now();
  if (!heads_.empty())
    s.lag_seconds = std::chrono::duration<double>(now - heads_.front().second).count();
  s.last_activity_age_seconds = std::chrono::duration<double>(now - last_activity_).count();
  s.last_read_age_seconds = std::chrono::duration<double>(now - last_read_).count();
  return s;
}

void WatchMetrics::RecordChange(Op op, ChangeOrigin origin) {
  std::lock_guard lock(mu_);
  ++stats_.changes[static_cast<size_t>(op)][static_cast<size_t>(origin)];
}

void WatchMetrics::RecordCommit(bool ok, SteadyClock::duration took) {
  const double secs = std::chrono::duration<double>(took).count();
  const auto& bounds = WatchStats::kLatencyBounds;
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), secs) - bounds.begin());
  std::lock_guard lock(mu_);
  ++(ok ? stats_.commits : stats_.commit_failures);
  ++stats_.commit_latency[bucket];
  stats_.commit_latency_sum += secs;
  last_activity_ = SteadyClock::now();
}

void WatchMetrics::RecordCursor(uint64_t cursor) {
  std::lock_guard lock(mu_);
  if (stats_.cursor && cursor < *stats_.cursor) {  // rebuilt on a new stream
    heads_.clear();
    stats_.caught_up = false;
    catch_up_target_.reset();
  }
  stats_.cursor = cursor;
  UpdateLag();
}

void WatchMetrics::RecordStreamHeartbeat(uint64_t last_seq) {
  std::lock_guard lock(mu_);
  RecordHeadLocked(last_seq, /*read=*/true, /*answered=*/false);
}

void WatchMetrics::RecordStreamLast(uint64_t last_seq, bool read) {
  std::lock_guard lock(mu_);
  RecordHeadLocked(last_seq, read, read);
}

void WatchMetrics::RecordHeadLocked(uint64_t last_seq, bool read, bool answered) {
  // The newest reading wins. A lower one (a delivered message's `pending`
  // overstates the head on a 2.10+ server) keeps the heads seen: only a
  // cursor that goes back (a recreated stream) clears them.
  stats_.stream_last_seq = last_seq;
  // A head read during a repair is no target: the repair rewrites the fold
  // under it, and the catch-up after it aims at a head read after it. Nor
  // is a head below the cursor: the stream was recreated or this server's
  // view lags, and the watch has yet to judge which (a rebuild may follow);
  // "caught up" meanwhile would have systemd told READY=1, for good.
  if (read && !catch_up_target_ && !RepairHoldsCatchUp() &&
      (last_seq >= stats_.cursor.value_or(0) || KVFOLD_MUTANT("ready-target-below-cursor"))) {
    catch_up_target_ = last_seq;
  }
  const auto now = SteadyClock::now();
  last_activity_ = now;
  if (read) {
    last_read_ = now;
    stats_.read_stream_last_seq = last_seq;
    if (answered) ++stats_.stream_reads;
  }
  constexpr size_t kMaxHeads = 4096;  // past it, later heads wait their turn
  if (last_seq > stats_.cursor.value_or(0) && heads_.size() < kMaxHeads &&
      (heads_.empty() || last_seq > heads_.back().first)) {
    heads_.emplace_back(last_seq, now);
  }
  UpdateLag();
}

void WatchMetrics::UpdateLag() {
  const uint64_t cursor = stats_.cursor.value_or(0);
  while (!heads_.empty() && heads_.front().first <= cursor) heads_.pop_front();
  stats_.lag_messages = stats_.stream_last_seq > cursor ? stats_.stream_last_seq - cursor : 0;
  if (catch_up_target_ && cursor >= *catch_up_target_ && !RepairHoldsCatchUp()) {
    stats_.caught_up = true;
  }
}

bool WatchMetrics::RepairHoldsCatchUp() const {
  return stats_.repairing && !KVFOLD_MUTANT("ready-caught-up-through-repair");
}

void WatchMetrics::RecordRepair(RepairKind kind, RepairOutcome outcome) {
  std::lock_guard lock(mu_);
  ++stats_.repairs[static_cast<size_t>(kind)][static_cast<size_t>(outcome)];
}

void WatchMetrics::RecordRepairRunning(bool running) {
  std::lock_guard lock(mu_);
  stats_.repairing = running;
  // In the same step: the watch marks the end of a repair before it
  // records the repair's outcome (RecordRepaired), and a caught_up left
  // from before the repair would read ready in between.
  if (RepairHoldsCatchUp()) {
    stats_.caught_up = false;
    catch_up_target_.reset();
  }
  last_activity_ = SteadyClock::now();  // a repair turns the loop too
}

void WatchMetrics::RecordRepaired() {
  std::lock_guard lock(mu_);
  stats_.caught_up = false;
  catch_up_target_.reset();
}

void WatchMetrics::RecordRetryWait() {
  std::lock_guard lock(mu_);
  last_activity_ = SteadyClock::now();
}

void WatchMetrics::RecordRestoreProgress(uint64_t chunks_done, uint64_t chunks_total) {
  std::lock_guard lock(mu_);
  stats_.restore_chunks_done = chunks_done;
  stats_.restore_chunks_total = chunks_total;
}

void WatchMetrics::RecordRestoreRetry() {
  std::lock_guard lock(mu_);
  ++stats_.restore_retries;
}

void WatchMetrics::RecordFloorTrip() {
  std::lock_guard lock(mu_);
  ++stats_.floor_guard_trips;
}

void WatchMetrics::RecordReset(ResetCause cause) {
  std::lock_guard lock(mu_);
  ++stats_.resets[static_cast<size_t>(cause)];
}

void WatchMetrics::RecordReconnect() {
  std::lock_guard lock(mu_);
  ++stats_.reconnects;
}

}  // namespace kvfold
