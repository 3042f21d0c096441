#include "cli/service_notifier.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "cli/logger.h"

namespace kvfold::cli {
namespace {

// WATCHDOG_USEC is meant for this process only when WATCHDOG_PID, if set,
// names it (a child started by the service must not ping for it).
std::optional<std::chrono::milliseconds> WatchdogFromEnvironment() {
  const char* usec = std::getenv("WATCHDOG_USEC");
  if (usec == nullptr || *usec == '\0') return std::nullopt;
  const char* pid = std::getenv("WATCHDOG_PID");
  if (pid != nullptr && *pid != '\0' && std::string(pid) != std::to_string(getpid())) {
    return std::nullopt;
  }
  uint64_t n = 0;
  const char* end = usec + std::strlen(usec);
  auto [ptr, ec] = std::from_chars(usec, end, n);
  if (ec != std::errc() || ptr != end || n == 0) return std::nullopt;
  return std::chrono::milliseconds(std::max<uint64_t>(1, n / 2000));
}

}  // namespace

StatusOr<std::unique_ptr<ServiceNotifier>> ServiceNotifier::FromEnvironment() {
  const char* socket_name = std::getenv("NOTIFY_SOCKET");
  if (socket_name == nullptr || *socket_name == '\0') return std::unique_ptr<ServiceNotifier>();
  std::string address = socket_name;
  if (address[0] == '@') {
    address[0] = '\0';
  } else if (address[0] != '/') {
    return Status::InvalidArgument("NOTIFY_SOCKET \"" + address +
                                   "\" is neither an absolute path nor an abstract name (@...)");
  }
  // A path needs room for its terminating NUL; an abstract name does not.
  if (address.size() + (address[0] == '\0' ? 0 : 1) > sizeof(sockaddr_un::sun_path)) {
    return Status::InvalidArgument(std::string("NOTIFY_SOCKET \"") + std::string(socket_name) +
                                   "\" is longer than a unix socket address");
  }
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError(std::string("notify socket: ") + std::strerror(errno));
  return std::unique_ptr<ServiceNotifier>(
      new ServiceNotifier(fd, std::move(address), WatchdogFromEnvironment()));
}

ServiceNotifier::~ServiceNotifier() { close(fd_); }

Status ServiceNotifier::Send(std::string_view state) {
  sockaddr_un to{};
  to.sun_family = AF_UNIX;
  std::memcpy(to.sun_path, address_.data(), address_.size());
  const socklen_t length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size());
  if (sendto(fd_, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&to),
             length) < 0) {
    return Status::IOError(std::string("notify socket: ") + std::strerror(errno));
  }
  return Status::OK();
}

void ReportServiceState(ServiceNotifier& notifier, const WatchMetrics& metrics,
                        const HealthOptions& health, std::stop_token stop) {
  using namespace std::chrono_literals;
  const std::chrono::milliseconds tick =
      std::min<std::chrono::milliseconds>(1000ms, notifier.watchdog_interval().value_or(1000ms));
  constexpr std::chrono::microseconds kExtendBy = std::chrono::seconds(30);
  bool ready_sent = false;
  bool failure_logged = false;
  auto send = [&](const std::string& state) {
    Status s = notifier.Send(state);
    if (!s.ok() && !failure_logged) {
      Log().Warn(std::string("systemd notification failed (reports go on): ").append(s.ToString()));
      failure_logged = true;
    }
  };
  std::mutex mu;
  std::condition_variable_any woken;
  while (!stop.stop_requested()) {
    const WatchStats stats = metrics.Snapshot();
    const HealthVerdict ready = JudgeReady(stats, health);
    const bool alive = JudgeAlive(stats, health).ok;
    std::string state;
    if (!ready_sent) {
      // Caught up once, not repairing: started. (Not the lag bound: under a
      // steady load above it the start would never end; /readyz keeps it.)
      if (stats.caught_up && !stats.repairing && alive) {
        state += "READY=1\n";
        ready_sent = true;
      } else if (alive) {
        // Still catching up or repairing, and making progress: the start
        // may take longer than TimeoutStartSec. A stuck one stops asking.
        state += "EXTEND_TIMEOUT_USEC=" + std::to_string(kExtendBy.count()) + "\n";
      }
    }
    state.append("STATUS=").append(ready.ok ? "" : "not ready: ").append(ready.reason);
    if (notifier.watchdog_interval() && alive) state += "\nWATCHDOG=1";
    send(state);
    std::unique_lock lock(mu);
    woken.wait_for(lock, stop, tick, [] { return false; });
  }
  send("STOPPING=1\nSTATUS=stopping: flushing the fold");
}

}  // namespace kvfold::cli
