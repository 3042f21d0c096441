// A TCP proxy between NATS clients and one nats-server, on a free loopback
// port. Bytes pass both ways untouched, except that it can be told to drop
// one message the server delivers to a JetStream consumer: the lost message
// the ordered consumer's sequence and heartbeat checks exist for, which no
// real server produces on demand; and a client's consumer deletes, as a
// node cut off from its cluster loses them.
//
// Frames are read whole across partial reads: MSG and HMSG from the
// server, PUB and HPUB from a client; every other line passes as it is.
//
// Thread safety: all methods may be called from any thread.

#ifndef KVFOLD_TESTS_LIVE_NATS_PROXY_H_
#define KVFOLD_TESTS_LIVE_NATS_PROXY_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace kvfold::live {

class NatsProxy {
 public:
  // Listens at once; connects each accepted client to 127.0.0.1:server_port.
  explicit NatsProxy(int server_port);
  // Closes every connection (clients see a lost connection) and joins.
  ~NatsProxy();
  NatsProxy(const NatsProxy&) = delete;
  NatsProxy& operator=(const NatsProxy&) = delete;

  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }

  // Drops the next message the server sends on `subject` with a JetStream
  // ack reply ($JS.ACK.…): a consumer's delivery, never a heartbeat, flow
  // control or API reply. Once; a second call re-arms it.
  void DropNextDelivery(const std::string& subject);
  // While on, drops every consumer delivery and every idle heartbeat or
  // flow-control request (status 100): the server's deliveries go silent
  // while the connection stays up and API requests are answered, as on a
  // cluster node that lost its peers but still answers from its stale copy.
  void SilenceDeliveries(bool on) { silenced_ = on; }
  // While on, drops every request a client sends to delete a consumer
  // ($JS.API.CONSUMER.DELETE.…): the client waits out its timeout.
  void LoseConsumerDeletes(bool on) { losing_deletes_ = on; }
  // Consumer deletes dropped so far.
  int lost_deletes() const { return lost_deletes_.load(); }
  // Messages dropped so far.
  int dropped() const { return dropped_.load(); }
  // Client connections accepted so far.
  int accepted() const { return accepted_.load(); }

  // Moves the complete frames at the front of *buffer to *out, minus a
  // dropped one; an incomplete tail stays in *buffer for the next read.
  // Public for the proxy's own parsing test.
  void FilterServerBytes(std::string* buffer, std::string* out);
  // The same for what a client sends, minus a lost consumer delete.
  void FilterClientBytes(std::string* buffer, std::string* out);

 private:
  struct Link {
    int client = -1;
    int server = -1;
    std::thread up;    // client -> server
    std::thread down;  // server -> client, filtered
  };

  // Moves the complete frames at the front of *buffer to *out. Frames of
  // operation `op` or `header_op` (each given with its trailing space; with `with_reply` fields,
  // one more for `header_op`, reply included) carry a payload, and pass only if keep(fields, frame,
  // header_start) says so (header_start: where the header block begins in the frame, npos for
  // `op`); every other operation is one line and passes.
  template <typename Keep>
  void SplitFrames(std::string* buffer, std::string* out, std::string_view op,
                   std::string_view header_op, size_t with_reply, Keep keep);
  void AcceptLoop();
  void CopyUp(Link* link);
  void CopyDown(Link* link);
  bool TakeDrop(std::string_view subject, std::string_view reply);
  // A delivery or a status-100 frame while silenced (header_start: where
  // an HMSG's header block begins in the frame; npos for MSG).
  bool Silenced(std::string_view reply, std::string_view frame, size_t header_start) const;

  int listen_fd_ = -1;
  int server_port_ = 0;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> dropped_{0};
  std::atomic<int> accepted_{0};
  std::atomic<bool> silenced_{false};
  std::atomic<bool> losing_deletes_{false};
  std::atomic<int> lost_deletes_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::optional<std::string> drop_subject_;   // guarded by mu_
  std::vector<std::unique_ptr<Link>> links_;  // guarded by mu_
};

}  // namespace kvfold::live

#endif  // KVFOLD_TESTS_LIVE_NATS_PROXY_H_
