#include "nats/ordered_delivery.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "core/message_ttl.h"
#include "core/mutation.h"
#include "nats/kv_subjects.h"

namespace kvfold::nats {
namespace {

// The longest a wait for the next message goes without looking for a
// permission refusal.
constexpr std::chrono::milliseconds kRefusalCheck{250};
// While messages keep coming, the most read between two looks for a
// refusal that nats.c has not reported yet.
constexpr uint32_t kFullCheckEvery = 1024;

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::string Header(natsMsg* msg, const char* name) {
  const char* v = nullptr;
  if (natsMsgHeader_Get(msg, name, &v) != NATS_OK || v == nullptr) return "";
  return v;
}

}  // namespace

OrderedDelivery::OrderedDelivery(std::shared_ptr<NatsConnection> conn, OrderedDeliveryConfig config)
    : conn_(std::move(conn)), config_(std::move(config)), stream_(StreamName(config_.bucket)) {}

StatusOr<std::unique_ptr<OrderedDelivery>> OrderedDelivery::Open(
    std::shared_ptr<NatsConnection> conn, OrderedDeliveryConfig config,
    bool* multi_filter_supported) {
  std::unique_ptr<OrderedDelivery> d(new OrderedDelivery(std::move(conn), std::move(config)));
  // Read the generation before subscribing: a reconnect racing with the
  // set-up must show up as a reset, not be missed.
  d->generation_ = d->conn_->generation();
  KVFOLD_RETURN_IF_ERROR(d->Subscribe());

  const auto& filters = d->config_.filters;
  bool honored = true;
  if (filters.size() > 1 && *multi_filter_supported) {
    Status cs = d->Create(filters, &honored);
    if (!cs.ok() && !cs.IsFailedPrecondition()) return cs;
    if (cs.ok() && honored) return d;
    if (cs.ok()) {
      // What the first consumer already pushed must not mix with the
      // next one's sequences: it gets an inbox of its own.
      d->DeleteConsumer();
      d->Unsubscribe();
      KVFOLD_RETURN_IF_ERROR(d->Subscribe());
    }
    *multi_filter_supported = false;
  }
  if (filters.size() > 1) {
    // nats-server 2.9 ignores filter_subjects: take the whole bucket and
    // filter client-side.
    KVFOLD_RETURN_IF_ERROR(d->Create({SubjectPrefix(d->config_.bucket) + ">"}, &honored));
  } else {
    KVFOLD_RETURN_IF_ERROR(d->Create(filters, &honored));
  }
  return d;
}

Status OrderedDelivery::Subscribe() {
  natsInbox* inbox = nullptr;
  natsStatus s = natsInbox_Create(&inbox);
  if (s != NATS_OK) return Status::Internal("creating an inbox: " + NatsError(s));
  inbox_ = inbox;
  natsInbox_Destroy(inbox);
  s = natsConnection_SubscribeSync(&sub_, conn_->raw(), inbox_.c_str());
  if (s != NATS_OK) {
    sub_ = nullptr;
    return Status::Unavailable("subscribing to a delivery inbox: " + NatsError(s));
  }
  // Unlimited client-side buffering (a test may bound it): flow control
  // bounds what the server sends, and a dropped message would be a gap.
  natsSubscription_SetPendingLimits(sub_, -1, config_.pending_bytes_limit);
  return Status::OK();
}

void OrderedDelivery::Unsubscribe() {
  if (sub_ == nullptr) return;
  natsSubscription_Unsubscribe(sub_);
  conn_->TakeSlowConsumer(sub_);
  // Freed once nats.c's reader thread cannot be handing it a message.
  conn_->DestroySubscription(sub_);
  sub_ = nullptr;
}

Status OrderedDelivery::Create(const std::vector<std::string>& filters, bool* filters_honored) {
  json cfg = {
      {"deliver_subject", inbox_},
      {"ack_policy", "none"},
      {"max_deliver", 1},
      {"replay_policy", "instant"},
      {"flow_control", true},
      {"idle_heartbeat",
       std::chrono::duration_cast<std::chrono::nanoseconds>(config_.heartbeat).count()},
      {"mem_storage", true},
      {"num_replicas", 1},
      {"inactive_threshold", int64_t{30} * 1000 * 1000 * 1000},
      {"headers_only", config_.headers_only},
  };
  if (config_.start.from_seq) {
    cfg["deliver_policy"] = "by_start_sequence";
    cfg["opt_start_seq"] = *config_.start.from_seq;
  } else {
    cfg["deliver_policy"] = "last_per_subject";
  }
  if (filters.size() == 1) {
    cfg["filter_subject"] = filters[0];
  } else {
    cfg["filter_subjects"] = filters;
  }
  json req = {{"stream_name", stream_}, {"config", cfg}};
  auto reply = conn_->ApiRequest("CONSUMER.CREATE." + stream_, req);
  if (!reply.ok()) {
    return reply.status().WithContext("creating a consumer on " + stream_);
  }
  consumer_ = reply->value("name", std::string());
  if (consumer_.empty()) {
    return Status::Corruption("consumer create reply on " + stream_ + " names no consumer");
  }
  const json& echoed = (*reply)["config"];
  *filters_honored =
      filters.size() == 1 || (echoed.is_object() && echoed.contains("filter_subjects") &&
                              echoed["filter_subjects"].size() == filters.size());
  last_heard_ = Clock::now();
  heard_ = false;
  return Status::OK();
}

void OrderedDelivery::DeleteConsumer() {
  if (consumer_.empty()) return;
  // After a server restart the consumer is already gone (NotFound). One
  // this server cannot delete now is deleted again over a connection that
  // serves (StrandedConsumers).
  auto deleted = conn_->ApiRequest("CONSUMER.DELETE." + stream_ + "." + consumer_, nullptr);
  if (!deleted.ok() && deleted.status().IsUnavailable() && config_.stranded &&
      !KVFOLD_MUTANT("delivery-forget-stranded-consumer")) {
    config_.stranded->Add(stream_, consumer_);
  }
  consumer_.clear();
}

void OrderedDelivery::Spend(natsMsg* msg) {
  spent_.push_back(msg);
  spent_bytes_ += static_cast<size_t>(natsMsg_GetDataLength(msg));
  if (spent_.size() >= 128 || spent_bytes_ >= (size_t{1} << 20)) DestroySpent();
}

void OrderedDelivery::DestroySpent() {
  for (natsMsg* m : spent_) natsMsg_Destroy(m);
  spent_.clear();
  spent_bytes_ = 0;
}

OrderedDelivery::~OrderedDelivery() {
  DestroySpent();
  // The server stops pushing first; then the subscription goes.
  DeleteConsumer();
  Unsubscribe();
}

DeliveryEvent OrderedDelivery::Reset(ResetCause cause, std::string reason) {
  DeliveryEvent ev;
  ev.kind = DeliveryEvent::Kind::kReset;
  ev.reason = std::move(reason);
  ev.cause = cause;
  return ev;
}

StatusOr<DeliveryEvent> OrderedDelivery::Next(std::chrono::milliseconds timeout) {
  // A message already queued costs no clock reading and no lock: the clock
  // is read once a wait comes back without a message of the stream, and
  // the connection's reports (a slow consumer, a refusal) are looked for
  // after every such wait, when nats.c reported one, and every
  // kFullCheckEvery messages.
  std::optional<Clock::time_point> deadline;
  auto left = timeout;
  int64_t waited = 0;  // the longest the last wait may have taken, ms
  bool past_deadline = false;
  for (bool first = true;; first = false) {
    if (!first) {
      const auto now = Clock::now();
      // After a status message the wait it ended may have taken up to
      // `waited`: the deadline errs late, by at most one wait.
      if (!deadline) deadline = now + timeout;
      left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now);
    }
    if (conn_->generation() != generation_) {
      return Reset(ResetCause::kConnection,
                   "the connection to the server was lost or re-established");
    }
    const uint64_t reported = conn_->reported();
    if (!first || reported != reported_seen_ || ++unchecked_ >= kFullCheckEvery) {
      unchecked_ = 0;
      reported_seen_ = reported;
      if (conn_->TakeSlowConsumer(sub_)) {
        return Reset(ResetCause::kSlowConsumer, "the client dropped messages (slow consumer)");
      }
      // A refused subscription (the inbox) or flow-control reply is no
      // passing fault: no reset would cure it.
      KVFOLD_RETURN_IF_ERROR(conn_->PermissionError());
    }
    if (past_deadline) return DeliveryEvent{};
    natsMsg* msg = nullptr;
    // Waits in slices of at most kRefusalCheck, so that a refusal ends it soon.
    waited = std::clamp<int64_t>(left.count(), 1, kRefusalCheck.count());
    natsStatus s = natsSubscription_NextMsg(&msg, sub_, waited);
    if (s == NATS_TIMEOUT) {
      DestroySpent();  // idle: nothing to batch with
      const auto now = Clock::now();
      // The wait took at least `waited`: the deadline errs early, if at all.
      if (!deadline) deadline = now - std::chrono::milliseconds(waited) + timeout;
      // Silence counts from the start of the first wait that found the
      // queue drained: what waited in the client's queue while a slow hook
      // or commit held the caller arrived in time, so only silence after
      // the queue is drained counts against the server.
      if (heard_) {
        last_heard_ = now - std::chrono::milliseconds(waited);
        heard_ = false;
      }
      if (now - last_heard_ > 3 * config_.heartbeat) {
        if (config_.strikes) config_.strikes->Add(ServerStrikes::kSilent);
        return Reset(ResetCause::kIdle, "no message or heartbeat for three heartbeat intervals");
      }
      past_deadline = now >= *deadline;  // returned after the reports are looked at
      continue;
    }
    if (s == NATS_SLOW_CONSUMER) {
      return Reset(ResetCause::kSlowConsumer, "the client dropped messages (slow consumer)");
    }
    if (s != NATS_OK) {
      return Reset(ResetCause::kOther, "reading the delivery failed: " + NatsError(s));
    }
    if (!KVFOLD_MUTANT("delivery-heard-never-set")) heard_ = true;
    if (config_.strikes) config_.strikes->Alive();
    // Destroyed (in a batch) after this call returns: the event copies
    // what it needs.
    struct Spender {
      OrderedDelivery* d;
      natsMsg* m;
      ~Spender() { d->Spend(m); }
    } owned{this, msg};
    // A message of the stream whose headers look like a status is data
    // (kv_subjects.h); resetting at it would reopen there forever.
    const char* reply = natsMsg_GetReply(msg);
    const std::string status = Header(msg, "Status");
    if (!IsServerStatus(reply == nullptr ? "" : reply,
                        static_cast<size_t>(natsMsg_GetDataLength(msg)), status)) {
      return MessageEvent(msg);
    }
    if (status == "100") {
      if (reply != nullptr && *reply != '\0') {
        // Flow control request: answering it lets the server send more.
        natsConnection_Publish(conn_->raw(), reply, nullptr, 0);
        continue;
      }
      const std::string stalled = Header(msg, "Nats-Consumer-Stalled");
      if (!stalled.empty()) {
        natsConnection_Publish(conn_->raw(), stalled.c_str(), nullptr, 0);
      }
      const std::string last = Header(msg, "Nats-Last-Consumer");
      if (!last.empty() && last != std::to_string(last_consumer_seq_) &&
          !KVFOLD_MUTANT("delivery-ignore-heartbeat-gap")) {
        return Reset(ResetCause::kHeartbeatGap,
                     "heartbeat says the consumer sent message " + last + " but only " +
                         std::to_string(last_consumer_seq_) + " arrived");
      }
      const std::string stream_seq = Header(msg, "Nats-Last-Stream");
      if (!stream_seq.empty()) {
        heartbeats_.stream_seq = std::strtoull(stream_seq.c_str(), nullptr, 10);
        ++heartbeats_.count;
      }
      continue;
    }
    return Reset(ResetCause::kServerStatus,
                 "the server sent status " + status + " " + Header(msg, "Description"));
  }
}

