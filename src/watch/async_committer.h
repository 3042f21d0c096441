// Runs Fold::Commit on a thread of its own, one batch in flight, so the
// watch loop receives and folds the next batch while the store writes (and
// fsyncs) the last. The watch loop still decides everything: what a batch
// holds, when it is handed over, and what a failure means; the committer
// only moves the write off its thread.

#ifndef KVFOLD_WATCH_ASYNC_COMMITTER_H_
#define KVFOLD_WATCH_ASYNC_COMMITTER_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "kvfold/fold.h"

namespace kvfold {

class AsyncCommitter {
 public:
  // With `background` false, Start commits on the calling thread.
  AsyncCommitter(Fold& fold, bool background) : fold_(fold), background_(background) {}
  AsyncCommitter(const AsyncCommitter&) = delete;
  AsyncCommitter& operator=(const AsyncCommitter&) = delete;
  ~AsyncCommitter();  // waits for a commit in flight

  // Starts committing `batch`. Returns the batch before it (written, or
  // given back by Take), for its memory to be used again.
  // REQUIRES: !in_flight().
  FoldCommit Start(FoldCommit batch);
  // A batch was started and not yet collected by Wait().
  bool in_flight() const { return in_flight_; }
  // True once the batch in flight has been written (or failed).
  bool finished();
  // Waits for the batch in flight and returns its commit's status. The
  // batch stays readable through batch() until the next Start or Take.
  Status Wait();
  // The batch in flight (or just waited for). Readable from the watch
  // loop's thread while the store commits it: both only read it.
  const FoldCommit& batch() const { return batch_; }
  // How long the store took to commit the batch just waited for.
  std::chrono::steady_clock::duration took() const { return took_; }
  // Gives the last batch back, e.g. to retry a failed commit.
  FoldCommit Take() { return std::move(batch_); }

 private:
  void Loop();
  // Commits batch_, timing it.
  Status CommitTimed(std::chrono::steady_clock::duration* took);

  Fold& fold_;
  const bool background_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;  // started by the first Start
  FoldCommit batch_;
  Status result_;
  std::chrono::steady_clock::duration took_{};  // guarded by mu_ until Wait returns
  bool queued_ = false;                         // guarded by mu_
  bool done_ = false;                           // guarded by mu_
  bool stop_ = false;                           // guarded by mu_
  bool in_flight_ = false;                      // the watch loop's own view
};

}  // namespace kvfold

#endif  // KVFOLD_WATCH_ASYNC_COMMITTER_H_
