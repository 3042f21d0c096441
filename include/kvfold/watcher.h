// The watcher: folds a bucket's updates within a scope into a Fold.
//
// Watch() runs on the calling thread until it is stopped, caught up (when
// asked to stop there) or fails. Changes are committed in batches, each batch
// together with the new cursor in one atomic Commit. The apply hook sees every
// change in stream order before the batch holding it commits; the cursor
// advances only after the hook returned and the commit succeeded. A restart
// resumes from the fold's cursor and replays only the delta.
//
// Before it creates a consumer, and again after, the watcher checks that the
// stream still retains everything after the cursor (first_seq <= cursor + 1),
// that last_seq >= cursor, and that the stream is the one the fold came from.
// NATS clamps a too-low start sequence silently; this check is what notices.
// While watching, the floor guard checks the same of the *frontier* (the
// highest sequence through which everything in scope has arrived) on a
// timer, and proves quiet stretches empty by asking the stream's store, not
// consumer counters. When either fails, or the fold is unanchored, or the
// stream was recreated, the watcher folds what it received, flushes, and
// repairs by WatchOptions::repair (see repair.h), then resumes. A repair that
// is refused, or finds no usable artifact within repair_timeout, ends the
// watch with Status::CursorExpired and the fold as it was.
//
// Thread safety: one Watch per Fold at a time. Readers may read the fold
// concurrently. Stop a watch from any thread through WatchOptions::stop.

#ifndef KVFOLD_WATCHER_H_
#define KVFOLD_WATCHER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string_view>

#include "kvfold/bucket.h"
#include "kvfold/change.h"
#include "kvfold/clock.h"
#include "kvfold/fold.h"
#include "kvfold/log_line.h"
#include "kvfold/repair.h"
#include "kvfold/scope.h"
#include "kvfold/status.h"

namespace kvfold {

class WatchMetrics;

struct WatchOptions {
  // Keys to fold. Default: the whole bucket. A fold records its scope on the
  // first watch; a later watch with another scope is refused.
  Scope scope;

  // Commit when this many changes are pending. Default: 1000. REQUIRES: > 0.
  size_t batch_size = 1000;

  // Commit also when the changes pending hold this many bytes of keys and
  // values, whichever bound comes first: large values must not make a
  // batch of batch_size changes gigabytes. A batch may pass it by one
  // change. Default: 64 MiB. REQUIRES: > 0.
  size_t batch_bytes = size_t{64} << 20;

  // The first state sync into an empty fold (every key it brings is new)
  // commits in runs instead of batches: each run's keys go into the fold
  // as one sorted table file, linked in atomically with the cursor (SST
  // ingestion), skipping the write-ahead log and the memtables. A run ends
  // once it holds this many bytes (keys, values and about 128 bytes of
  // bookkeeping per key), when the delivery has nothing more at once, or
  // at the first message past the sync (which goes in a batch after it);
  // a crash leaves the fold at the last run linked in. An expiry folded
  // into a run makes it an ordinary batch. Memory: the run being written
  // and the one filling. 2 to 8 MiB catch up about equally fast
  // (docs/performance.md). Default: 4 MiB. REQUIRES: > 0.
  size_t sync_run_bytes = size_t{4} << 20;

  // A catch-up of at least this many messages (the stream's, in scope or
  // not) that is at least half the fold's entries, without an apply hook
  // (which reads each key anyway), skips the per-key reads the fold's counts need
  // (FoldCommit::uncounted) and recounts the fold once, when caught up:
  // reading every entry once in order costs less than reading each
  // replaced one. Until then FoldMeta::counts_stale is set. 0: never.
  // Default: 100,000.
  uint64_t recount_backlog = 100000;

  // Commit a non-full batch once its oldest change has waited this long.
  // Default: 50 ms.
  std::chrono::milliseconds linger{50};

  // Write each batch on a thread of its own while the next batch is
  // received and folded (one batch in flight; the cursor still moves only
  // after its commit succeeded). Under a backlog the batch being filled
  // may grow to 8 x batch_size changes (but not past batch_bytes) while one
  // is written. false: commit on the
  // calling thread, with batch boundaries that depend only on the input
  // (deterministic simulation). Default: true.
  bool commit_in_background = true;

  // Called for each change, in stream order, before the batch holding it
  // commits. A non-OK return stops the watch with that status after
  // committing the changes before it. Default: none.
  std::function<Status(const Change&)> apply;

