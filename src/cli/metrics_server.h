// Serves GET /metrics over HTTP on its own thread (kvfold mirror
// --metrics-addr): the Prometheus text a render function returns.

#ifndef KVFOLD_CLI_METRICS_SERVER_H_
#define KVFOLD_CLI_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "kvfold/status.h"

namespace httplib {
class Server;
}

namespace kvfold::cli {

class MetricsServer {
 public:
  // Listens on `addr` ("HOST:PORT"; port 0 picks a free one).
  // InvalidArgument for a malformed address; Unavailable when it cannot be
  // bound (in use, not local).
  static StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& addr,
                                                        std::function<std::string()> render);
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