// A message of the bucket's stream, checked: JetStream metadata, the next
// consumer sequence, a subject of the bucket.
StatusOr<DeliveryEvent> OrderedDelivery::MessageEvent(natsMsg* msg) {
  const char* reply = natsMsg_GetReply(msg);
  auto ack = ParseAckReply(reply == nullptr ? "" : reply);
  if (!ack) {
    return Status::Corruption(std::string("delivery message has no JetStream "
                                          "metadata (reply \"") +
                              (reply ? reply : "") + "\")");
  }
  if (ack->consumer_seq != last_consumer_seq_ + 1 && !KVFOLD_MUTANT("delivery-ignore-gap")) {
    return Reset(ResetCause::kConsumerGap, "consumer sequence jumped from " +
                                               std::to_string(last_consumer_seq_) + " to " +
                                               std::to_string(ack->consumer_seq));
  }
  last_consumer_seq_ = ack->consumer_seq;
  auto key = KeyOfSubject(config_.bucket, natsMsg_GetSubject(msg));
  if (!key) {
    return Status::Corruption(std::string("message subject ") + natsMsg_GetSubject(msg) +
                              " is not in bucket " + config_.bucket);
  }
  DeliveryEvent ev;
  ev.kind = DeliveryEvent::Kind::kMessage;
  ev.message.key = std::string(*key);
  ev.message.seq = ack->stream_seq;
  ev.message.pending = ack->pending;
  ev.message.time_ns = ack->time_ns;
  ev.message.op = OpOfHeaders(Header(msg, "KV-Operation"), Header(msg, "Nats-Marker-Reason"));
  if (ev.message.op == Op::kPut) {
    ev.message.value.assign(natsMsg_GetData(msg), static_cast<size_t>(natsMsg_GetDataLength(msg)));
    ev.message.expires_ns = core::MessageDeadlineNs(ack->time_ns, Header(msg, "Nats-TTL"));
  }
  return ev;
}

}  // namespace kvfold::nats
