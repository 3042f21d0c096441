// A resume's delta read from the stream's store, then the live tail from an
// ordered consumer created past the head.
//
// Why: nats-server 2.10+ answers CONSUMER.CREATE with a start sequence at or
// below the stream's last one only after counting what the consumer has
// pending, which takes time in proportion to the stream (285 ms on a
// 10M-message stream on 2.15.1, for a resume of 100 messages); a consumer
// that starts past the head is created at once. So a short delta, from the
// resume's start through the head read just before, is read by
// STREAM.MSG.GET for each sequence, many requests in flight at a time, and
// the consumer starts at head + 1: every sequence is read by one or the
// other. A sequence the store no longer holds is skipped, as a consumer
// skips it; what retention removed there is the floor guard's to find, as
// for any delivery. Out-of-scope keys may come, as from any delivery.

#ifndef KVFOLD_NATS_DELTA_DELIVERY_H_
#define KVFOLD_NATS_DELTA_DELIVERY_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <memory>
#include <string>

#include "kvfold/bucket.h"
#include "nats/nats_connection.h"

namespace kvfold::nats {

class DeltaDelivery final : public Delivery {
 public:
  // The longest delta read by sequence: beyond it a consumer from the
  // start costs less than the reads (on a 10M-message stream, one
  // creation is about 1,400 reads).
  static constexpr uint64_t kMaxSequences = 1024;
  // Reads in flight at a time.
  static constexpr uint64_t kWindow = 64;

  // Reads sequences [from, head] of `bucket`'s stream, then hands over to
  // `tail`, a delivery that starts at head + 1. REQUIRES: from <= head.
  static StatusOr<std::unique_ptr<DeltaDelivery>> Open(std::shared_ptr<NatsConnection> conn,
                                                       std::string bucket, uint64_t from,
                                                       uint64_t head,
                                                       std::unique_ptr<Delivery> tail);
  ~DeltaDelivery() override;

  StatusOr<DeliveryEvent> Next(std::chrono::milliseconds timeout) override;
  Heartbeats heartbeats() const override { return tail_->heartbeats(); }

 private:
  using Clock = std::chrono::steady_clock;
  DeltaDelivery(std::shared_ptr<NatsConnection> conn, std::string bucket, uint64_t from,
                uint64_t head, std::unique_ptr<Delivery> tail);

  // Sends reads until kWindow are in flight or the head is asked for.
  Status Ask();
  // What the reply for next_ says: a message, a sequence no longer held
  // (nullopt), or a reset.
  StatusOr<std::optional<DeliveryEvent>> Answer(natsMsg* reply);
  void Unsubscribe();

  std::shared_ptr<NatsConnection> conn_;
  std::string bucket_;
  std::string subject_;  // $JS.API.STREAM.MSG.GET.<stream>
  std::string inbox_;    // replies come to <inbox_>.<sequence>
  natsSubscription* sub_ = nullptr;
  uint64_t generation_ = 0;
  uint64_t next_;    // the next sequence to hand out
  uint64_t asked_;   // the next sequence to ask for
  uint64_t head_;    // the last sequence read here; the tail starts after it
  std::deque<Clock::time_point> asked_at_;  // for [next_, asked_)
  std::map<uint64_t, natsMsg*> arrived_;    // replies ahead of next_
  std::unique_ptr<Delivery> tail_;
};

}  // namespace kvfold::nats

#endif  // KVFOLD_NATS_DELTA_DELIVERY_H_
