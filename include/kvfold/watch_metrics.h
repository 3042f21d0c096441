// Counters and gauges of a running watch, for an embedding service to
// publish through its own metrics registry (the CLI serves them as
// Prometheus text with `kvfold mirror --metrics-addr`).
//
//   kvfold::WatchMetrics metrics;
//   options.metrics = &metrics;          // before Watch()
//   ... on any thread, at any time:
//   kvfold::WatchStats s = metrics.Snapshot();
//
// A WatchMetrics may outlive a watch and be handed to the next one: the
// counters keep counting. Thread safety: every method may be called from
// any thread.

#ifndef KVFOLD_WATCH_METRICS_H_
#define KVFOLD_WATCH_METRICS_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string_view>

#include "kvfold/bucket.h"
#include "kvfold/change.h"
#include "kvfold/repair.h"

namespace kvfold {

// How a repair ended.
enum class RepairOutcome {
  kDone,         // the fold is whole again
  kRefused,      // the watch ended with CursorExpired
  kInterrupted,  // the server went away; the repair runs again
  kAbandoned,    // the bucket's retention changed under it; decided afresh
  kFailed,       // any other error ended the watch
};
std::string_view RepairOutcomeName(RepairOutcome outcome);  // "done", "refused", ...

// What a repair did (the action chosen, not the policy asked for).
enum class RepairKind { kRelist, kRestore, kReconcile, kResync, kRefuse };
std::string_view RepairKindName(RepairKind kind);  // "relist", ..., "resync", "refuse"

struct WatchStats {
  // Array sizes, one past each enum's last value: a value added at the
  // end grows them. REQUIRES of a new value: add it last.
  static constexpr size_t kOps = static_cast<size_t>(Op::kPurge) + 1;
  static constexpr size_t kOrigins = static_cast<size_t>(ChangeOrigin::kExpiry) + 1;
  static constexpr size_t kResetCauses = static_cast<size_t>(ResetCause::kOther) + 1;
  static constexpr size_t kRepairKinds = static_cast<size_t>(RepairKind::kRefuse) + 1;
  static constexpr size_t kRepairOutcomes = static_cast<size_t>(RepairOutcome::kFailed) + 1;
  // Upper bounds, in seconds, of the commit-latency histogram's buckets;
  // a last bucket (+Inf) takes the rest.
  static constexpr std::array<double, 10> kLatencyBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                            0.025,  0.05,  0.1,    0.5,   2.5};

  // Changes folded (each one the apply hook saw), by op and origin:
  // changes[static_cast<size_t>(Op)][static_cast<size_t>(ChangeOrigin)].
  std::array<std::array<uint64_t, kOrigins>, kOps> changes{};

  // The fold's committed cursor; nullopt until the first commit or read.
  std::optional<uint64_t> cursor;
  // The stream's last sequence as last seen (a stream read, or a delivered
  // message's own sequence plus what the server said was still pending).
  uint64_t stream_last_seq = 0;
  // The stream's last sequence as the newest stream read said (never a
  // delivered message's hint), at last_read_age_seconds ago.
  uint64_t read_stream_last_seq = 0;
  // Stream reads answered (requests only, not heartbeats). The watch makes
  // one at a time: the second answered after a moment was asked after it
  // (the first may have been on its way already).
  uint64_t stream_reads = 0;
  // stream_last_seq - cursor (0 when the cursor is at or past it). Counts
  // messages out of scope too: the cursor passes them as it proves them.
  uint64_t lag_messages = 0;
  // The age of the oldest stream sequence not yet under the cursor: how
  // long ago this watch first saw the stream's head reach past the cursor
  // at a point the cursor has still not passed. 0 when caught up. A steady
  // small backlog keeps it small; a stuck or overrun mirror makes it grow.
  double lag_seconds = 0;
  // The cursor has reached the stream's head as first read after these
  // metrics began, or after the last repair that rewrote the fold, or
  // after the cursor went back (a recreated stream) (readiness: a restart
  // behind the head is not ready until it caught up). False from the
  // moment such a repair starts: only a head read after it counts, and
  // only one at or above the cursor (below it, the stream was recreated or
  // the server's view lags).
  bool caught_up = false;
  // A repair that rewrites the fold runs now (readiness: not servable).
  bool repairing = false;
  // Seconds since the watch loop last turned: it read the stream,
  // committed, started or ended a repair, or waited to retry a server it
  // could not reach. An idle watch reads the stream at least every
  // idle_probe (1 s; a quiet whole-bucket one every quiet_read_every,
  // 10 s, hearing the server's heartbeat between) and retries a lost server at least every
  // reconnect_backoff_max (30 s), so a value well above that means the
  // watch is stuck (a store that does not return, a blocked apply hook).
  // Liveness: a watch cut off from the server still turns.
  double last_activity_age_seconds = 0;
  // Seconds since a stream read last succeeded: a fresh reply from the
  // server about the stream's state (not a retry wait, not a delivered
  // message's hint), or since these metrics began. A watch that reaches
  // the server reads it at least every idle_probe (1 s) when idle and
  // every floor_check (50 ms) while messages arrive, and a quiet
  // whole-bucket watch counts each server heartbeat showing the head it
  // read (every 5 s; WatchOptions::quiet_read_every), so a value well
  // above that means the server is unreachable or does not answer, and the
  // fold may be falling behind a stream this watch can no longer see.
  // Readiness: caught_up and lag_seconds only know the heads read.
  double last_read_age_seconds = 0;

