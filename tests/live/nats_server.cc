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
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace kvfold::live {

namespace {

// The lowest port the kernel hands out as a connection's source port.
int EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return in >> low && low > 11000 ? low : 32768;
}

// The ports this process may pick from: KVFOLD_TEST_PORTS="LOW-HIGH" when
// set (scripts/test.sh gives each tier it runs side by side a range of its
// own, so two processes never pick the same port), else 10000 up to the
// ephemeral range.
std::pair<int, int> PortRange() {
  const int low = 10000, high = EphemeralLow();
  const char* env = std::getenv("KVFOLD_TEST_PORTS");
  if (env == nullptr || *env == '\0') return {low, high};
  int a = 0, b = 0;
  if (std::sscanf(env, "%d-%d", &a, &b) != 2 || a < 1024 || b <= a || b > 65535) {
    std::fprintf(stderr, "KVFOLD_TEST_PORTS=%s: expected LOW-HIGH, 1024 <= LOW < HIGH <= 65535\n",
                 env);
    std::abort();
  }
  return {a, b};
}

}  // namespace

std::vector<int> FreePorts(int n) {
  // Below the ephemeral range: a port the kernel may give any outgoing
  // connection as its source port (a test's own, or a node dialing a peer
  // not yet up) can be taken between this pick and the server's bind, and
  // nodes of a cluster start one after another. Every socket stays bound
  // until all are picked, so the ports differ.
  static std::mt19937 pick(
      static_cast<uint32_t>(getpid()) ^
      static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  const auto [low, high] = PortRange();
  std::vector<int> fds;
  std::vector<int> ports;
  while (static_cast<int>(ports.size()) < n) {
    const int port = low + static_cast<int>(pick() % static_cast<uint32_t>(high - low));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);  // in use: another
      continue;
    }
    fds.push_back(fd);
    ports.push_back(port);
  }
  for (int fd : fds) close(fd);
  return ports;
}

int FreePort() { return FreePorts(1)[0]; }

std::string MonitorGet(int port, const std::string& path) { return HttpGet(port, path).second; }

std::pair<int, std::string> HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return {0, ""};
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t body = out.find("\r\n\r\n");
  if (body == std::string::npos) return {0, ""};
  // "HTTP/1.1 200 OK"
  const size_t space = out.find(' ');
  const int status = space == std::string::npos ? 0 : std::atoi(out.c_str() + space + 1);
  return {status, out.substr(body + 4)};
}

namespace {

// Starts nats-server with `args` (after the binary's name); the child dies
// with the test process.
pid_t Spawn(const std::vector<std::string>& args) {
  const char* env = std::getenv("KVFOLD_NATS_SERVER");
  // Empty counts as unset, as in scripts/nats-server.sh.
  const std::string bin = env != nullptr && *env != '\0' ? env : "nats-server";
  std::vector<char*> argv{const_cast<char*>(bin.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // Only async-signal-safe calls in the child: the test process has threads.
  static const char kNoServer[] =
      "cannot start nats-server: install the nats-server package "
      "(scripts/install-deps.sh) or set KVFOLD_NATS_SERVER\n";
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // A test process that dies (a crash, a timeout) takes its server along.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    execvp(bin.c_str(), argv.data());
    (void)!write(2, kNoServer, sizeof(kNoServer) - 1);
    _exit(127);
  }
  return pid;
}

// The last lines of a server's log, for an abort message.
void PrintLogTail(const std::string& log) {
  std::ifstream in(log);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::fprintf(stderr, "--- %s, last lines:\n", log.c_str());
  for (size_t k = all.size() > 10 ? all.size() - 10 : 0; k < all.size(); ++k) {
    std::fprintf(stderr, "%s\n", all[k].c_str());
  }
}

// Waits until `port` accepts connections; aborts, with the end of `log`,
// if `pid` exits first or 15 s pass.
void WaitListening(pid_t pid, int port, const std::string& log) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      std::fprintf(stderr, "nats-server exited during start-up (status %d)\n", status);
      PrintLogTail(log);
      std::abort();
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool up = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (up) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "nats-server did not listen on port %d within 15 s\n", port);
  PrintLogTail(log);
  std::abort();
}

}  // namespace

NatsServer::NatsServer() : port_(FreePort()) { Start(); }

NatsServer::NatsServer(const std::string& config) : port_(FreePort()) {
  config_file_ = dir_.path() + "/server.conf";
  std::ofstream(config_file_) << config;
  Start();
}

