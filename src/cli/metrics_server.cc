#include "cli/metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <list>
#include <mutex>
#include <system_error>

#include "core/mutation.h"

namespace kvfold::cli {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The bounds a peer of the port meets (docs/operating.md, "Metrics and
// probes"). A probe's answer must not depend on another peer's cooperation:
// every connection has a thread of its own, a deadline and a byte budget,
// and at the limit the oldest connection makes way for the new one.
constexpr size_t kMaxConnections = 32;
constexpr auto kRequestDeadline = std::chrono::seconds(2);  // from accept to the last header
constexpr auto kAnswerDeadline = std::chrono::seconds(2);   // from the first byte written
constexpr size_t kMaxRequestBytes = 16 * 1024;              // request line and headers
// httplib listens with a backlog of 5: a burst of connects would overflow
// it, and a probe's SYN dropped there waits a second for its retransmit.
constexpr int kListenBacklog = 128;

int MillisUntil(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 60000));
}

// Waits for `events` on `sock` until `deadline`; false on timeout or error.
bool WaitFor(int sock, short events, SteadyClock::time_point deadline) {
  for (;;) {
    pollfd p{sock, events, 0};
    const int n = ::poll(&p, 1, MillisUntil(deadline));
    if (n > 0) return true;  // ready, or a hangup/error the next call reports
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

// The live connections, oldest first, and the threads serving them.
class ConnectionTable {
 public:
  // Before a connection's thread starts: at the limit, shuts the oldest
  // connection down (its thread then ends at once) and waits for a slot.
  void ReserveThread() {
    std::unique_lock lock(mu_);
    while (threads_ >= kMaxConnections) {
      for (Live& c : live_) {
        if (!c.evicted) {
          ::shutdown(c.sock, SHUT_RDWR);
          c.evicted = true;
          break;
        }
      }
      cv_.wait_for(lock, std::chrono::milliseconds(10));
    }
    ++threads_;
  }
  void ReleaseThread() {
    std::lock_guard lock(mu_);
    --threads_;
    cv_.notify_all();
  }
  // False when the server is stopping: the connection is closed unserved.
  bool Add(int sock) {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    live_.push_back(Live{sock, false});
    return true;
  }
  // Before `sock` is closed, so that eviction never shuts a reused number.
  void Remove(int sock) {
    std::lock_guard lock(mu_);
    live_.remove_if([sock](const Live& c) { return c.sock == sock; });
  }
  // Shuts every connection down and waits for their threads.
  void CloseAll() {
    std::unique_lock lock(mu_);
    stopping_ = true;
    for (const Live& c : live_) ::shutdown(c.sock, SHUT_RDWR);
    cv_.wait(lock, [&] { return threads_ == 0; });
  }

 private:
  struct Live {
    int sock;
    bool evicted;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Live> live_;
  size_t threads_ = 0;
  bool stopping_ = false;
};

// httplib's task queue: one thread per connection (a pool's threads are a
// few idle peers away from starving the probes), at most kMaxConnections.
class ThreadPerConnection final : public httplib::TaskQueue {
 public:
  explicit ThreadPerConnection(ConnectionTable& table) : table_(table) {}

  void enqueue(std::function<void()> fn) override {
    table_.ReserveThread();
    try {
      std::thread([this, fn] {
        fn();
        table_.ReleaseThread();  // the last touch of anything shared
      }).detach();
    } catch (const std::system_error&) {
      fn();  // no thread to be had: serve it here, within its deadlines
      table_.ReleaseThread();
    }
  }
  void shutdown() override { table_.CloseAll(); }

 private:
  ConnectionTable& table_;
};

// One connection as httplib reads and writes it, through a non-blocking
// socket: every wait ends at a deadline, and reading stops at a budget,
// whatever the peer does.
class BoundedStream final : public httplib::Stream {
 public:
  explicit BoundedStream(int sock)
      : sock_(sock), read_deadline_(SteadyClock::now() + kRequestDeadline) {}

  bool is_readable() const override {
    return begin_ < end_ || WaitFor(sock_, POLLIN, read_deadline_);
  }
  bool is_writable() const override { return WaitFor(sock_, POLLOUT, WriteDeadline()); }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (read_total_ >= kMaxRequestBytes) return -1;  // httplib answers 400 or closes
      for (;;) {
        const ssize_t n = ::recv(sock_, buf_, std::min(sizeof buf_, kMaxRequestBytes - read_total_),
                                 MSG_DONTWAIT);
        if (n >= 0) {
          if (n == 0) return 0;
          begin_ = 0;
          end_ = static_cast<size_t>(n);
          read_total_ += end_;
          break;
        }
        if (errno == EINTR) continue;
        if ((errno != EAGAIN && errno != EWOULDBLOCK) || !WaitFor(sock_, POLLIN, read_deadline_)) {
          return -1;
        }
      }
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buf_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    const auto deadline = WriteDeadline();
    for (;;) {
      const ssize_t n = ::send(sock_, ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !WaitFor(sock_, POLLOUT, deadline)) {
        return -1;
      }
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(::getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  SteadyClock::time_point WriteDeadline() const {
    if (!write_deadline_) write_deadline_ = SteadyClock::now() + kAnswerDeadline;
    return *write_deadline_;
  }
  template <typename Getter>
  void Address(Getter get, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (get(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = "";
    if (addr.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
      inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
      port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
      inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
      port = ntohs(a->sin6_port);
    }
    ip = text;
  }

  const int sock_;
  const SteadyClock::time_point read_deadline_;
  mutable std::optional<SteadyClock::time_point> write_deadline_;
  char buf_[4096];
  size_t begin_ = 0, end_ = 0;
  size_t read_total_ = 0;
};

bool ProbeMethod(const std::string& method) { return method == "GET" || method == "HEAD"; }

void RefuseMethod(httplib::Response& res) {
  res.status = 405;
  res.set_header("Allow", "GET, HEAD");
  res.set_content("only GET and HEAD are served here\n", "text/plain; charset=utf-8");
}

// httplib's server with its connection handling replaced: one request per
// connection (no keep-alive for a peer to park on), each connection under
// BoundedStream's deadlines and in ConnectionTable's limit.
class ProbeServer final : public httplib::Server {
 public:
  ProbeServer() {
    if (!KVFOLD_MUTANT("metrics-thread-pool")) {
      new_task_queue = [this] { return new ThreadPerConnection(table_); };
    }
    // Refused before routing, where httplib would read a body.
    set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
      if (ProbeMethod(req.method) || KVFOLD_MUTANT("metrics-any-method")) {
        return HandlerResponse::Unhandled;
      }
      RefuseMethod(res);
      return HandlerResponse::Handled;
    });
    // A client that waits for "100 Continue" before its body gets the 405 instead.
    set_expect_100_continue_handler([](const httplib::Request& req, httplib::Response& res) {
      if (ProbeMethod(req.method)) return 100;
      RefuseMethod(res);
      return 405;
    });
  }

  // After the bind: the accept queue httplib's listen() left.
  void WidenBacklog() { ::listen(svr_sock_, kListenBacklog); }

 private:
  // Overrides httplib's own (keep-alive loop, blocking reads with a
  // per-read timeout only, an unbounded request line).
  bool process_and_close_socket(socket_t sock) override {
    bool served = false;
    if (table_.Add(sock)) {
      BoundedStream stream(sock);
      bool closed = false;
      served = process_request(stream, /*close_connection=*/true, closed, nullptr);
      // Closing with unread bytes (a refused request's body) would reset the
      // connection and could cost the peer the answer: end ours, then read
      // what the peer still sends, briefly and up to a bound.
      ::shutdown(sock, SHUT_WR);
      const auto until = SteadyClock::now() + std::chrono::milliseconds(200);
      char sink[4096];
      for (size_t drained = 0; drained < 64 * 1024 && WaitFor(sock, POLLIN, until);) {
        const ssize_t n = ::recv(sock, sink, sizeof sink, MSG_DONTWAIT);
        if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) break;
        if (n > 0) drained += static_cast<size_t>(n);
      }
      table_.Remove(sock);
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return served;
  }

  ConnectionTable table_;
};

}  // namespace

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& addr,
                                                              Pages pages) {
  const size_t colon = addr.rfind(':');
  const auto bad = Status::InvalidArgument("metrics address \"" + addr +
                                           "\" is not HOST:PORT (e.g. 127.0.0.1:9464)");
  if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size()) return bad;
  std::string host = addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::1]:9464
  }
  int port = -1;
  const char* end = addr.data() + addr.size();
  auto [ptr, ec] = std::from_chars(addr.data() + colon + 1, end, port);
  if (ec != std::errc() || ptr != end || port < 0 || port > 65535) return bad;

  std::unique_ptr<MetricsServer> m(new MetricsServer());
  auto probe_server = std::make_unique<ProbeServer>();
  ProbeServer& probes = *probe_server;
  m->server_ = std::move(probe_server);
  // httplib's default adds SO_REUSEPORT: a second mirror could then bind
  // the same port and the kernel would split scrapes between two folds.
  m->server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  for (auto& [path, render] : pages) {
    m->server_->Get(path,
                    [render = std::move(render)](const httplib::Request&, httplib::Response& res) {
                      Page page = render();
                      res.status = page.status;
                      res.set_content(page.body, page.content_type);
                    });
  }
  if (port == 0) {
    port = m->server_->bind_to_any_port(host);
    if (port < 0) port = -1;
  } else if (!m->server_->bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return Status::Unavailable("cannot listen on " + addr +
                               " for metrics (address in use, or not of this machine)");
  }
  probes.WidenBacklog();
  m->host_ = host;
  m->port_ = port;
  httplib::Server* server = m->server_.get();
  auto ended = std::make_shared<std::atomic<bool>>(false);
  m->thread_ = std::thread([server, ended] {
    server->listen_after_bind();
    ended->store(true);
  });
  // stop() before the loop runs would be lost, and the join would hang;
  // a loop that ended at once (an accept error) is an error.
  while (!server->is_running()) {
    if (ended->load()) return Status::Unavailable("the metrics server on " + addr + " stopped");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return m;
}

MetricsServer::~MetricsServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace kvfold::cli
