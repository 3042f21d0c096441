// A real nats-server with JetStream, on a free loopback port, storing in a
// temporary directory; stopped and removed when the object dies. Found on
// PATH or through $KVFOLD_NATS_SERVER.

#ifndef KVFOLD_TESTS_LIVE_NATS_SERVER_H_
#define KVFOLD_TESTS_LIVE_NATS_SERVER_H_

#include <sys/types.h>

#include <string>

#include "test_dir.h"

namespace kvfold::live {

class NatsServer {
 public:
  NatsServer();  // starts it; aborts the test process if it cannot
  ~NatsServer();
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  // SIGKILL: no shutdown, no flush beyond what the OS already has.
  void Kill();
  // Starts again on the same port and store.
  void Start();

  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  void WaitReady();

  TestDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// A loopback port nothing listens on right now.
int FreePort();

}  // namespace kvfold::live

#endif  // KVFOLD_TESTS_LIVE_NATS_SERVER_H_
