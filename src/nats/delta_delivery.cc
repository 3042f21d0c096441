#include "nats/delta_delivery.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "core/mutation.h"
#include "nats/kv_subjects.h"
#include "nats/stored_message.h"

namespace kvfold::nats {
namespace {

// The longest a wait for a reply goes without looking for a permission
// refusal or a lost connection.
constexpr std::chrono::milliseconds kRefusalCheck{250};

DeliveryEvent Reset(ResetCause cause, std::string reason) {
  DeliveryEvent ev;
  ev.kind = DeliveryEvent::Kind::kReset;
  ev.reason = std::move(reason);
  ev.cause = cause;
  return ev;
}

// STREAM.MSG.GET found no message at the sequence (err_code 10037): it was
// removed, or never stored in this stream.
bool IsNoMessageFound(const Status& s) {
  return s.IsNotFound() && s.message().find("err_code 10037") != std::string::npos;
}

}  // namespace

DeltaDelivery::DeltaDelivery(std::shared_ptr<NatsConnection> conn, std::string bucket,
                             uint64_t from, uint64_t head, std::unique_ptr<Delivery> tail)
    : conn_(std::move(conn)),
      bucket_(std::move(bucket)),
      subject_("$JS.API.STREAM.MSG.GET." + StreamName(bucket_)),
      next_(from),
      asked_(from),
      head_(head),
      tail_(std::move(tail)) {}

StatusOr<std::unique_ptr<DeltaDelivery>> DeltaDelivery::Open(std::shared_ptr<NatsConnection> conn,
                                                             std::string bucket, uint64_t from,
                                                             uint64_t head,
                                                             std::unique_ptr<Delivery> tail) {
  if (from == 0 || from > head) {
    return Status::InvalidArgument("a delta read needs 0 < from <= head (from " +
                                   std::to_string(from) + ", head " + std::to_string(head) + ")");
  }
  std::unique_ptr<DeltaDelivery> d(
      new DeltaDelivery(std::move(conn), std::move(bucket), from, head, std::move(tail)));
  // Read before subscribing, as for a consumer: a reconnect during the
  // set-up shows up as a reset.
  d->generation_ = d->conn_->generation();
  natsInbox* inbox = nullptr;
  natsStatus s = natsInbox_Create(&inbox);
  if (s != NATS_OK) return Status::Internal("creating an inbox: " + NatsError(s));
  d->inbox_ = inbox;
  natsInbox_Destroy(inbox);
  s = natsConnection_SubscribeSync(&d->sub_, d->conn_->raw(), (d->inbox_ + ".*").c_str());
  if (s != NATS_OK) {
    d->sub_ = nullptr;
    return Status::Unavailable("subscribing to an inbox for reads: " + NatsError(s));
  }
  // At most kWindow replies wait here; none may be dropped.
  natsSubscription_SetPendingLimits(d->sub_, -1, -1);
  return d;
}

DeltaDelivery::~DeltaDelivery() {
  for (auto& [seq, msg] : arrived_) natsMsg_Destroy(msg);
  Unsubscribe();
}

void DeltaDelivery::Unsubscribe() {
  if (sub_ == nullptr) return;
  natsSubscription_Unsubscribe(sub_);
  conn_->TakeSlowConsumer(sub_);
  conn_->DestroySubscription(sub_);
  sub_ = nullptr;
}

Status DeltaDelivery::Ask() {
  while (asked_ <= head_ && asked_ - next_ < kWindow) {
    const std::string body = "{\"seq\":" + std::to_string(asked_) + "}";
    const std::string reply = inbox_ + "." + std::to_string(asked_);
    const natsStatus s = natsConnection_PublishRequest(conn_->raw(), subject_.c_str(),
                                                       reply.c_str(), body.data(),
                                                       static_cast<int>(body.size()));
    if (s != NATS_OK) return Status::Unavailable("asking for sequence " + std::to_string(asked_) +
                                                 ": " + NatsError(s));
    asked_at_.push_back(Clock::now());
    ++asked_;
  }
  return Status::OK();
}

StatusOr<std::optional<DeliveryEvent>> DeltaDelivery::Answer(natsMsg* reply) {
  const std::string what = "reading sequence " + std::to_string(next_) + " of bucket " + bucket_;
  const char* status = nullptr;
  if (natsMsgHeader_Get(reply, "Status", &status) == NATS_OK && status != nullptr &&
      natsMsg_GetDataLength(reply) == 0) {
    // No responders (503): JetStream is not answering for the stream here.
    return std::optional<DeliveryEvent>(
        Reset(ResetCause::kServerStatus, what + ": the server answered status " + status));
  }
  auto j = NatsConnection::ParseApiReply(subject_, reply);
  if (!j.ok()) {
    if (IsNoMessageFound(j.status()) && !KVFOLD_MUTANT("delta-stop-at-missing-sequence")) {
      return std::optional<DeliveryEvent>();  // removed: as a consumer skips it
    }
    if (j.status().IsCorruption()) return j.status().WithContext(what);
    return std::optional<DeliveryEvent>(
        Reset(ResetCause::kServerStatus, what + ": " + j.status().message()));
  }
  const auto message = j->find("message");
  auto m = MessageOfGetReply(bucket_, message == j->end() ? nlohmann::json() : *message);
  if (!m.ok()) return m.status().WithContext(what);
  if (m->seq != next_) {
    return Status::Corruption(what + ": the server answered sequence " + std::to_string(m->seq));
  }
  // An upper bound of what is left here; the tail may bring more.
  m->pending = head_ - m->seq;
  DeliveryEvent ev;
  ev.kind = DeliveryEvent::Kind::kMessage;
  ev.message = std::move(m).value();
  return std::optional<DeliveryEvent>(std::move(ev));
}

StatusOr<DeliveryEvent> DeltaDelivery::Next(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (next_ <= head_) {
    if (conn_->generation() != generation_) {
      return Reset(ResetCause::kConnection,
                   "the connection to the server was lost or re-established");
    }
    if (conn_->TakeSlowConsumer(sub_)) {
      return Reset(ResetCause::kSlowConsumer, "the client dropped replies (slow consumer)");
    }
    KVFOLD_RETURN_IF_ERROR(conn_->PermissionError());
    Status asked = Ask();
    if (!asked.ok()) return Reset(ResetCause::kConnection, asked.message());
    if (auto it = arrived_.find(next_); it != arrived_.end()) {
      natsMsg* reply = it->second;
      arrived_.erase(it);
      auto ev = Answer(reply);
      natsMsg_Destroy(reply);
      if (!ev.ok()) return ev.status();
      if (*ev && (*ev)->kind == DeliveryEvent::Kind::kReset) return **ev;
      ++next_;
      asked_at_.pop_front();
      if (*ev) return **ev;
      continue;
    }
    const auto now = Clock::now();
    const auto unanswered_until = asked_at_.front() + conn_->timeout();
    if (now >= unanswered_until) {
      return Reset(ResetCause::kIdle, "no answer to the read of sequence " +
                                          std::to_string(next_) + " within " +
                                          std::to_string(conn_->timeout().count()) + " ms");
    }
    if (now >= deadline) return DeliveryEvent{};
    const auto wait = std::min({deadline - now, unanswered_until - now,
                                Clock::duration(kRefusalCheck)});
    natsMsg* msg = nullptr;
    const natsStatus s = natsSubscription_NextMsg(
        &msg, sub_,
        std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(wait).count()));
    if (s == NATS_TIMEOUT) continue;
    if (s == NATS_SLOW_CONSUMER) {
      return Reset(ResetCause::kSlowConsumer, "the client dropped replies (slow consumer)");
    }
    if (s != NATS_OK) return Reset(ResetCause::kOther, "reading a reply failed: " + NatsError(s));
    // The reply's subject names the sequence it answers.
    const std::string_view subject = natsMsg_GetSubject(msg);
    uint64_t seq = 0;
    const char* tail = subject.data() + std::min(subject.size(), inbox_.size() + 1);
    const auto parsed = std::from_chars(tail, subject.data() + subject.size(), seq);
    if (parsed.ec != std::errc() || seq < next_ || seq >= asked_ || arrived_.count(seq) != 0) {
      natsMsg_Destroy(msg);  // not one asked for now
      continue;
    }
    arrived_.emplace(seq, msg);
  }
  // Every sequence through the head was answered: nothing more comes here.
  Unsubscribe();
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return tail_->Next(std::max(left, std::chrono::milliseconds(0)));
}

}  // namespace kvfold::nats
