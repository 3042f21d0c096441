#include "kvfold/clock.h"

#include <condition_variable>
#include <mutex>

namespace kvfold {
namespace {

class SteadyClock final : public Clock {
 public:
  TimePoint Now() override { return std::chrono::steady_clock::now(); }

  void SleepFor(std::chrono::milliseconds d, const std::stop_token& stop) override {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait_for(lock, stop, d, [] { return false; });
  }
};

}  // namespace

Clock* RealClock() {
  static SteadyClock* clock = new SteadyClock();
  return clock;
}

}  // namespace kvfold