NatsServer::~NatsServer() {
  if (pid_ > 0) {
    kill(pid_, SIGCONT);  // a frozen one would never take the SIGTERM
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

void NatsServer::Freeze() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void NatsServer::Thaw() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

void NatsServer::Start() {
  std::vector<std::string> args = {"-js",
                                   "-a",
                                   "127.0.0.1",
                                   "-p",
                                   std::to_string(port_),
                                   "-sd",
                                   dir_.path() + "/store",
                                   "-l",
                                   dir_.path() + "/server.log"};
  if (!config_file_.empty()) args.insert(args.begin(), {"-c", config_file_});
  pid_ = Spawn(args);
  WaitReady();
}

void NatsServer::WaitReady() { WaitListening(pid_, port_, dir_.path() + "/server.log"); }

NatsCluster::NatsCluster() {
  const std::vector<int> ports = FreePorts(3 * kNodes);
  for (int i = 0; i < kNodes; ++i) {
    client_ports_[i] = ports[3 * i];
    cluster_ports_[i] = ports[3 * i + 1];
    monitor_ports_[i] = ports[3 * i + 2];
  }
  // Every node lists all three routes, itself included (a server skips
  // its own address), and all three start together, as nats-server's own
  // test clusters do. nats-server sizes a new JetStream meta group from
  // the configured routes (bootstrapRaftNode) and elects its first leader
  // among the peers it has heard: nodes started one at a time (a ring of
  // one route each, before) let n0 and n1 form a group of 2, n2 then had
  // to be peer-added, and under CPU load that sometimes never happened
  // (n2 at commit 0 "catching up", /healthz "not current with the meta
  // leader" for good, the leader's group still of size 2).
  std::string routes;
  for (int i = 0; i < kNodes; ++i) {
    routes += (i ? ", " : "") + std::string("nats-route://127.0.0.1:") +
              std::to_string(cluster_ports_[i]);
  }
  for (int i = 0; i < kNodes; ++i) {
    std::ofstream conf(dir_.path() + "/" + name(i) + ".conf");
    conf << "server_name: " << name(i) << "\n"
         << "listen: 127.0.0.1:" << client_ports_[i] << "\n"
         << "http: 127.0.0.1:" << monitor_ports_[i] << "\n"
         << "jetstream { store_dir: \"" << dir_.path() << "/" << name(i) << "\" }\n"
         << "cluster {\n  name: kvfold\n  listen: 127.0.0.1:" << cluster_ports_[i]
         << "\n  routes: [" << routes << "]\n}\n";
  }
  for (int i = 0; i < kNodes; ++i) Spawn(i);
  for (int i = 0; i < kNodes; ++i) WaitStarted(i);
  // nats-server without the fix of nats-io/nats-server#8555 (2.10.27 is
  // one) can lose a node whose first meta catch-up stalled and was asked
  // again: it never applies the meta log until restarted, so the others
  // keep a group of 2 while its /healthz says ok. A restart of the node
  // left out is the remedy that fix names; the tests' own readiness wait
  // still judges the cluster.
  if (WaitJetStreamReady(std::chrono::seconds(20))) return;
  for (int i : LeftOutOfTheMetaGroup()) {
    std::fprintf(stderr,
                 "nats cluster: %s is left out of the JetStream meta group (a stalled catch-up, "
                 "nats-io/nats-server#8555): restarting it\n%s",
                 name(i).c_str(), Summary().c_str());
    Kill(i);
    Start(i);
  }
}

std::vector<int> NatsCluster::LeftOutOfTheMetaGroup() const {
  std::set<std::string> members;
  for (int i = 0; i < kNodes && members.empty(); ++i) {
    const nlohmann::json jsz =
        nlohmann::json::parse(MonitorGet(monitor_ports_[i], "/jsz"), nullptr, false);
    if (!jsz.is_object()) continue;
    const nlohmann::json meta = jsz.value("meta_cluster", nlohmann::json());
    if (!meta.is_object() || meta.value("leader", std::string()) != name(i)) continue;
    members.insert(name(i));  // the leader's own view of the group
    for (const auto& r : meta.value("replicas", nlohmann::json::array())) {
      members.insert(r.value("name", std::string()));
    }
  }
  std::vector<int> out;
  if (members.empty()) return out;  // no leader answered: nothing to tell
  for (int i = 0; i < kNodes; ++i) {
    if (!members.contains(name(i))) out.push_back(i);
  }
  return out;
}

int NatsCluster::Routes(int i) const {
  if (!running(i)) return -1;
  const nlohmann::json routez =
      nlohmann::json::parse(MonitorGet(monitor_ports_[i], "/routez"), nullptr, false);
  if (routez.is_discarded() || !routez.is_object()) return -1;
  return routez.value("num_routes", -1);
}

std::set<std::string> NatsCluster::Peers(int i) const {
  std::set<std::string> peers;
  if (!running(i)) return peers;
  const nlohmann::json routez =
      nlohmann::json::parse(MonitorGet(monitor_ports_[i], "/routez"), nullptr, false);
  if (routez.is_discarded() || !routez.is_object()) return peers;
  for (const auto& r : routez.value("routes", nlohmann::json::array())) {
    const std::string peer = r.value("remote_name", "");
    if (!peer.empty()) peers.insert(peer);
  }
  return peers;
}

NatsCluster::~NatsCluster() {
  for (int i = 0; i < kNodes; ++i) {
    if (pids_[i] > 0) kill(pids_[i], SIGTERM);
  }
  for (int i = 0; i < kNodes; ++i) {
    if (pids_[i] > 0) waitpid(pids_[i], nullptr, 0);
  }
}

void NatsCluster::Kill(int i) {
  if (pids_[i] <= 0) return;
  kill(pids_[i], SIGKILL);
  waitpid(pids_[i], nullptr, 0);
  pids_[i] = -1;
}

void NatsCluster::Spawn(int i) {
  const std::string base = dir_.path() + "/" + name(i);
  pids_[i] = live::Spawn({"-c", base + ".conf", "-l", base + ".log"});
}

void NatsCluster::WaitStarted(int i) {
  WaitListening(pids_[i], client_ports_[i], dir_.path() + "/" + name(i) + ".log");
}

void NatsCluster::Start(int i) {
  Spawn(i);
  WaitStarted(i);
}

int NatsCluster::MetaGroupSize(int i) const {
  const nlohmann::json jsz =
      nlohmann::json::parse(MonitorGet(monitor_ports_[i], "/jsz"), nullptr, false);
  if (!jsz.is_object()) return 0;
  const nlohmann::json meta = jsz.value("meta_cluster", nlohmann::json());
  return meta.is_object() ? meta.value("cluster_size", 0) : 0;
}

bool NatsCluster::Ready(int i) const {
  // Every node in the meta group too: a healthy node of a group of 2
  // cannot place an R3 stream ("no suitable peers for placement").
  // (2.9 names no route's server: its route count stands in.)
  const size_t peers = Peers(i).size();
  return running(i) && (peers == kNodes - 1 || (peers == 0 && Routes(i) >= kNodes - 1)) &&
         MonitorGet(monitor_ports_[i], "/healthz").find("\"ok\"") != std::string::npos &&
         MetaGroupSize(i) == kNodes;
}

bool NatsCluster::WaitJetStreamReady(std::chrono::seconds patience) const {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (std::chrono::steady_clock::now() < deadline) {
    int ready = 0;
    for (int i = 0; i < kNodes; ++i) ready += Ready(i);
    if (ready == kNodes) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::string NatsCluster::Summary() const {
  std::string out;
  for (int i = 0; i < kNodes; ++i) {
    out += name(i) + ":";
    if (!running(i)) {
      out += " killed\n";
      continue;
    }
    out += " " + std::to_string(Routes(i)) + " routes, sees [";
    std::string sep;
    for (const auto& p : Peers(i)) out += std::exchange(sep, " ") + p;
    out += "]";
    const nlohmann::json jsz =
        nlohmann::json::parse(MonitorGet(monitor_ports_[i], "/jsz"), nullptr, false);
    const nlohmann::json meta =
        jsz.is_object() ? jsz.value("meta_cluster", nlohmann::json()) : nlohmann::json();
    if (meta.is_object()) {
      out += ", meta leader " + meta.value("leader", std::string("?")) + " of " +
             std::to_string(meta.value("cluster_size", 0));
    }
    std::string health = MonitorGet(monitor_ports_[i], "/healthz");
    while (!health.empty() && (health.back() == '\n' || health.back() == '\r')) health.pop_back();
    out += ", healthz " + (health.empty() ? std::string("(no answer)") : health) + "\n";
  }
  return out;
}

std::string NatsServer::LogTail(size_t lines) const {
  std::ifstream in(dir_.path() + "/server.log");
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out = "--- nats-server log, last lines:\n";
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += all[i] + "\n";
  }
  return out;
}

std::string NatsCluster::LogTails(size_t lines) const {
  std::string out = Summary();
  for (int i = 0; i < kNodes; ++i) {
    std::ifstream in(dir_.path() + "/" + name(i) + ".log");
    std::vector<std::string> all;
    for (std::string l; std::getline(in, l);) {
      // WaitJetStreamReady's polls; Summary already shows the last answer.
      if (l.find("Healthcheck failed") == std::string::npos) all.push_back(l);
    }
    out += "--- " + name(i) + (running(i) ? "" : " (killed)") + " log, last lines:\n";
    for (size_t k = all.size() > lines ? all.size() - lines : 0; k < all.size(); ++k) {
      out += all[k] + "\n";
    }
  }
  return out;
}

std::string NatsCluster::urls() const {
  std::string out;
  for (int i = 0; i < kNodes; ++i) out += (i ? "," : "") + url(i);
  return out;
}

}  // namespace kvfold::live
