// Tells systemd how a `Type=notify` service is doing: the datagram
// protocol of sd_notify(3), written directly (one sendto on a unix socket,
// no libsystemd). Outside systemd (no NOTIFY_SOCKET) there is nothing to
// tell and FromEnvironment returns null.

#ifndef KVFOLD_CLI_SERVICE_NOTIFIER_H_
#define KVFOLD_CLI_SERVICE_NOTIFIER_H_

#include <chrono>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "kvfold/health.h"
#include "kvfold/status.h"
#include "kvfold/watch_metrics.h"

namespace kvfold::cli {

class ServiceNotifier {
 public:
  // Null when NOTIFY_SOCKET is unset or empty; InvalidArgument when it is
  // neither an absolute path nor an abstract name ("@name").
  static StatusOr<std::unique_ptr<ServiceNotifier>> FromEnvironment();
  ~ServiceNotifier();

  // Sends newline-separated assignments ("READY=1\nSTATUS=...").
  Status Send(std::string_view state);

  // How often systemd wants WATCHDOG=1 (half of WATCHDOG_USEC), when the
  // unit sets WatchdogSec= for this process.
  std::optional<std::chrono::milliseconds> watchdog_interval() const { return watchdog_; }

 private:
  ServiceNotifier(int fd, std::string address, std::optional<std::chrono::milliseconds> watchdog)
      : fd_(fd), address_(std::move(address)), watchdog_(watchdog) {}

  int fd_;
  std::string address_;  // as sockaddr_un.sun_path: a leading '\0' for abstract names
  std::optional<std::chrono::milliseconds> watchdog_;
};

// Until `stop`, about every second (or twice per watchdog interval):
// READY=1 the first time the watch has caught up with the stream and no
// repair runs (systemd has no way back to "not ready": /readyz, with its
// lag bound, is the probe that can), and until then EXTEND_TIMEOUT_USEC
// while JudgeAlive holds (a start that makes progress outlasts
// TimeoutStartSec, a stuck one fails it); STATUS= with the readiness
// verdict; WATCHDOG=1 while JudgeAlive holds (a stuck watch stops pinging
// and systemd restarts it); STOPPING=1 once `stop` is requested. A failed
// send is logged once and the reports go on.
void ReportServiceState(ServiceNotifier& notifier, const WatchMetrics& metrics,
                        const HealthOptions& health, std::stop_token stop);

}  // namespace kvfold::cli

#endif  // KVFOLD_CLI_SERVICE_NOTIFIER_H_
