#include "nats/stranded_consumers.h"

#include <utility>

namespace kvfold::nats {

void StrandedConsumers::Add(std::string stream, std::string consumer) {
  std::lock_guard lock(mu_);
  if (held_.size() >= kMaxHeld) held_.pop_front();
  held_.push_back(Entry{std::move(stream), std::move(consumer), 0});
}

size_t StrandedConsumers::DeleteHeld(Clock::time_point now, const DeleteFn& del) {
  size_t deleted = 0;
  std::unique_lock lock(mu_);
  if (deleting_ || held_.empty() || now < not_before_) return 0;
  deleting_ = true;
  // Taken one at a time and the lock let go for the request: an Add from
  // another thread must not wait out a request timeout.
  while (!held_.empty()) {
    Entry e = std::move(held_.front());
    held_.pop_front();
    lock.unlock();
    const Status s = del(e.stream, e.consumer);
    lock.lock();
    if (s.ok()) ++deleted;
    if (!s.IsUnavailable()) continue;
    if (++e.tries < kMaxTries) held_.push_front(std::move(e));
    not_before_ = now + kRetryAfter;
    break;
  }
  deleting_ = false;
  return deleted;
}

void StrandedConsumers::Rearm() {
  std::lock_guard lock(mu_);
  not_before_ = Clock::time_point{};
}

size_t StrandedConsumers::held() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

}  // namespace kvfold::nats
