// A watch as an object a service holds: Watch() on a thread of its own,
// with waits a request handler can use.
//
//   auto mirror = kvfold::Mirror::Start(*bucket, *fold, options);
//   uint64_t rev = /* the revision a KV put returned */;
//   kvfold::Status s = (*mirror)->WaitForRevision(rev, std::chrono::seconds(5));
//   if (s.ok()) { /* the fold holds that write (or a later one) */ }
//
// WaitReady is the readiness a probe asks (JudgeReady); WaitForRevision is
// read-your-writes: it returns once the committed cursor reaches a revision
// a writer got back from NATS. Both return at once with the watch's status
// when the watch has ended, so no waiter outlives a dead mirror.
//
// What the handle does not do, on purpose: it does not open the bucket or
// the fold (OpenNatsBucket and OpenRocksFold do; a service opens them
// once, and retries OpenNatsBucket as its own start-up policy says), and it
// does not restart a watch that ended (a non-OK status needs a decision:
// CursorExpired wants an artifact or a person, a store error a disk).
//
// Thread safety: every method may be called from any thread, concurrently,
// except that the Mirror must not be destroyed while another thread is in
// one of its methods.

#ifndef KVFOLD_MIRROR_H_
#define KVFOLD_MIRROR_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

#include "kvfold/bucket.h"
#include "kvfold/fold.h"
#include "kvfold/health.h"
#include "kvfold/status.h"
#include "kvfold/watch_metrics.h"
#include "kvfold/watcher.h"

namespace kvfold {

struct MirrorOptions {
  // The watch's options. `stop` may be set: it stops the mirror too.
  // `metrics`, when set, is used (and must outlive the Mirror); otherwise
  // the Mirror keeps its own (metrics()). `on_applied` is still called.
  // `until_caught_up` must be false: a mirror follows until stopped.
  WatchOptions watch;
  // What WaitReady counts as ready. Default: JudgeReady's defaults.
  HealthOptions health;
};

class Mirror {
 public:
  // Starts Watch(source, fold, options.watch) on a thread of its own.
  // `source` and `fold` are not owned and must outlive the Mirror.
  // InvalidArgument for options a mirror cannot run with; the fold's
  // error when its metadata cannot be read.
  static StatusOr<std::unique_ptr<Mirror>> Start(BucketSource& source, Fold& fold,
                                                 MirrorOptions options);
  // Stops the watch and waits for it (Stop()).
  ~Mirror();
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;

  // Asks the watch to stop, waits until it flushed what it received and
  // ended, and returns its status (OK when it was running when asked).
  // Repeated calls return the same status.
  Status Stop();

  // The watch's status once it has ended; nullopt while it runs.
  std::optional<Status> Result() const;

  // The cursor committed so far (the fold's at start, then each commit's);
  // nullopt before anything was committed.
  std::optional<uint64_t> Cursor() const;

  // Returns OK once the committed cursor is at or past `revision` (a
  // sequence of this bucket's stream, as a KV put returns it): a snapshot
  // taken after that holds that write or a later one of its key. Returns
  // early: the watch's status (Cancelled when it was stopped) once it has
  // ended; InvalidArgument when a stream read made after this call began
  // shows the stream's last sequence below `revision` (it was never
  // written to this bucket, and would never come); DeadlineExceeded after
  // `timeout`. Waiters wake on each commit, not by polling the fold.
  Status WaitForRevision(uint64_t revision, std::chrono::milliseconds timeout);

  // Returns OK once JudgeReady(metrics, options.health) holds: alive, not
  // repairing, caught up, a fresh read. Early: the watch's status once it
  // has ended; DeadlineExceeded, with the last verdict's reason, after
  // `timeout`. Readiness changes with time as well as commits, so it is
  // judged again at each commit and at least every 100 ms.
  Status WaitReady(std::chrono::milliseconds timeout);

  // A snapshot of the fold; its meta().cursor is the position it reflects.
  StatusOr<std::unique_ptr<FoldSnapshot>> Snapshot() { return fold_.Snapshot(); }

  // The watch's metrics (the caller's, when MirrorOptions set them).
  WatchMetrics& metrics() { return *metrics_; }

 private:
  Mirror(Fold& fold, MirrorOptions options, std::optional<uint64_t> cursor);
  // Ends a wait: the watch's status once ended (Cancelled when stopped).
  Status Ended(const std::string& waiting_for) const;  // REQUIRES: mu_ held

  Fold& fold_;
  const MirrorOptions options_;
  WatchMetrics own_metrics_;
  WatchMetrics* metrics_;
  std::stop_source stop_;
  std::optional<std::stop_callback<std::function<void()>>> user_stop_;

  mutable std::mutex mu_;
  std::condition_variable changed_;  // a commit, or the watch ended
  std::optional<uint64_t> cursor_;
  std::optional<Status> result_;
  bool stop_requested_ = false;

  std::mutex join_mu_;  // one Stop() joins
  std::thread thread_;
};

}  // namespace kvfold

#endif  // KVFOLD_MIRROR_H_
