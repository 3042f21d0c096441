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
// NATS clamps a too-low start sequence silently; this check is what turns that
// into Status::CursorExpired. Repair policies are not applied yet: an expired
// cursor ends the watch with the fold untouched.
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
#include "kvfold/clock.h"
#include "kvfold/fold.h"
#include "kvfold/scope.h"
#include "kvfold/status.h"

namespace kvfold {

// One change to the fold, as the apply hook sees it. The views are valid
// only during the hook call.
struct Change {
  std::string_view key;
  Op op = Op::kPut;
  std::string_view value;      // empty for delete and purge
  uint64_t revision = 0;       // > previous_revision, always
  uint64_t previous_revision = 0;  // the key's last revision in the fold, 0 if none
};

struct WatchOptions {
  // Keys to fold. Default: the whole bucket. A fold records its scope on the
  // first watch; a later watch with another scope is refused.
  Scope scope;

  // Commit when this many changes are pending. Default: 1000. REQUIRES: > 0.
  size_t batch_size = 1000;

  // Commit a non-full batch once its oldest change has waited this long.
  // Default: 50 ms.
  std::chrono::milliseconds linger{50};

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
  // Default: 1 s and 30 s.
  std::chrono::milliseconds reconnect_backoff_min{1000};
  std::chrono::milliseconds reconnect_backoff_max{30000};

  // After this long without a message, prove progress with the server and
  // advance the cursor past stretches with nothing in scope. Default: 1 s.
  std::chrono::milliseconds idle_probe{1000};

  // Receives one line for each notable event (a delivery reset, a retried
  // commit). Default: none.
  std::function<void(std::string_view)> log;

  // Time source. Default: the real clock. Not owned.
  Clock* clock = nullptr;
};

// Runs the watch described above. Returns OK when stopped or caught up;
// CursorExpired when retention evicted history the fold needs or the stream
// was recreated; FailedPrecondition when the fold belongs to another bucket
// or scope; the store's error after max_commit_failures; the apply hook's
// error. `source` and `fold` are not owned and must outlive the call.
Status Watch(BucketSource& source, Fold& fold, const WatchOptions& options);

}  // namespace kvfold

#endif  // KVFOLD_WATCHER_H_
