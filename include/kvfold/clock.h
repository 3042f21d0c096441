// Time as the watch loop sees it, so simulation can replace it.

#ifndef KVFOLD_CLOCK_H_
#define KVFOLD_CLOCK_H_

#include <chrono>
#include <stop_token>

namespace kvfold {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual TimePoint Now() = 0;
  // Sleeps for `d` or until `stop` is requested, whichever comes first.
  virtual void SleepFor(std::chrono::milliseconds d, const std::stop_token& stop) = 0;
};

// The process-wide real clock. Thread-safe; never destroyed.
Clock* RealClock();

}  // namespace kvfold

#endif  // KVFOLD_CLOCK_H_
