#include "cli/metrics_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <charconv>
#include <chrono>

namespace kvfold::cli {

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
  m->server_ = std::make_unique<httplib::Server>();
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
