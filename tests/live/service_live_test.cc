// kvfold mirror as systemd runs it (deploy/systemd/kvfold-mirror@.service):
// flags from the unit's environment file, and the sd_notify protocol on a
// notify socket of the test's own (READY=1 only once caught up, WATCHDOG=1
// while the watch turns, STOPPING=1 on SIGTERM).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "live/cli_process.h"
#include "live/kv_client.h"
#include "live/nats_server.h"

namespace kvfold::live {
namespace {

using nlohmann::json;

// A unix datagram socket standing in for systemd's NOTIFY_SOCKET.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
        << std::strerror(errno);
  }
  ~NotifySocket() { close(fd_); }

  // The next datagram, or "" after `timeout`.
  std::string Receive(std::chrono::milliseconds timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

bool Has(const std::string& datagram, const std::string& line) {
  return ("\n" + datagram + "\n").find("\n" + line + "\n") != std::string::npos;
}

class ServiceLiveTest : public ::testing::Test {
 protected:
  ServiceLiveTest() : kv_(server_.url()) {}

  std::optional<uint64_t> Cursor(const std::string& fold) {
    CliExit e = RunCli({"status", "--fold", fold, "--json"}, dir_.path());
    if (e.code != 0) return std::nullopt;
    const json c = json::parse(e.out)["cursor"];
    if (!c.is_number_unsigned()) return std::nullopt;
    return c.get<uint64_t>();
  }

  NatsServer server_;
  KvClient kv_;
  TestDir dir_;
};

// The unit's environment file sets the flags (KVFOLD_BUCKET, KVFOLD_SCOPE,
// ...); systemd hears READY=1 only once the fold holds the stream's head,
// WATCHDOG=1 while the watch turns, and STOPPING=1 when SIGTERM arrives.
TEST_F(ServiceLiveTest, SystemdHearsReadinessOnlyOnceCaughtUpThenTheStop) {
  kv_.CreateBucket("svc");
  uint64_t last = 0;
  for (int i = 0; i < 3000; ++i) last = kv_.Put("svc", "a." + std::to_string(i), "v");
  for (int i = 0; i < 10; ++i) last = kv_.Put("svc", "b." + std::to_string(i), "v");
  NotifySocket notify(dir_.path() + "/notify");
  const std::string fold = dir_.path() + "/fold";
  const std::string err = dir_.path() + "/mirror.err";
  pid_t mirror = SpawnCli(
      {"mirror", "--fold", fold}, dir_.path() + "/mirror.out", err,
      {"KVFOLD_SERVER=" + server_.url(), "KVFOLD_BUCKET=svc", "KVFOLD_SCOPE=a.,b.",
       "NOTIFY_SOCKET=" + notify.path(), "WATCHDOG_USEC=400000", "KVFOLD_READY_MAX_LAG=30s"});
  int ready = 0, watchdog_after_ready = 0, extended = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (watchdog_after_ready < 3 && std::chrono::steady_clock::now() < deadline) {
    const std::string d = notify.Receive(std::chrono::milliseconds(500));
    if (d.empty()) continue;
    EXPECT_NE(d.find("STATUS="), std::string::npos) << d;
    if (ready > 0 && Has(d, "WATCHDOG=1")) ++watchdog_after_ready;
    if (d.find("EXTEND_TIMEOUT_USEC=30000000") != std::string::npos) {
      EXPECT_EQ(ready, 0) << "a start that ended is not extended: " << d;
      ++extended;
    }
    if (Has(d, "READY=1")) {
      ++ready;
      // Ready means caught up: the fold already holds the head.
      EXPECT_EQ(Cursor(fold), last) << d;
      EXPECT_NE(d.find("STATUS=caught up"), std::string::npos) << d;
    }
  }
  EXPECT_EQ(ready, 1) << ReadWholeFile(err);
  EXPECT_GE(watchdog_after_ready, 3) << ReadWholeFile(err);
  kill(mirror, SIGTERM);
  bool stopping = false;
  for (int i = 0; i < 20 && !stopping; ++i) {
    stopping = Has(notify.Receive(std::chrono::milliseconds(500)), "STOPPING=1");
  }
  EXPECT_TRUE(stopping);
  EXPECT_EQ(WaitExit(mirror), 0) << ReadWholeFile(err);
  // The scope came from KVFOLD_SCOPE: both prefixes, comma separated.
  CliExit dump = RunCli({"scan", "--fold", fold, "--prefix", "b."}, dir_.path());
  EXPECT_EQ(std::count(dump.out.begin(), dump.out.end(), '\n'), 10) << dump.out;
  (void)extended;  // how many depends on the machine's speed
}

// A bad value from the environment is refused like the flag, naming the
// variable; a flag on the command line wins over it; a notify socket
// that is not one is refused before anything is opened.
TEST_F(ServiceLiveTest, EnvironmentFlagsAreCheckedAndAFlagWins) {
  kv_.CreateBucket("envflags");
  const uint64_t last = kv_.Put("envflags", "k", "v");
  const std::string fold = dir_.path() + "/fold";
  const std::string live = "KVFOLD_SERVER=" + server_.url();
  CliExit bad = RunCli({"mirror", "--fold", fold, "--until-caught-up"}, dir_.path(),
                       {live, "KVFOLD_BUCKET=envflags", "KVFOLD_ARTIFACTS=tape:/dev/st0"});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("KVFOLD_ARTIFACTS (for --artifacts)"), std::string::npos) << bad.err;
  CliExit repair = RunCli({"mirror", "--fold", fold, "--until-caught-up"}, dir_.path(),
                          {live, "KVFOLD_BUCKET=envflags", "KVFOLD_REPAIR=sometimes"});
  EXPECT_EQ(repair.code, 2) << repair.err;
  EXPECT_NE(repair.err.find("KVFOLD_REPAIR"), std::string::npos) << repair.err;
  CliExit no_bucket = RunCli({"mirror", "--fold", fold}, dir_.path(), {live});
  EXPECT_EQ(no_bucket.code, 2) << no_bucket.err;
  EXPECT_NE(no_bucket.err.find("--bucket (or KVFOLD_BUCKET) is required"), std::string::npos)
      << no_bucket.err;
  CliExit socket = RunCli({"mirror", "--fold", fold, "--bucket", "envflags"}, dir_.path(),
                          {live, "NOTIFY_SOCKET=relative/path"});
  EXPECT_EQ(socket.code, 2) << socket.err;
  EXPECT_NE(socket.err.find("NOTIFY_SOCKET"), std::string::npos) << socket.err;
  EXPECT_FALSE(Cursor(fold).has_value());  // nothing was opened
  // The flag names the real bucket; the environment's would not exist.
  CliExit flag = RunCli({"mirror", "--fold", fold, "--bucket", "envflags", "--until-caught-up"},
                        dir_.path(), {live, "KVFOLD_BUCKET=nosuchbucket"});
  EXPECT_EQ(flag.code, 0) << flag.err;
  EXPECT_EQ(Cursor(fold), last);
}

}  // namespace
}  // namespace kvfold::live