  // Commits of changes that succeeded (the watch's batches and a repair's),
  // commits that failed and were retried, and the latency of each (either
  // outcome) as a non-cumulative histogram: commit_latency[i] counts
  // commits that took at most kLatencyBounds[i] and more than the bound
  // before. Metadata-only commits (a repair's record) are not counted.
  uint64_t commits = 0;
  uint64_t commit_failures = 0;
  std::array<uint64_t, kLatencyBounds.size() + 1> commit_latency{};
  double commit_latency_sum = 0;  // seconds

  // Repairs by what they did and how they ended:
  // repairs[static_cast<size_t>(RepairKind)][static_cast<size_t>(RepairOutcome)].
  std::array<std::array<uint64_t, kRepairOutcomes>, kRepairKinds> repairs{};
  // The restore running now (or the last one): artifact chunks committed
  // of the artifact's total.
  uint64_t restore_chunks_done = 0;
  uint64_t restore_chunks_total = 0;
  // Restore attempts that found no usable artifact (none yet, stale,
  // outside retention, damaged) and will retry until repair_timeout: a
  // mirror that keeps counting these is heading for exit 3.
  uint64_t restore_retries = 0;
  // Times retention passed the frontier mid-watch (the floor guard tripped).
  uint64_t floor_guard_trips = 0;

  // Deliveries that broke, by cause: resets[static_cast<size_t>(ResetCause)].
  std::array<uint64_t, kResetCauses> resets{};
  // Deliveries opened after the first (after a reset, an unreachable
  // server, a repair).
  uint64_t reconnects = 0;
};

class WatchMetrics {
 public:
  WatchMetrics() = default;
  WatchMetrics(const WatchMetrics&) = delete;
  WatchMetrics& operator=(const WatchMetrics&) = delete;

  WatchStats Snapshot() const;

  // Recorded by the watch (and its repairs); a user only reads.
  void RecordChange(Op op, ChangeOrigin origin);
  void RecordCommit(bool ok, std::chrono::steady_clock::duration took);
  void RecordCursor(uint64_t cursor);
  // `read`: from a stream read that just succeeded (exact, and proof the
  // server answers), not a delivery's hint (which can overstate the head);
  // only a read sets the head caught_up aims at, outside a repair.
  void RecordStreamLast(uint64_t last_seq, bool read = true);
  // A server heartbeat that shows the head the last read saw (a quiet
  // whole-bucket watch): as a read for readiness, but no request answered.
  void RecordStreamHeartbeat(uint64_t last_seq);
  void RecordRepair(RepairKind kind, RepairOutcome outcome);
  // A repair that rewrites the fold starts (clears caught_up in the same
  // step, so no snapshot reads "caught up, not repairing" at its end) or
  // ends.
  void RecordRepairRunning(bool running);
  void RecordRepaired();   // a repair rewrote the fold: catch up again
  void RecordRetryWait();  // the loop waits to retry a server or a repair
  void RecordRestoreProgress(uint64_t chunks_done, uint64_t chunks_total);
  void RecordRestoreRetry();
  void RecordFloorTrip();
  void RecordReset(ResetCause cause);
  void RecordReconnect();

 private:
  // RecordStreamLast's work, under mu_; `answered`: a read request's answer.
  void RecordHeadLocked(uint64_t last_seq, bool read, bool answered);
  // Keeps lag_messages and heads_ in step with the cursor and the head.
  void UpdateLag();
  // A repair runs: caught_up stays false, no head read becomes its target.
  bool RepairHoldsCatchUp() const;

  mutable std::mutex mu_;
  WatchStats stats_;
  // Increasing stream heads above the cursor, each with when it was first
  // seen; the front is the oldest the cursor has not passed (bounded).
  std::deque<std::pair<uint64_t, std::chrono::steady_clock::time_point>> heads_;
  std::chrono::steady_clock::time_point last_activity_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_read_ = last_activity_;
  // The head to reach for caught_up: the first one read since the start,
  // the last repair or a cursor that went back.
  std::optional<uint64_t> catch_up_target_;
};

}  // namespace kvfold

#endif  // KVFOLD_WATCH_METRICS_H_
