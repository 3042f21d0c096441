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
#include <mutex>
#include <optional>
#include <string_view>

#include "kvfold/bucket.h"
#include "kvfold/repair.h"
#include "kvfold/watcher.h"

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
  static constexpr size_t kOps = 3;      // Op
  static constexpr size_t kOrigins = 4;  // ChangeOrigin
  static constexpr size_t kResetCauses = 8;
  static constexpr size_t kRepairKinds = 5;
  static constexpr size_t kRepairOutcomes = 5;
  // Upper bounds, in seconds, of the commit-latency histogram's buckets;
  // a last bucket (+Inf) takes the rest.
  static constexpr std::array<double, 10> kLatencyBounds = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5};

  // Changes folded (each one the apply hook saw), by op and origin:
  // changes[static_cast<size_t>(Op)][static_cast<size_t>(ChangeOrigin)].
  std::array<std::array<uint64_t, kOrigins>, kOps> changes{};

  // The fold's committed cursor; nullopt until the first commit or read.
  std::optional<uint64_t> cursor;
  // The stream's last sequence as last seen (a stream read, or a delivered
  // message's own sequence plus what the server said was still pending).
  uint64_t stream_last_seq = 0;
  // stream_last_seq - cursor (0 when the cursor is at or past it). Counts
  // messages out of scope too: the cursor passes them as it proves them.
  uint64_t lag_messages = 0;
  // How long the cursor has trailed stream_last_seq without catching up,
  // as of the snapshot; 0 when caught up.
  double lag_seconds = 0;

  // Commits that succeeded (watch and repair commits), commits that failed
  // and were kept to retry, and the latency of each commit (successful or
  // not) as a cumulative-free histogram: commit_latency[i] counts commits
  // that took at most kLatencyBounds[i] and more than the bound before.
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
  void RecordStreamLast(uint64_t last_seq);
  void RecordRepair(RepairKind kind, RepairOutcome outcome);
  void RecordRestoreProgress(uint64_t chunks_done, uint64_t chunks_total);
  void RecordFloorTrip();
  void RecordReset(ResetCause cause);
  void RecordReconnect();

 private:
  // Keeps behind_since_ in step with the cursor and the stream's head.
  void UpdateLag();

  mutable std::mutex mu_;
  WatchStats stats_;
  std::optional<std::chrono::steady_clock::time_point> behind_since_;
};

}  // namespace kvfold

#endif  // KVFOLD_WATCH_METRICS_H_
