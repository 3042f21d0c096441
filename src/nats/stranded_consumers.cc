#include "nats/stranded_consumers.h"

#include <algorithm>
#include <utility>

namespace kvfold::nats {

void StrandedConsumers::Add(std::string stream, std::string consumer) {
  std::lock_guard lock(mu_);
  if (held_.size() >= kMaxHeld) held_.pop_front();
  held_.push_back(Entry{std::move(stream), std::move(consumer)});
}

size_t StrandedConsumers::DeleteHeld(Clock::time_point now, const DeleteFn& del) {
  if (deleting_.exchange(true)) return 0;
  // Cleared on every way out, a throwing `del` included.
  struct RoundDone {
    std::atomic<bool>& flag;
    ~RoundDone() { flag = false; }
  } done{deleting_};
  size_t deleted = 0;
  std::unique_lock lock(mu_);
  if (now < not_before_) return 0;
  // Taken one at a time and the lock let go for the request: an Add from
  // another thread must not wait out a request timeout.
  while (!held_.empty()) {
    Entry e = std::move(held_.front());
    held_.pop_front();
    lock.unlock();
    const Status s = del(e.stream, e.consumer);
    lock.lock();
    if (s.ok()) {
      ++deleted;
      wait_ = kRetryAfter;
    }
    if (!s.IsUnavailable()) continue;
    held_.push_front(std::move(e));
    not_before_ = now + wait_;
    wait_ = std::min<Clock::duration>(wait_ * 2, kMaxWait);
    break;
  }
  return deleted;
}

void StrandedConsumers::Rearm() {
  std::lock_guard lock(mu_);
  not_before_ = Clock::time_point{};
  wait_ = kRetryAfter;
}

size_t StrandedConsumers::held() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

}  // namespace kvfold::nats
