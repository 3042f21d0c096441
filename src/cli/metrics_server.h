// Serves GET (and HEAD) pages over HTTP on its own thread (kvfold mirror
// --metrics-addr): /metrics, /healthz and /readyz, each what its function
// returns when asked. Any peer may connect, so no peer can hold the pages
// up: each connection has its own thread (at most 32; past that the
// oldest is closed), one request, a 2 s deadline for it and a 16 KiB
// budget; other methods get 405 unread (docs/cli.md, "Metrics and probes").

#ifndef KVFOLD_CLI_METRICS_SERVER_H_
#define KVFOLD_CLI_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kvfold/status.h"

namespace httplib {
class Server;
}

namespace kvfold::cli {

struct Page {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};
using Pages = std::vector<std::pair<std::string, std::function<Page()>>>;  // path, render

class MetricsServer {
 public:
  // Listens on `addr` ("HOST:PORT"; port 0 picks a free one) and serves
  // `pages`. InvalidArgument for a malformed address; Unavailable when it
  // cannot be bound (in use, not local).
  static StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& addr, Pages pages);
  ~MetricsServer();  // stops serving and joins the thread

  const std::string& host() const { return host_; }
  int port() const { return port_; }

 private:
  MetricsServer() = default;

  std::unique_ptr<httplib::Server> server_;
  std::string host_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace kvfold::cli

#endif  // KVFOLD_CLI_METRICS_SERVER_H_
