// A catch-up a live test can wait for: one that misses a message would
// wait for it for ever, so a watchdog stops it after a bound (far beyond
// any test's catch-up, under a sanitizer too) and fails the test, instead
// of the whole binary hanging until ctest's timeout.

#ifndef KVFOLD_TESTS_LIVE_BOUNDED_WATCH_H_
#define KVFOLD_TESTS_LIVE_BOUNDED_WATCH_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <stop_token>
#include <thread>

#include "kvfold/watcher.h"

namespace kvfold::live {

// Watch(source, fold, o) with o.until_caught_up set; a stop the caller
// requests through o.stop still stops it.
inline Status WatchUntilCaughtUp(BucketSource& source, Fold& fold, WatchOptions o,
                                 std::chrono::seconds bound = std::chrono::minutes(2)) {
  std::stop_source stop;
  std::optional<std::stop_callback<std::function<void()>>> forward;
  if (o.stop.stop_possible()) forward.emplace(o.stop, [&stop] { stop.request_stop(); });
  o.stop = stop.get_token();
  o.until_caught_up = true;
  std::atomic<bool> fired{false};
  std::jthread watchdog([&](std::stop_token done) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (!done.stop_requested() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!done.stop_requested()) {
      fired = true;
      stop.request_stop();
    }
  });
  Status s = Watch(source, fold, o);
  watchdog.request_stop();
  watchdog.join();
  if (fired) ADD_FAILURE() << "the catch-up did not end within " << bound.count() << " s";
  return s;
}

}  // namespace kvfold::live

#endif  // KVFOLD_TESTS_LIVE_BOUNDED_WATCH_H_
