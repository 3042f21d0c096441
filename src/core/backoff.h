// The wait between attempts that keep failing: `min` at first, doubling up
// to `max`. The watch loop waits so between sessions, a restore between
// looks for a usable artifact.

#ifndef KVFOLD_CORE_BACKOFF_H_
#define KVFOLD_CORE_BACKOFF_H_

#include <algorithm>
#include <chrono>

namespace kvfold::core {

class Backoff {
 public:
  using Duration = std::chrono::milliseconds;
  Backoff(Duration min, Duration max) : min_(min), max_(std::max(min, max)), next_(min) {}

  // The wait before the next attempt, at most `cap`; the one after doubles it.
  Duration Next(Duration cap = Duration::max()) {
    const Duration wait = std::min(next_, cap);
    next_ = std::min(wait * 2, max_);
    return wait;
  }
  // Progress was made: the next wait is `min` again.
  void Reset() { next_ = min_; }

 private:
  const Duration min_;
  const Duration max_;
  Duration next_;
};

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_BACKOFF_H_
