// Consumers whose delete request was lost. A delivery deletes its consumer
// over the connection that created it; when that server cannot answer (a
// cluster node cut off from its peers, the connection a move left behind)
// the request is lost. The server's inactive threshold is no sure cleanup:
// in a cluster the removal must pass the meta layer, which the cut-off node
// cannot reach either, and nats-server 2.15 was seen keeping such a
// consumer after the heal. So the consumer is kept here and deleted again
// over a connection that serves: the meta leader removes its assignment,
// and the cut-off node drops it when it rejoins.
//
// Pure bookkeeping: the caller supplies the delete and the clock.
//
// Thread safety: every method is safe to call concurrently.

#ifndef KVFOLD_NATS_STRANDED_CONSUMERS_H_
#define KVFOLD_NATS_STRANDED_CONSUMERS_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

#include "kvfold/status.h"

namespace kvfold::nats {

class StrandedConsumers {
 public:
  using Clock = std::chrono::steady_clock;
  // Returns OK when deleted; NotFound when already gone; Unavailable when
  // the server could not answer; any other error is a refusal.
  using DeleteFn = std::function<Status(const std::string& stream, const std::string& consumer)>;

  // At most this many are held; beyond it the oldest is given up to the
  // server's inactive threshold (a watch strands one per move or reset).
  static constexpr size_t kMaxHeld = 64;
  // A round with an unanswered delete is followed by the next only this
  // long after it started, doubled after each such round up to kMaxWait: a
  // lost request costs the caller a full request timeout. None is given up
  // for being unanswered: a node cut off for an hour may answer stream
  // reads but no delete, and its consumers must still go when it heals.
  static constexpr std::chrono::seconds kRetryAfter{30};
  static constexpr std::chrono::seconds kMaxWait{600};

  StrandedConsumers() = default;
  StrandedConsumers(const StrandedConsumers&) = delete;
  StrandedConsumers& operator=(const StrandedConsumers&) = delete;

  // A consumer whose delete was not answered.
  void Add(std::string stream, std::string consumer);

  // Deletes those held through `del`, oldest first, unless the wait after
  // an unanswered round has not passed. Each one deleted, already gone or
  // refused is dropped. The first unanswered stops the round (the server
  // would not answer the rest either) and stays. One round at a time: a
  // call while another runs returns at once. Returns how many were deleted.
  size_t DeleteHeld(Clock::time_point now, const DeleteFn& del);

  // Connected to another server (or closing): the next round may go at
  // once, and the wait starts over from kRetryAfter.
  void Rearm();

  size_t held() const;

 private:
  struct Entry {
    std::string stream;
    std::string consumer;
  };

  mutable std::mutex mu_;
  std::deque<Entry> held_;              // guarded by mu_
  Clock::time_point not_before_{};      // guarded by mu_
  Clock::duration wait_ = kRetryAfter;  // guarded by mu_
  std::atomic<bool> deleting_{false};   // a round runs
};

}  // namespace kvfold::nats

#endif  // KVFOLD_NATS_STRANDED_CONSUMERS_H_
