#include "live/nats_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace kvfold::live {

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

NatsServer::NatsServer() : port_(FreePort()) { Start(); }

NatsServer::~NatsServer() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
}

void NatsServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void NatsServer::Start() {
  const char* env = std::getenv("KVFOLD_NATS_SERVER");
  const std::string bin = env != nullptr ? env : "nats-server";
  const std::string port = std::to_string(port_);
  const std::string store = dir_.path() + "/store";
  const std::string log = dir_.path() + "/server.log";
  // Only async-signal-safe calls in the child: the test process has threads.
  static const char kNoServer[] =
      "cannot start nats-server: install the nats-server package "
      "(scripts/install-deps.sh) or set KVFOLD_NATS_SERVER\n";
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // A test process that dies (a crash, a timeout) takes its server along.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    execlp(bin.c_str(), bin.c_str(), "-js", "-a", "127.0.0.1", "-p", port.c_str(), "-sd",
           store.c_str(), "-l", log.c_str(), static_cast<char*>(nullptr));
    (void)!write(2, kNoServer, sizeof(kNoServer) - 1);
    _exit(127);
  }
  WaitReady();
}

void NatsServer::WaitReady() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      std::fprintf(stderr, "nats-server exited during start-up (status %d)\n", status);
      std::abort();
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    const bool up = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (up) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "nats-server did not listen on port %d within 15 s\n", port_);
  std::abort();
}

}  // namespace kvfold::live
