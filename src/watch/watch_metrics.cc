#include "kvfold/watch_metrics.h"

#include <algorithm>

namespace kvfold {

using SteadyClock = std::chrono::steady_clock;

std::string_view RepairOutcomeName(RepairOutcome outcome) {
  switch (outcome) {
    case RepairOutcome::kDone: return "done";
    case RepairOutcome::kRefused: return "refused";
    case RepairOutcome::kInterrupted: return "interrupted";
    case RepairOutcome::kAbandoned: return "abandoned";
    case RepairOutcome::kFailed: return "failed";
  }
  return "failed";
}

std::string_view RepairKindName(RepairKind kind) {
  switch (kind) {
    case RepairKind::kRelist: return "relist";
    case RepairKind::kRestore: return "restore";
    case RepairKind::kReconcile: return "reconcile";
    case RepairKind::kResync: return "resync";
    case RepairKind::kRefuse: return "refuse";
  }
  return "refuse";
}

WatchStats WatchMetrics::Snapshot() const {
  std::lock_guard lock(mu_);
  WatchStats s = stats_;
  if (behind_since_) {
    s.lag_seconds = std::chrono::duration<double>(SteadyClock::now() - *behind_since_).count();
  }
  return s;
}

void WatchMetrics::RecordChange(Op op, ChangeOrigin origin) {
  std::lock_guard lock(mu_);
  ++stats_.changes[static_cast<size_t>(op)][static_cast<size_t>(origin)];
}

void WatchMetrics::RecordCommit(bool ok, SteadyClock::duration took) {
  const double secs = std::chrono::duration<double>(took).count();
  const auto& bounds = WatchStats::kLatencyBounds;
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), secs) - bounds.begin());
  std::lock_guard lock(mu_);
  ++(ok ? stats_.commits : stats_.commit_failures);
  ++stats_.commit_latency[bucket];
  stats_.commit_latency_sum += secs;
}

void WatchMetrics::RecordCursor(uint64_t cursor) {
  std::lock_guard lock(mu_);
  stats_.cursor = cursor;
  UpdateLag();
}

void WatchMetrics::RecordStreamLast(uint64_t last_seq) {
  std::lock_guard lock(mu_);
  stats_.stream_last_seq = last_seq;  // the newest reading (a recreated stream starts over)
  UpdateLag();
}

void WatchMetrics::UpdateLag() {
  const uint64_t cursor = stats_.cursor.value_or(0);
  if (stats_.cursor && cursor > stats_.stream_last_seq) stats_.stream_last_seq = cursor;
  stats_.lag_messages = stats_.stream_last_seq - std::min(cursor, stats_.stream_last_seq);
  if (stats_.lag_messages == 0) {
    behind_since_.reset();
  } else if (!behind_since_) {
    behind_since_ = SteadyClock::now();
  }
}

void WatchMetrics::RecordRepair(RepairKind kind, RepairOutcome outcome) {
  std::lock_guard lock(mu_);
  ++stats_.repairs[static_cast<size_t>(kind)][static_cast<size_t>(outcome)];
}

void WatchMetrics::RecordRestoreProgress(uint64_t chunks_done, uint64_t chunks_total) {
  std::lock_guard lock(mu_);
  stats_.restore_chunks_done = chunks_done;
  stats_.restore_chunks_total = chunks_total;
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
