// The server's clock as the watch loop estimates it: the offsets of the
// server's time (from a stream-info reply) from the local steady clock and
// from the system clock, each taken against the local time *before* the
// request, so Now() errs late (a marker window closes early, never late).
//
// Not thread-safe: the watch loop's thread owns it.

#ifndef KVFOLD_WATCH_SERVER_CLOCK_H_
#define KVFOLD_WATCH_SERVER_CLOCK_H_

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "kvfold/clock.h"

namespace kvfold {

class ServerClock {
 public:
  // A request sent at `local_before` (the watch's clock) and
  // `system_before_ns` was answered with the server's time `server_ns`
  // (0: the reply carried none, and nothing is learnt).
  void Measure(Clock::TimePoint local_before, int64_t system_before_ns, int64_t server_ns) {
    if (server_ns <= 0) return;
    local_offset_ns_ = server_ns - LocalNs(local_before);
    system_offset_ns_ = server_ns - system_before_ns;
    known_ = true;
  }
  // The server's time at local time `local_now`; 0 before any Measure. The
  // later of two estimates: the steady clock does not count a suspended
  // host, the system clock does.
  int64_t Now(Clock::TimePoint local_now) const {
    if (!known_) return 0;
    return std::max(LocalNs(local_now) + local_offset_ns_, SystemNs() + system_offset_ns_);
  }

  static int64_t SystemNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

 private:
  static int64_t LocalNs(Clock::TimePoint t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }

  int64_t local_offset_ns_ = 0;
  int64_t system_offset_ns_ = 0;
  bool known_ = false;
};

}  // namespace kvfold

#endif  // KVFOLD_WATCH_SERVER_CLOCK_H_
