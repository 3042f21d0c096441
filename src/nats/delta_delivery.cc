#include "nats/delta_delivery.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "core/json_fields.h"
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

}  // namespace

DeltaDelivery::DeltaDelivery(std::shared_ptr<NatsConnection> conn, Stream stream, uint64_t from,
                             OpenConsumer open, std::shared_ptr<ServerStrikes> strikes)
    : conn_(std::move(conn)),
      stream_(std::move(stream)),
      open_(std::move(open)),
      strikes_(std::move(strikes)),
      subject_("$JS.API.STREAM.MSG.GET." + StreamName(stream_.bucket)),
      request_tail_(",\"next_by_subj\":\"" + SubjectPrefix(stream_.bucket) + ">\"}"),
      next_(from),
      asked_(from),
      verified_(from - 1) {}

StatusOr<std::unique_ptr<DeltaDelivery>> DeltaDelivery::Open(
    std::shared_ptr<NatsConnection> conn, Stream stream, uint64_t from, OpenConsumer open,
    std::shared_ptr<ServerStrikes> strikes) {
  if (from == 0 || from > stream.head) {
    return Status::InvalidArgument("a delta read needs 0 < from <= head (from " +
                                   std::to_string(from) + ", head " + std::to_string(stream.head) +
                                   ")");
  }
  std::unique_ptr<DeltaDelivery> d(new DeltaDelivery(std::move(conn), std::move(stream), from,
                                                     std::move(open), std::move(strikes)));
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
  const uint64_t tail_from = d->stream_.head + (KVFOLD_MUTANT("delta-tail-past-head") ? 2 : 1);
  auto tail = d->open_(tail_from);
  if (!tail.ok()) return tail.status();
  d->tail_ = std::move(tail).value();
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
  while (asked_ <= stream_.head && asked_ - next_ < kWindow) {
    const std::string body = "{\"seq\":" + std::to_string(asked_) + request_tail_;
    const std::string reply = inbox_ + "." + std::to_string(asked_);
    const natsStatus s = natsConnection_PublishRequest(
        conn_->raw(), subject_.c_str(), reply.c_str(), body.data(), static_cast<int>(body.size()));
    if (s != NATS_OK) {
      return Status::Unavailable("asking for sequence " + std::to_string(asked_) + ": " +
                                 NatsError(s));
    }
    asked_at_.emplace(asked_, Clock::now());
    ++asked_;
  }
  return Status::OK();
}

std::optional<uint64_t> DeltaDelivery::FirstMissing() const {
  for (const auto& [seq, at] : asked_at_) {
    if (seq >= next_ && arrived_.count(seq) == 0) return seq;
  }
  return std::nullopt;
}

void DeltaDelivery::DropBelowNext() {
  for (auto it = arrived_.begin(); it != arrived_.end() && it->first < next_;) {
    natsMsg_Destroy(it->second);
    it = arrived_.erase(it);
  }
  asked_at_.erase(asked_at_.begin(), asked_at_.lower_bound(next_));
  asked_ = std::max(asked_, next_);
  verified_ = std::max(verified_, next_ - 1);
}

std::optional<DeliveryEvent> DeltaDelivery::Verify() {
  if (KVFOLD_MUTANT("delta-verify-never")) return std::nullopt;
  const std::string stream = StreamName(stream_.bucket);
  auto info = conn_->ApiRequest("STREAM.INFO." + stream, nullptr);
  if (!info.ok()) {
    if (info.status().IsNotFound()) {
      return Reset(ResetCause::kOther,
                   "stream " + stream + " was deleted while its delta was read");
    }
    return Reset(ResetCause::kServerStatus,
                 "reading stream " + stream + " after its delta: " + info.status().message());
  }
  std::string created;
  if (!core::ReadJsonField(*info, "created", &created, true)) {
    return Reset(ResetCause::kServerStatus, "stream info for " + stream + " lacks created");
  }
  if (created != stream_.created) {
    return Reset(ResetCause::kOther,
                 "stream " + stream + " was re-created while its delta was read");
  }
  return std::nullopt;
}

DeltaDelivery::Reply DeltaDelivery::Read(uint64_t seq, natsMsg* msg) {
  Reply r;
  const std::string what =
      "reading from sequence " + std::to_string(seq) + " of bucket " + stream_.bucket;
  const char* status = nullptr;
  if (natsMsgHeader_Get(msg, "Status", &status) == NATS_OK && status != nullptr &&
      natsMsg_GetDataLength(msg) == 0) {
    // No responders (503): JetStream is not answering for the stream here.
    r.event = Reset(ResetCause::kServerStatus, what + ": the server answered status " + status);
    return r;
  }
  auto j = NatsConnection::ParseApiReply(subject_, msg);
  if (!j.ok()) {
    if (IsNoMessageFound(j.status())) {
      r.kind = Reply::Kind::kUnproven;
    } else {
      r.event = Reset(ResetCause::kServerStatus, what + ": " + j.status().message());
    }
    return r;
  }
  const auto message = j->find("message");
  auto m = MessageOfGetReply(stream_.bucket, message == j->end() ? nlohmann::json() : *message);
  if (!m.ok() || m->seq < seq) {
    // Not what was asked for: a fault of the server, not of the stream.
    r.event = Reset(ResetCause::kServerStatus,
                    what + ": " +
                        (m.ok() ? "the server answered sequence " + std::to_string(m->seq)
                                : m.status().message()));
    return r;
  }
  r.kind = Reply::Kind::kMessage;
  r.event.kind = DeliveryEvent::Kind::kMessage;
  r.event.message = std::move(m).value();
  return r;
}