  // Called after each successful commit with the new cursor. Default: none.
  std::function<void(uint64_t cursor)> on_applied;

  // Requesting stop ends the watch after flushing what was received; Watch
  // then returns OK. Default: never requested.
  std::stop_token stop;

  // Return OK once the committed cursor reaches the stream's last sequence as
  // read when the watch started. Default: false (run until stopped).
  bool until_caught_up = false;

  // Consecutive failed commits after which the watch stops with the last
  // store error. A failed batch is kept and retried with the next commit.
  // Default: 5. REQUIRES: > 0.
  int max_commit_failures = 5;

  // Backoff for re-creating a broken delivery or reaching an unavailable
  // server: starts at `reconnect_backoff_min`, doubles up to `_max`.
  // Default: 1 s and 30 s. REQUIRES: 0 < min <= max.
  std::chrono::milliseconds reconnect_backoff_min{1000};
  std::chrono::milliseconds reconnect_backoff_max{30000};

  // After at most this long without a message, prove progress with the
  // server and advance the cursor past stretches with nothing in scope;
  // sooner when the stream's head approaches the frontier. Default: 1 s.
  std::chrono::milliseconds idle_probe{1000};

  // A caught-up watch of the whole bucket that nobody writes to reads the
  // stream at least this often instead of every idle_probe: its delivery
  // brings every write, and the server's idle heartbeat (every 5 s) shows
  // the consumer still at the head last read, so nothing was written or
  // evicted in between; each such heartbeat counts as a stream read for
  // readiness (WatchStats::last_read_age_seconds then reaches about 5 s).
  // Not on a scoped watch (its heartbeat does not show other prefixes'
  // writes), not with per-message deadlines queued, and on a bucket with
  // limit markers at least every eighth of the marker window. The reads
  // skipped are what an idle mirror costs the server (a fleet of idle
  // nodes). 0: read every idle_probe. Default: 10 s.
  std::chrono::milliseconds quiet_read_every{10000};

  // What to do when retention evicted history the fold needs (see repair.h
  // and the README's "Repair policies"). Default: kAuto, which is never lossy.
  ExpiryRepair repair = ExpiryRepair::kAuto;

  // Where Restore finds artifacts. Not owned; must outlive the watch.
  // Default: none (a repair that needs Restore is refused).
  ArtifactSource* artifacts = nullptr;

  // How long a Restore that finds no usable artifact (none yet, stale,
  // outside retention) keeps retrying, with backoff, before the watch ends
  // with CursorExpired. Default: 10 min.
  std::chrono::milliseconds repair_timeout{600000};

  // Run a key-set diff this often, removing keys whose delete markers were
  // purged while this node was behind (only where the key listing is the
  // truth; skipped with a log line elsewhere). Default: 0 (never).
  std::chrono::milliseconds reconcile_every{0};

  // While the frontier trails what has arrived, check the stream's floor at
  // most this often. Default: 50 ms.
  std::chrono::milliseconds floor_check{50};

  // A key listing holds this many keys in memory, then spills to a
  // temporary RocksDB under `spill_dir` ("" = the system's temporary
  // directory). Default: 100000.
  size_t listing_memory_keys = 100000;
  std::string spill_dir;

  // Receives one line for each notable event (a delivery reset, a retried
  // commit, every repair decision with its reason and numbers), with its
  // level. A hook taking std::string_view works too (see log_line.h).
  // Default: none.
  std::function<void(const LogLine&)> log;

  // Counters and gauges of this watch (see watch_metrics.h), updated as it
  // runs and readable from any thread. Not owned; must outlive the watch.
  // Default: none.
  WatchMetrics* metrics = nullptr;

  // Time source. Default: the real clock. Not owned.
  Clock* clock = nullptr;
};

// Runs the watch described above. Returns OK when stopped or caught up;
// CursorExpired when a needed repair was refused or found no usable
// artifact in time (the message names the choices); FailedPrecondition when
// the fold belongs to another bucket or scope; the store's error after max_commit_failures; the
// apply hook's error. `source` and `fold` are not owned and must outlive the call.
Status Watch(BucketSource& source, Fold& fold, const WatchOptions& options);

}  // namespace kvfold

#endif  // KVFOLD_WATCHER_H_
