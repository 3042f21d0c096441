// The bucket as the watcher sees it: stream state, ordered delivery from a
// sequence, and a key listing.
//
// The product implements these over nats.c (see connection.h); tests and
// simulation implement them over an in-memory bucket, so both drive the very
// same watch loop. A BucketSource and each Delivery it opens are used by one
// thread at a time.

#ifndef KVFOLD_BUCKET_H_
#define KVFOLD_BUCKET_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kvfold/scope.h"
#include "kvfold/status.h"

namespace kvfold {

enum class Op { kPut, kDelete, kPurge };

std::string_view OpName(Op op);  // "put", "delete", "purge"

// The fresh state and retention-relevant config of the bucket's stream.
struct StreamState {
  std::string created;     // stream identity: its creation time as reported
  uint64_t first_seq = 0;  // first retained sequence (last_seq + 1 if empty)
  uint64_t last_seq = 0;   // last sequence ever stored (0 if none)
  uint64_t messages = 0;
  // Retention config, read fresh on every call (limits can be edited live).
  int64_t max_msgs = -1;
  int64_t max_bytes = -1;
  int64_t max_age_ns = 0;
  int64_t history = 1;  // max_msgs_per_subject
  bool discard_new = false;
  bool allow_msg_ttl = false;
  // nats-server 2.11+: how long a limit marker (written when an expiry
  // empties a key) is kept, in ns; 0 when the bucket writes none.
  int64_t marker_ttl_ns = 0;
  // The server's clock when it answered (nanoseconds since the Unix epoch;
  // 0 when the server does not say, as before 2.10).
  int64_t server_time_ns = 0;
};

// One message of the bucket as delivered.
struct BucketMessage {
  std::string key;
  Op op = Op::kPut;
  std::string value;
  uint64_t seq = 0;  // stream sequence = the entry's revision
  // What the consumer said it still had to deliver after this. A hint only:
  // nats-server 2.10+ updates it asynchronously and a clustered consumer
  // may lag, so nothing that decides the cursor may rest on it.
  uint64_t pending = 0;
  // When the stream stored it, by the server's clock (nanoseconds since the
  // Unix epoch; 0 when unknown).
  int64_t time_ns = 0;
  // When its per-message TTL (Nats-TTL) removes it: time_ns plus the TTL,
  // by the server's clock; 0 when it has none (Entry::expires_ns).
  int64_t expires_ns = 0;
};

// Where an ordered delivery starts.
struct DeliveryStart {
  // Sequence to start at; unset means a state sync: the last message of each
  // key in scope, in sequence order, then everything new.
  std::optional<uint64_t> from_seq;
};

// Why a delivery broke.
enum class ResetCause {
  kConsumerGap,   // a consumer sequence was skipped: a message was lost
  kHeartbeatGap,  // a heartbeat named a message that never arrived
  kIdle,          // no message or heartbeat for three heartbeat intervals
  kConnection,    // the connection was lost or re-established
  kSlowConsumer,  // the client dropped messages
  kServerStatus,  // the server sent a status the delivery cannot continue on
  kRollupSkip,    // the server moved the consumer past retained messages
                  // (found by the watcher: nats-server < 2.9.12 at a purge)
  kOther,
};
std::string_view ResetCauseName(ResetCause cause);  // "consumer_gap", ...

// What one Delivery::Next call produced.
struct DeliveryEvent {
  enum class Kind {
    kMessage,  // `message` is set
    kTimeout,  // nothing arrived in time
    kReset,    // the delivery broke (gap, reconnect, slow consumer, stall);
               // `reason` says why. Open a new one from the last received
               // sequence.
  };
  Kind kind = Kind::kTimeout;
  BucketMessage message;
  std::string reason;                     // kReset: in words, with numbers
  ResetCause cause = ResetCause::kOther;  // kReset
};

class Delivery {
 public:
  Delivery() = default;
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;
  // Releases the server-side consumer; no consumer outlives its Delivery.
  virtual ~Delivery() = default;

  // Waits up to `timeout` for the next message. Messages arrive in stream
  // sequence order with no gap the server knows of. Keys outside the
  // delivery's scope may arrive (a server may not filter); callers filter.
  // A non-OK Status is a fault the caller should not retry on this Delivery.
  virtual StatusOr<DeliveryEvent> Next(std::chrono::milliseconds timeout) = 0;

  // The server's idle heartbeats on this delivery so far: how many came,
  // and the stream sequence the last one said the server's consumer had
  // reached (Nats-Last-Stream). A delivery without heartbeats: none.
  struct Heartbeats {
    uint64_t count = 0;
    uint64_t stream_seq = 0;
  };
  virtual Heartbeats heartbeats() const { return {}; }
};

class BucketSource {
 public:
  BucketSource() = default;
  BucketSource(const BucketSource&) = delete;
  BucketSource& operator=(const BucketSource&) = delete;
  virtual ~BucketSource() = default;

  virtual const std::string& bucket() const = 0;

  // Fresh stream state (never cached). Unavailable when the server cannot be
  // reached; NotFound when the bucket does not exist.
  virtual StatusOr<StreamState> ReadStream() = 0;

  // Opens an ordered delivery of the messages in `scope` from `start`.
  virtual StatusOr<std::unique_ptr<Delivery>> Open(const DeliveryStart& start,
                                                   const Scope& scope) = 0;

  // The sequence of the first message the stream still retains at or after
  // `from_seq` whose subject matches one of the server-side filters of
  // `scope` (a superset of the scope's keys: exactly what a delivery of
  // `scope` may send), or nullopt when there is none. Answered by the
  // stream's store (STREAM.MSG.GET with next_by_subj), never by consumer
  // counters: this is what proves nothing in scope is still on its way.
  virtual StatusOr<std::optional<uint64_t>> FirstRetainedInScope(const Scope& scope,
                                                                 uint64_t from_seq) = 0;

  // The key's latest retained message (its operation, stored time, and for
  // a put its value and deadline), or nullopt when the stream holds none.
  // A repair asks this before deleting a key a listing did not name (a key
  // rewritten while the listing ran is live); a watch asks it when an
  // expiry may have uncovered the key's previous message (history > 1).
  virtual StatusOr<std::optional<BucketMessage>> LastOfKey(const std::string& key) = 0;

  // Calls fn(key, revision) for every key in `scope` whose latest message is
  // a put, headers only, in no particular order, then returns in *last_seq
  // the stream's last sequence read *before* the listing began: every
  // message at or below it is reflected in the listing.
  virtual Status ListKeys(const Scope& scope,
                          const std::function<Status(std::string_view key, uint64_t revision)>& fn,
                          uint64_t* last_seq) = 0;

  // Added last, so that sources built against an earlier release keep
  // their layout. Both are called on the watch's thread, between calls of
  // the methods above.

  // When the source moved to another server since last asked (it left one
  // that could not serve the bucket), a line saying so; handed out once
  // per move, otherwise empty. The watch logs it, drops a delivery opened
  // across the move (its start came from the old server's state) and
  // starts its backoff over once the new server answered. Deliveries and
  // states from before stay valid to destroy. Default: never moves.
  virtual std::string TakeMoveNotice() { return std::string(); }

  // The watch saw the source answer for the stream with a head behind what
  // it already received from the same stream (a cluster replica that has
  // not caught up). A source with other servers may count it against the
  // current one. Default: nothing.
  virtual void NoteLaggingView() {}
};

}  // namespace kvfold

#endif  // KVFOLD_BUCKET_H_
