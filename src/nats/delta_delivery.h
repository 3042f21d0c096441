// A resume's delta read from the stream's store, then the live tail from an
// ordered consumer created past the head.
//
// Why: nats-server 2.10+ answers CONSUMER.CREATE with a start sequence at or
// below the stream's last one only after counting what the consumer has
// pending, which takes time in proportion to the stream (285 ms on a
// 10M-message stream on 2.15.1, for a resume of 100 messages); a consumer
// that starts past the head is created at once. So a short delta, from the
// resume's start through the head read just before, is read from the store
// and the consumer starts at head + 1: every sequence is read by one or the
// other.
//
// What the store answers is taken only where it proves as much as a
// consumer would:
// - each read asks for the first message of the bucket at or after a
//   sequence (STREAM.MSG.GET with next_by_subj), many in flight; an answer
//   t proves nothing is stored between the sequence asked and t (a store
//   holding t stored everything before it), and what retention removed
//   there is the floor guard's to find, as for any delivery;
// - "no message" at or after a sequence up to the head proves nothing (the
//   answer may come from a copy behind the head, a leader being replaced):
//   a consumer from that sequence takes over, as before this existed;
// - replies are handed out only once a stream read after them shows the
//   same stream (its creation time): a stream deleted
//   and re-created meanwhile answers with another's messages, which a
//   consumer, gone with its stream, never delivers.
// Out-of-scope keys come, as from any delivery.

#ifndef KVFOLD_NATS_DELTA_DELIVERY_H_
#define KVFOLD_NATS_DELTA_DELIVERY_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "kvfold/bucket.h"
#include "nats/nats_connection.h"
#include "nats/server_strikes.h"

namespace kvfold::nats {

class DeltaDelivery final : public Delivery {
 public:
  // The longest delta read from the store: beyond it a consumer from the
  // start costs less than the reads (on a 10M-message stream, one
  // creation is about 1,400 reads).
  static constexpr uint64_t kMaxSequences = 1024;
  // Reads in flight at a time.
  static constexpr uint64_t kWindow = 64;

  // Opens an ordered delivery from a sequence (the tail, or a consumer
  // taking over a delta).
  using OpenConsumer = std::function<StatusOr<std::unique_ptr<Delivery>>(uint64_t from)>;

  struct Stream {
    std::string bucket;
    std::string created;  // its creation time as STREAM.INFO said
    uint64_t head = 0;    // its last sequence then
  };

  // Reads [from, stream.head] from the store of `stream`, then hands over
  // to a consumer from stream.head + 1, opened here by `open`. REQUIRES:
  // 0 < from <= stream.head. `strikes` (may be null) hears of unanswered
  // reads.
  static StatusOr<std::unique_ptr<DeltaDelivery>> Open(std::shared_ptr<NatsConnection> conn,
                                                       Stream stream, uint64_t from,
                                                       OpenConsumer open,
                                                       std::shared_ptr<ServerStrikes> strikes);
  ~DeltaDelivery() override;

  StatusOr<DeliveryEvent> Next(std::chrono::milliseconds timeout) override;
  Heartbeats heartbeats() const override { return tail_->heartbeats(); }

 private:
  using Clock = std::chrono::steady_clock;
  DeltaDelivery(std::shared_ptr<NatsConnection> conn, Stream stream, uint64_t from,
                OpenConsumer open, std::shared_ptr<ServerStrikes> strikes);

  // What one reply says.
  struct Reply {
    enum class Kind {
      kMessage,   // `event` holds the first message at or after the sequence
      kUnproven,  // no message at or after it: a consumer takes over
      kReset,     // `event` is the reset
    };
    Kind kind = Kind::kReset;
    DeliveryEvent event;
  };

  // Sends reads until kWindow are in flight or the head is asked for.
  Status Ask();
  Reply Read(uint64_t seq, natsMsg* reply);
  // The first sequence in [next_, asked_) whose reply has not come.
  std::optional<uint64_t> FirstMissing() const;
  // Whether the stream is still the one the delta started on (its
  // creation time): a reset (with why) when not.
  std::optional<DeliveryEvent> Verify();
  // Forgets replies and reads below next_.
  void DropBelowNext();
  void Unsubscribe();

  std::shared_ptr<NatsConnection> conn_;
  Stream stream_;
  OpenConsumer open_;
  std::shared_ptr<ServerStrikes> strikes_;
  std::string subject_;       // $JS.API.STREAM.MSG.GET.<stream>
  std::string request_tail_;  // ,"next_by_subj":"$KV.<bucket>.>"}
  std::string inbox_;         // replies come to <inbox_>.<sequence>
  natsSubscription* sub_ = nullptr;
  uint64_t generation_ = 0;
  uint64_t next_;      // everything below was handed out or proven absent
  uint64_t asked_;     // the next sequence to ask for
  uint64_t verified_;  // replies through here came from this stream
  std::map<uint64_t, Clock::time_point> asked_at_;  // reads in flight or held
  std::map<uint64_t, natsMsg*> arrived_;            // replies not yet used
  std::unique_ptr<Delivery> tail_;
};

}  // namespace kvfold::nats

#endif  // KVFOLD_NATS_DELTA_DELIVERY_H_
