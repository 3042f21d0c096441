// The watch loop's commit pipeline: the batch pending, the batch in flight
// (written by an AsyncCommitter while the next one fills), the fold's
// committed cursor and anchor, and the retry rule after a failed commit. A
// failed batch goes back under what is pending, so nothing received is
// lost; max_commit_failures in a row is fatal.
//
// The watch loop still decides what a batch holds and proves the frontier
// before each hand-off (the `prove` callback); the pipeline decides only
// when a batch is handed over and what a failure does.
//
// Not thread-safe: the watch loop's thread owns it.

#ifndef KVFOLD_WATCH_COMMIT_PIPELINE_H_
#define KVFOLD_WATCH_COMMIT_PIPELINE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/commit_retry.h"
#include "core/pending_batch.h"
#include "kvfold/clock.h"
#include "kvfold/fold.h"
#include "kvfold/log_line.h"
#include "kvfold/watch_metrics.h"
#include "watch/async_committer.h"

namespace kvfold {

struct CommitPipelineOptions {
  bool background = true;       // WatchOptions::commit_in_background
  size_t batch_size = 1;        // WatchOptions::batch_size
  size_t batch_bytes = 1;       // WatchOptions::batch_bytes
  size_t sync_run_bytes = 1;    // WatchOptions::sync_run_bytes
  int max_commit_failures = 1;  // WatchOptions::max_commit_failures
  WatchMetrics* metrics = nullptr;
  std::function<void(LogLevel, const std::string&)> log;
  // After every successful commit that leaves the fold with a cursor.
  std::function<void(uint64_t cursor)> committed;
};

class CommitPipeline {
 public:
  CommitPipeline(Fold& fold, Clock& clock, CommitPipelineOptions options);
  CommitPipeline(const CommitPipeline&) = delete;
  CommitPipeline& operator=(const CommitPipeline&) = delete;

  // The fold's cursor and its anchor, as read from the fold or rewritten by
  // a repair; what is pending starts over at that cursor.
  // REQUIRES: !in_flight().
  void ResetTo(std::optional<uint64_t> cursor, int64_t anchor_ns);

  core::PendingBatch& pending() { return pending_; }
  const core::PendingBatch& pending() const { return pending_; }
  const std::optional<uint64_t>& committed() const { return committed_; }
  int64_t committed_anchor() const { return committed_anchor_; }
  bool in_flight() const { return committer_.in_flight(); }

  // On a bucket with limit markers, an anchor-only commit is due once the
  // pending cursor's anchor moved a quarter of `window_ns` past the
  // fold's, so that a restart after an idle spell still resumes. None: no
  // marker window.
  void set_marker_window(std::optional<int64_t> window_ns) { marker_window_ns_ = window_ns; }

  // The key's entry pending, else in flight (being written: the fold may
  // not show it yet); nullptr if neither.
  const Entry* Find(const std::string& key) const;
  // Visits every entry not yet committed: the batch in flight's, then the
  // pending batch's (a key in both twice, the newer last).
  void ForEachUncommitted(
      const std::function<bool(std::string_view key, const Entry& entry)>& fn) const;
  // A commit would change the fold.
  bool HasWork() const;
  // What is pending reached batch_size changes or batch_bytes bytes; a
  // run of new keys (PendingBatch::AllKnownNew), sync_run_bytes alone.
  bool BatchFull() const;
  // A run of new keys is pending: it commits when full, or when the
  // delivery has nothing more at once (WatchLoop), not on the linger.
  bool RunPending() const { return pending_.AllKnownNew(); }

  // Hands what is pending over unless a retry is not due yet, first
  // collecting the batch in flight (once it is done, or whatever its state
  // when `force`); with `force` it also waits for the commit. `prove` runs
  // just before a hand-off. Returns non-OK when `prove` fails or
  // max_commit_failures is reached.
  Status TryCommit(bool force, const std::function<Status()>& prove);
  // Collects the batch in flight if it is written already.
  Status CollectIfFinished();
  // Commits until nothing is pending or in flight, backing off between
  // failures (a stop request does not skip them), or the limit is reached.
  Status Flush(const std::function<Status()>& prove);

 private:
  // Waits for the batch in flight: on success the cursor moves; on failure
  // the batch goes back under what is pending, to be retried.
  Status Collect();
  bool AnchorRefreshDue() const;
  // While a batch is in flight, the next may still grow: up to 8 x
  // batch_size changes and batch_bytes, or a full run.
  bool RoomBesideInFlight() const;
  // The cursor of the last batch handed over, else the fold's.
  std::optional<uint64_t> Handed() const;
  void Log(LogLevel level, const std::string& line) const {
    if (opt_.log) opt_.log(level, line);
  }

  Clock& clock_;
  const CommitPipelineOptions opt_;
  core::PendingBatch pending_;
  std::optional<uint64_t> committed_;  // the fold's cursor
  int64_t committed_anchor_ = 0;       // the fold's cursor_time_ns
  std::optional<int64_t> marker_window_ns_;
  core::CommitRetry retry_;
  Clock::TimePoint retry_at_;
  AsyncCommitter committer_;
};

}  // namespace kvfold

#endif  // KVFOLD_WATCH_COMMIT_PIPELINE_H_
