// Real time, except that sleeping (backoff, commit retries) passes at once:
// simulations with thousands of retries stay fast and deterministic in
// order.

#ifndef KVFOLD_TESTS_SIM_INSTANT_SLEEP_CLOCK_H_
#define KVFOLD_TESTS_SIM_INSTANT_SLEEP_CLOCK_H_

#include <chrono>
#include <mutex>

#include "kvfold/clock.h"

namespace kvfold::sim {

class InstantSleepClock final : public Clock {
 public:
  TimePoint Now() override {
    std::lock_guard lock(mu_);
    return std::chrono::steady_clock::now() + skipped_;
  }
  void SleepFor(std::chrono::milliseconds d, const std::stop_token&) override {
    std::lock_guard lock(mu_);
    skipped_ += d;
  }

 private:
  std::mutex mu_;
  std::chrono::steady_clock::duration skipped_{0};
};

}  // namespace kvfold::sim

#endif  // KVFOLD_TESTS_SIM_INSTANT_SLEEP_CLOCK_H_
