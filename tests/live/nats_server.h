// A real nats-server with JetStream, on a free loopback port, storing in a
// temporary directory; stopped and removed when the object dies. Found on
// PATH or through $KVFOLD_NATS_SERVER.

#ifndef KVFOLD_TESTS_LIVE_NATS_SERVER_H_
#define KVFOLD_TESTS_LIVE_NATS_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "test_dir.h"

namespace kvfold::live {

class NatsServer {
 public:
  NatsServer();  // starts it; aborts the test process if it cannot
  // With `config` (nats-server configuration text: tls, authorization ...)
  // besides the port, JetStream and store given on the command line.
  explicit NatsServer(const std::string& config);
  ~NatsServer();
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  // SIGKILL: no shutdown, no flush beyond what the OS already has.
  void Kill();
  // Starts again on the same port and store.
  void Start();
  // SIGSTOP: the process keeps its sockets but answers nothing, as a
  // server behind a partition that drops packets; Thaw (SIGCONT) resumes it.
  void Freeze();
  void Thaw();

  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  // The last `lines` lines of the server's log, for a failure message.
  std::string LogTail(size_t lines) const;
  int port() const { return port_; }

 private:
  void WaitReady();

  TestDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::string config_file_;  // "" for none
};

// Three nats-servers forming a JetStream cluster over routes on loopback,
// each with its own store in a temporary directory; stopped and removed
// when the object dies. Node i serves clients on url(i) and monitoring
// (/connz, /jsz) on http://127.0.0.1:monitor_port(i).
class NatsCluster {
 public:
  static constexpr int kNodes = 3;
  NatsCluster();  // starts every node; aborts the test process if it cannot
  ~NatsCluster();
  NatsCluster(const NatsCluster&) = delete;
  NatsCluster& operator=(const NatsCluster&) = delete;

  // SIGKILL node i: no shutdown, no leadership hand-off.
  void Kill(int i);
  // Starts node i again on the same ports and store.
  void Start(int i);
  bool running(int i) const { return pids_[i] > 0; }
  // Waits until every node is running, routed to the other two (/routez),
  // healthy (/healthz: JetStream with a meta leader it is current with)
  // and counts all three in the meta group (/jsz); false when `patience`
  // passes first.
  bool WaitJetStreamReady(std::chrono::seconds patience) const;
  // How many route connections node i has (/routez num_routes: 2.10 pools
  // several per peer); -1 when it does not answer.
  int Routes(int i) const;
  // The server names node i is routed to; empty when it does not answer.
  std::set<std::string> Peers(int i) const;
  // One line per node: routes, peers, meta leader and group size, /healthz.
  std::string Summary() const;
  // Summary, then the last `lines` lines of each node's log, for a failure
  // message.
  std::string LogTails(size_t lines) const;

  std::string url(int i) const { return "nats://127.0.0.1:" + std::to_string(client_ports_[i]); }
  // Every node's URL, comma separated (what a client is given).
  std::string urls() const;
  int monitor_port(int i) const { return monitor_ports_[i]; }
  // The server name of node i as the cluster reports it ("n0".."n2").
  static std::string name(int i) { return "n" + std::to_string(i); }

 private:
  bool Ready(int i) const;
  void Spawn(int i);
  void WaitStarted(int i);
  // The nodes the meta leader does not count in its group (/jsz); none
  // when no leader answers.
  std::vector<int> LeftOutOfTheMetaGroup() const;
  // The meta group's size as node i reports it (/jsz); 0 when unknown.
  int MetaGroupSize(int i) const;

  TestDir dir_;
  int client_ports_[kNodes] = {};
  int cluster_ports_[kNodes] = {};
  int monitor_ports_[kNodes] = {};
  pid_t pids_[kNodes] = {-1, -1, -1};
};

// A loopback port nothing listens on right now, below the range the kernel
// hands out as source ports.
int FreePort();
// `n` distinct such ports.
std::vector<int> FreePorts(int n);
// GET http://127.0.0.1:port/path (a server's monitoring endpoint): the
// body, "" on failure.
std::string MonitorGet(int port, const std::string& path);
// GET `path` on 127.0.0.1:`port`: the status code (0 when no answer) and the body.
std::pair<int, std::string> HttpGet(int port, const std::string& path);

}  // namespace kvfold::live

#endif  // KVFOLD_TESTS_LIVE_NATS_SERVER_H_
