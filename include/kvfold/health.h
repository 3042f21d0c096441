// Liveness and readiness of a watch, judged from its metrics: what a
// Kubernetes or systemd probe asks. `kvfold mirror --metrics-addr` serves
// them as /healthz and /readyz (200 when true, 503 with the reason when
// not); a service embedding the library calls them on its own
// WatchMetrics:
//
//   kvfold::HealthVerdict ready = kvfold::JudgeReady(metrics.Snapshot(), {});
//   if (!ready.ok) respond(503, ready.reason);

#ifndef KVFOLD_HEALTH_H_
#define KVFOLD_HEALTH_H_

#include <chrono>
#include <string>

#include "kvfold/watch_metrics.h"

namespace kvfold {

struct HealthOptions {
  // Alive while the watch loop turned (WatchStats::last_activity_age_seconds:
  // read the stream, committed, waited to retry a lost server) within this
  // long, or repairs (a repair's listing may read for minutes without
  // either; restarting the process would only start it over). An idle
  // watch reads the stream about every second, and retries a lost server
  // at least every 30 s; a longer silence means it is stuck (a store that
  // does not return, a blocked apply hook). Keep it well above
  // WatchOptions::idle_probe and reconnect_backoff_max. Default: 60 s.
  std::chrono::milliseconds max_silence{60000};
  // Ready while the oldest change not yet under the cursor is at most this
  // old (WatchStats::lag_seconds) and a stream read succeeded within this
  // long (WatchStats::last_read_age_seconds): a watch cut off from the
  // server stops being ready this long after its last read.
  // REQUIRES: well above WatchOptions::idle_probe (how often a quiet,
  // healthy watch reads) and, with quiet_read_every on, the server's 5 s
  // heartbeat, or readiness flaps between reads; the CLI, with its 1 s
  // probe, refuses a --ready-max-lag below 2 s and below 7 s reads every
  // second instead of counting heartbeats. Default: 10 s.
  std::chrono::milliseconds max_lag{10000};
};

struct HealthVerdict {
  bool ok = false;
  std::string reason;  // why not, or what holds ("caught up ...")
};

// The watch loop is turning, or repairing.
HealthVerdict JudgeAlive(const WatchStats& stats, const HealthOptions& options);

// Alive, not repairing, caught up with the stream at least once since the
// metrics began (or the last repair), within max_lag of its head since,
// and a stream read succeeded within max_lag: the fold can be served.
HealthVerdict JudgeReady(const WatchStats& stats, const HealthOptions& options);

}  // namespace kvfold

#endif  // KVFOLD_HEALTH_H_
