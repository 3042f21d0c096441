// An ordered push consumer (ADR-17) built by hand over the JetStream API, so
// kvfold controls when it is re-created: an ephemeral, memory-stored, ack-none
// consumer with flow control and idle heartbeats, delivering to a private
// inbox. Any gap, reconnect, slow-consumer report or missed heartbeat is
// reported as a reset; the watcher then opens a new one from the last
// sequence it received, with its window check.

#ifndef KVFOLD_NATS_ORDERED_DELIVERY_H_
#define KVFOLD_NATS_ORDERED_DELIVERY_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kvfold/bucket.h"
#include "nats/nats_connection.h"
#include "nats/server_strikes.h"
#include "nats/stranded_consumers.h"

namespace kvfold::nats {

struct OrderedDeliveryConfig {
  std::string bucket;
  DeliveryStart start;
  std::vector<std::string> filters;  // at least one
  bool headers_only = false;
  std::chrono::milliseconds heartbeat{5000};
  // Told of each sign of life and of silence (may be null).
  std::shared_ptr<ServerStrikes> strikes;
  // Given the consumer when its delete goes unanswered (may be null).
  std::shared_ptr<StrandedConsumers> stranded;
  // Tests only: a bound on the bytes nats.c queues for the delivery, to
  // make it a slow consumer. Default: -1 (none; flow control bounds it).
  int pending_bytes_limit = -1;
};

class OrderedDelivery final : public Delivery {
 public:
  // Subscribes, then creates the consumer. With several filters it asks for
  // `filter_subjects` (nats-server 2.10+); a server that ignores or refuses
  // it gets one consumer over the whole bucket instead and
  // *multi_filter_supported is set false.
  static StatusOr<std::unique_ptr<OrderedDelivery>> Open(std::shared_ptr<NatsConnection> conn,
                                                         OrderedDeliveryConfig config,
                                                         bool* multi_filter_supported);

  ~OrderedDelivery() override;

  StatusOr<DeliveryEvent> Next(std::chrono::milliseconds timeout) override;
  Heartbeats heartbeats() const override { return heartbeats_; }

 private:
  OrderedDelivery(std::shared_ptr<NatsConnection> conn, OrderedDeliveryConfig config);

  Status Create(const std::vector<std::string>& filters, bool* filters_honored);
  void DeleteConsumer();
  // nats.c hands every destroyed message to its GC thread, waking it each
  // time it sleeps: a wake-up per message costs more than the message.
  // Spent messages are destroyed in batches (128 messages or 1 MiB of
  // payload), which wakes it about once.
  void Spend(natsMsg* msg);
  void DestroySpent();
  static DeliveryEvent Reset(ResetCause cause, std::string reason);
  StatusOr<DeliveryEvent> MessageEvent(natsMsg* msg);
  // A fresh inbox and a subscription to it; and their removal.
  Status Subscribe();
  void Unsubscribe();

  std::shared_ptr<NatsConnection> conn_;
  OrderedDeliveryConfig config_;
  std::string stream_;
  std::string inbox_;
  natsSubscription* sub_ = nullptr;
  std::string consumer_;
  uint64_t generation_ = 0;
  uint64_t last_consumer_seq_ = 0;
  Heartbeats heartbeats_;
  std::chrono::steady_clock::time_point last_heard_;
  bool heard_ = false;          // a message since last_heard_ was set
  uint64_t reported_seen_ = 0;  // NatsConnection::reported() at the last look
  uint32_t unchecked_ = 0;      // messages since the last look
  std::vector<natsMsg*> spent_;
  size_t spent_bytes_ = 0;  // their payloads: at most about 1 MiB is held
};

}  // namespace kvfold::nats

#endif  // KVFOLD_NATS_ORDERED_DELIVERY_H_
