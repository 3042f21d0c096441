// One nats.c connection: connect options, reconnect tracking, and JSON
// requests to the JetStream API.
//
// Thread safety: all methods may be called from any thread.

#ifndef KVFOLD_NATS_NATS_CONNECTION_H_
#define KVFOLD_NATS_NATS_CONNECTION_H_

#include <nats/nats.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvfold/connection.h"
#include "kvfold/status.h"

namespace kvfold::nats {

class NatsConnection {
 public:
  // Connects with `options`. Unavailable when no server answers,
  // InvalidArgument for options nats.c refuses (a missing creds file, ...).
  // `avoid` ("host:port" each): servers of options.url to try last, in
  // the order given, after the others in theirs; to move off servers that
  // cannot serve.
  static StatusOr<std::shared_ptr<NatsConnection>> Connect(
      const ConnectOptions& options, const std::vector<std::string>& avoid = {});

  // "host:port" of the server this connection is on now; "" when none.
  std::string ConnectedServer() const;

  NatsConnection(const NatsConnection&) = delete;
  NatsConnection& operator=(const NatsConnection&) = delete;
  ~NatsConnection();

  natsConnection* raw() const { return conn_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::string& url() const { return url_; }

  // Bumped on every disconnect and reconnect: a delivery opened under an
  // older generation may have lost messages or its server-side consumer.
  uint64_t generation() const { return state_->generation.load(); }

  // True once after nats.c reported `sub` as a slow consumer.
  bool TakeSlowConsumer(natsSubscription* sub);
  // Bumped after nats.c reported a slow consumer or a refusal: a reader
  // that saw no change need not take the locks of TakeSlowConsumer and
  // PermissionError for every message.
  uint64_t reported() const { return state_->reported.load(std::memory_order_acquire); }

  // Frees an unsubscribed `sub` once nothing can touch it. libnats 3.4's
  // reader thread may still be handing it a message it read before the
  // unsubscribe (it then locks freed memory: the kill campaign crashed on
  // it, nats.c issue 637). A round trip to the server is handled by that
  // same thread after whatever came before, so when it succeeds `sub` is
  // freed at once; when it fails (a lost or slow connection, where the
  // reader may still be working through what it read) `sub` is kept until
  // the next round trip that succeeds, or until this connection is closed,
  // which joins the reader.
  void DestroySubscription(natsSubscription* sub);

  // PermissionDenied, naming the subject, once the server refused a
  // publish or a subscription on this connection; else OK. kvfold sends
  // only what it needs, so any refusal means the credentials lack a right
  // it needs: every operation ends with this at once instead of waiting
  // out a reply that will never come.
  Status PermissionError() const;

  // Sends `body` to the JetStream API subject "$JS.API.<api>" and returns the
  // reply. An API error becomes NotFound (code 404) or FailedPrecondition
  // with the server's description; no reply becomes Unavailable; a subject
  // the server refused, PermissionDenied.
  StatusOr<nlohmann::json> ApiRequest(const std::string& api, const nlohmann::json& body);
  // The reply to a request to `subject`, read as ApiRequest reads it (for
  // requests sent without waiting, many at a time). Does not take `reply`.
  static StatusOr<nlohmann::json> ParseApiReply(const std::string& subject, natsMsg* reply);

  // Creates the stream `config` describes unless it exists, also when
  // another client creates it at the same moment.
  Status EnsureStream(const nlohmann::json& config);

  // The last message stored on `subject` in `stream` (sequence and data),
  // or nullopt when there is none.
  struct StoredMessage {
    uint64_t seq = 0;
    std::string data;
  };
  StatusOr<std::optional<StoredMessage>> LastMessage(const std::string& stream,
                                                     const std::string& subject);
  // The first message on `subject` in `stream` at or after sequence
  // `from_seq`, or nullopt when there is none. Answered at once either way
  // (a consumer would wait out its timeout for a message that is gone).
  StatusOr<std::optional<StoredMessage>> NextMessage(const std::string& stream,
                                                     const std::string& subject, uint64_t from_seq);

  // Publishes to a stream subject and waits for the JetStream ack; returns
  // the stored sequence. A refusal (e.g. a failed expected-sequence check)
  // is FailedPrecondition with the server's description and err_code.
  StatusOr<uint64_t> Publish(const std::string& subject, std::string_view data,
                             const std::vector<std::pair<std::string, std::string>>& headers = {});

  // Checks, storing nothing, that the server lets this client publish to
  // the stream subject `subject`: the probe expects a last sequence no
  // subject has, so JetStream refuses what the server lets through.
  // PermissionDenied when the server refuses it.
  Status CheckStreamPublish(const std::string& subject);
  // The same for a subject no stream stores (a flow-control reply): an
  // empty message, then a round trip to the server.
  Status CheckCorePublish(const std::string& subject);

 private:
  NatsConnection() = default;

  // Publishes a request to `subject` and waits up to the timeout for one
  // reply, on an inbox of its own, watching for a permission refusal
  // while it waits (PermissionDenied). No responders comes back as
  // NATS_NO_RESPONDERS, no reply as NATS_TIMEOUT.
  struct Reply {
    natsStatus status = NATS_OK;
    natsMsg* msg = nullptr;  // owned by the caller when status is NATS_OK
  };
  StatusOr<Reply> Request(const std::string& subject, std::string_view data,
                          const std::vector<std::pair<std::string, std::string>>& headers);

  // One STREAM.MSG.GET request (`query` selects the message).
  StatusOr<std::optional<StoredMessage>> GetMessage(const std::string& stream,
                                                    const std::string& subject,
                                                    const nlohmann::json& query);

  // What nats.c's callbacks update. nats.c may still run a callback after
  // natsConnection_Destroy returns (its own thread holds the connection), so
  // a callback finds this by `callback_id_` in a registry and does nothing
  // once the connection is gone, instead of being handed a raw pointer.
  struct CallbackState {
    std::atomic<uint64_t> generation{0};
    std::mutex mu;
    std::set<natsSubscription*> slow;
    std::string refused;                // the server's first permission violation
    std::atomic<uint64_t> reported{0};  // bumped after `slow` or `refused` changed
  };
  static std::shared_ptr<CallbackState> FindState(void* closure);

  static void OnDisconnected(natsConnection*, void* closure);
  static void OnReconnected(natsConnection*, void* closure);
  static void OnError(natsConnection*, natsSubscription* sub, natsStatus err, void* closure);

  natsConnection* conn_ = nullptr;
  natsOptions* opts_ = nullptr;
  std::chrono::milliseconds timeout_{5000};
  std::string url_;
  std::shared_ptr<CallbackState> state_ = std::make_shared<CallbackState>();
  uintptr_t callback_id_ = 0;
  std::mutex retired_mu_;
  std::vector<natsSubscription*> retired_;  // see DestroySubscription
};

// "<natsStatus text>: <nats.c's last error>" for messages.
std::string NatsError(natsStatus s);

}  // namespace kvfold::nats

#endif  // KVFOLD_NATS_NATS_CONNECTION_H_