StatusOr<DeliveryEvent> DeltaDelivery::Next(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (next_ <= stream_.head) {
    if (conn_->generation() != generation_) {
      return Reset(ResetCause::kConnection,
                   "the connection to the server was lost or re-established");
    }
    if (conn_->TakeSlowConsumer(sub_)) {
      return Reset(ResetCause::kSlowConsumer, "the client dropped replies (slow consumer)");
    }
    KVFOLD_RETURN_IF_ERROR(conn_->PermissionError());
    if (Status asked = Ask(); !asked.ok()) return Reset(ResetCause::kConnection, asked.message());
    const std::optional<uint64_t> missing = FirstMissing();
    if (next_ > verified_ && !missing) {
      // Every reply asked for is in: a stream read after them shows whose.
      if (auto reset = Verify()) return *reset;
      verified_ = KVFOLD_MUTANT("delta-verify-first-window-only") ? stream_.head : asked_ - 1;
      continue;
    }
    if (next_ <= verified_) {
      auto it = arrived_.find(next_);
      if (it != arrived_.end()) {
        Reply r = Read(next_, it->second);
        natsMsg_Destroy(it->second);
        arrived_.erase(it);
        switch (r.kind) {
          case Reply::Kind::kReset:
            return r.event;
          case Reply::Kind::kUnproven: {
            if (KVFOLD_MUTANT("delta-skip-unproven")) {
              next_ = stream_.head + 1;
              DropBelowNext();
              continue;
            }
            // From here the store proves nothing: a consumer reads on.
            auto consumer = open_(next_);
            if (!consumer.ok()) {
              // The next delivery's opening meets what stands (a stream
              // deleted since, a server gone) and says it as it should.
              if (consumer.status().IsPermissionDenied()) return consumer.status();
              return Reset(ResetCause::kOther, "opening a consumer from sequence " +
                                                   std::to_string(next_) + ": " +
                                                   consumer.status().message());
            }
            tail_ = std::move(consumer).value();
            next_ = stream_.head + 1;
            DropBelowNext();
            continue;
          }
          case Reply::Kind::kMessage: {
            // Nothing is stored between the sequence asked and this one.
            const uint64_t seq = r.event.message.seq;
            next_ = std::min(seq, stream_.head) + 1;
            DropBelowNext();
            if (seq > stream_.head) continue;  // the tail brings it
            // An upper bound of what is left here; the tail may bring more.
            r.event.message.pending = stream_.head - seq;
            return r.event;
          }
        }
      }
    }
    if (!missing) continue;
    // Judged only once nothing is queued: replies that waited while the
    // caller was busy (a slow hook, a commit) came in time.
    const auto unanswered_until = asked_at_.at(*missing) + conn_->timeout();
    auto now = Clock::now();
    const auto wait = std::clamp<Clock::duration>(std::min(deadline, unanswered_until) - now,
                                                  std::chrono::milliseconds(1), kRefusalCheck);
    natsMsg* msg = nullptr;
    const natsStatus s = natsSubscription_NextMsg(
        &msg, sub_, std::chrono::duration_cast<std::chrono::milliseconds>(wait).count());
    if (s == NATS_OK) {
      // The reply's subject names the sequence it answers.
      const std::string_view subject = natsMsg_GetSubject(msg);
      uint64_t seq = 0;
      const char* at = subject.data() + std::min(subject.size(), inbox_.size() + 1);
      const auto parsed = std::from_chars(at, subject.data() + subject.size(), seq);
      if (parsed.ec != std::errc() || seq < next_ || asked_at_.count(seq) == 0 ||
          !arrived_.emplace(seq, msg).second) {
        natsMsg_Destroy(msg);  // not one asked for now
      }
      continue;
    }
    if (s == NATS_SLOW_CONSUMER) {
      return Reset(ResetCause::kSlowConsumer, "the client dropped replies (slow consumer)");
    }
    if (s != NATS_TIMEOUT) {
      return Reset(ResetCause::kOther, "reading a reply failed: " + NatsError(s));
    }
    now = Clock::now();
    if (now >= unanswered_until) {
      if (strikes_) strikes_->Add(ServerStrikes::kUnanswered);
      return Reset(ResetCause::kIdle, "no answer to the read from sequence " +
                                          std::to_string(*missing) + " within " +
                                          std::to_string(conn_->timeout().count()) + " ms");
    }
    if (now >= deadline) return DeliveryEvent{};
  }
  // Every sequence through the head is accounted for: nothing more here.
  Unsubscribe();
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return tail_->Next(std::max(left, std::chrono::milliseconds(0)));
}

}  // namespace kvfold::nats
