// BucketSource over a real NATS server.

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/json_fields.h"
#include "core/marker_window.h"
#include "core/mutation.h"
#include "kvfold/connection.h"
#include "nats/delta_delivery.h"
#include "nats/kv_subjects.h"
#include "nats/nats_connection.h"
#include "nats/ordered_delivery.h"
#include "nats/server_strikes.h"
#include "nats/stored_message.h"
#include "nats/stranded_consumers.h"
#include "nats/stream_quorum.h"

namespace kvfold {
namespace {

using nlohmann::json;

// A key or token nothing writes, for checks of the credentials' rights.
constexpr char kAccessCheckKey[] = "kvfold-access-check";

// A 503 or a timeout: JetStream cannot answer now (a cluster electing a
// leader). Not "no responders" right after the stream answered: that is a
// missing JetStream API import, a refusal.
bool PassingOutage(const Status& s) {
  return s.IsUnavailable() && s.message().find("no responders") == std::string::npos;
}

class NatsBucket final : public BucketSource {
 public:
  NatsBucket(std::shared_ptr<nats::NatsConnection> conn, ConnectOptions options, std::string bucket)
      : conn_(std::move(conn)),
        options_(std::move(options)),
        bucket_(std::move(bucket)),
        stream_(nats::StreamName(bucket_)) {}

  // Consumers stranded on a server this bucket moved off, or that could
  // not answer, get one last try on the current one, even within a wait an
  // unanswered round earned: closing may then take one request timeout
  // more. Best effort: the server's inactive threshold is what remains.
  // Deliveries still open hold the list on, but no one asks it again.
  ~NatsBucket() override {
    if (!KVFOLD_MUTANT("bucket-close-within-wait")) stranded_->Rearm();
    DeleteStranded();
  }

  const std::string& bucket() const override { return bucket_; }

  std::string TakeMoveNotice() override { return std::exchange(moved_, std::string()); }

  // For OpenNatsBucket: the connection now, and how many servers are listed.
  const std::shared_ptr<nats::NatsConnection>& connection() const { return conn_; }
  size_t listed() const {
    return static_cast<size_t>(std::count(options_.url.begin(), options_.url.end(), ',')) + 1;
  }
  // Moves to another server of the list at once (REQUIRES: listed() > 1).
  Status MoveNow(const std::string& why) { return MoveOff(why); }

  void NoteLaggingView() override { strikes_->Add(nats::ServerStrikes::kLagging); }

  StatusOr<StreamState> ReadStream() override {
    return Served([this] { return ReadStreamHere(); });
  }

  StatusOr<std::unique_ptr<Delivery>> Open(const DeliveryStart& start,
                                           const Scope& scope) override {
    return Served([&]() -> StatusOr<std::unique_ptr<Delivery>> {
      if (start.from_seq) {
        // A short delta is read from the store and the consumer starts
        // past the head (delta_delivery.h: creating one from a sequence
        // the stream holds costs time in proportion to the stream).
        auto state = ReadStreamHere();
        if (!state.ok()) return state.status();
        const uint64_t from = std::max<uint64_t>(*start.from_seq, 1);
        if (state->last_seq >= from &&
            state->last_seq - from < nats::DeltaDelivery::kMaxSequences) {
          // The consumers it opens hold what they need, not this bucket.
          auto config = std::make_shared<nats::OrderedDeliveryConfig>(
              OrderedConfig(start, scope, /*headers_only=*/false));
          auto multi = std::make_shared<bool>(multi_filter_);
          auto open = [conn = conn_, config,
                       multi](uint64_t seq) -> StatusOr<std::unique_ptr<Delivery>> {
            nats::OrderedDeliveryConfig c = *config;
            c.start = DeliveryStart{seq};
            auto d = nats::OrderedDelivery::Open(conn, std::move(c), multi.get());
            if (!d.ok()) return d.status();
            return std::unique_ptr<Delivery>(std::move(d).value());
          };
          auto d = nats::DeltaDelivery::Open(
              conn_, nats::DeltaDelivery::Stream{bucket_, state->created, state->last_seq}, from,
              std::move(open), strikes_);
          if (!d.ok()) return d.status();
          return std::unique_ptr<Delivery>(std::move(d).value());
        }
      }
      auto d = OpenOrdered(start, scope, /*headers_only=*/false);
      if (!d.ok()) return d.status();
      return std::unique_ptr<Delivery>(std::move(d).value());
    });
  }

  StatusOr<std::optional<uint64_t>> FirstRetainedInScope(const Scope& scope,
                                                         uint64_t from_seq) override {
    std::optional<uint64_t> first;
    for (const std::string& filter : nats::ScopeFilters(bucket_, scope)) {
      auto reply = conn_->ApiRequest("STREAM.MSG.GET." + stream_,
                                     json{{"seq", from_seq}, {"next_by_subj", filter}});
      if (!reply.ok()) {
        if (nats::IsNoMessageFound(reply.status())) continue;
        return reply.status().WithContext("looking for messages of " + filter + " from " +
                                          std::to_string(from_seq));
      }
      const json& msg = (*reply)["message"];
      const uint64_t seq = msg.is_object() && msg.contains("seq") && msg["seq"].is_number_unsigned()
                               ? msg["seq"].get<uint64_t>()
                               : 0;
      if (seq < from_seq) {
        return Status::Corruption("STREAM.MSG.GET on " + stream_ + " from " +
                                  std::to_string(from_seq) + " answered sequence " +
                                  std::to_string(seq));
      }
      if (!first || seq < *first) first = seq;
    }
    return first;
  }

  StatusOr<std::optional<BucketMessage>> LastOfKey(const std::string& key) override {
    auto reply = conn_->ApiRequest("STREAM.MSG.GET." + stream_,
                                   json{{"last_by_subj", nats::SubjectPrefix(bucket_) + key}});
    if (!reply.ok()) {
      if (nats::IsNoMessageFound(reply.status())) return std::optional<BucketMessage>();
      return reply.status().WithContext("reading the last message of key " + key);
    }
    const auto message = reply->find("message");
    auto m = nats::MessageOfGetReply(bucket_, message == reply->end() ? json() : *message,
                                     !KVFOLD_MUTANT("last-of-key-ignore-marker"));
    if (!m.ok()) return m.status().WithContext("reading the last message of key " + key);
    if (m->key != key) {
      return Status::Corruption("STREAM.MSG.GET on " + stream_ + " for key " + key +
                                " answered key " + m->key);
    }
    return std::optional<BucketMessage>(std::move(m).value());
  }

  Status ListKeys(const Scope& scope, const std::function<Status(std::string_view, uint64_t)>& fn,
                  uint64_t* last_seq) override {
    // The stream's last sequence is read before the listing starts: every
    // message at or below it is reflected in what the listing delivers.
    auto state = ReadStream();
    if (!state.ok()) return state.status();
    *last_seq = state->last_seq;
    if (state->last_seq == 0) return Status::OK();
    auto d = OpenOrdered(DeliveryStart{}, scope, /*headers_only=*/true);
    if (!d.ok()) return d.status();
    // The listing is complete once nothing the filters match is retained
    // in (received, last_seq]: asked of the store, not of consumer counters.
    uint64_t received = 0;
    bool idle = false;
    while (true) {
      auto ev = (*d)->Next(std::chrono::milliseconds(idle ? 50 : 200));
      if (!ev.ok()) return ev.status();
      if (ev->kind == DeliveryEvent::Kind::kReset) {
        return Status::Unavailable("key listing of bucket " + bucket_ + " broke: " + ev->reason);
      }
      if (ev->kind == DeliveryEvent::Kind::kMessage) {
        const BucketMessage& m = ev->message;
        received = std::max(received, m.seq);
        if (m.op == Op::kPut && scope.Contains(m.key)) {
          KVFOLD_RETURN_IF_ERROR(fn(m.key, m.seq));
        }
        if (m.pending != 0 && m.seq < *last_seq) continue;
      }
      if (received >= *last_seq) return Status::OK();
      auto next = FirstRetainedInScope(scope, received + 1);
      if (!next.ok()) return next.status();
      if (!*next || **next > *last_seq) return Status::OK();
      idle = true;  // still on its way: wait for it
    }
  }

 private:
  StatusOr<StreamState> ReadStreamHere() {
    auto reply = conn_->ApiRequest("STREAM.INFO." + stream_, nullptr);
    if (!reply.ok()) {
      if (reply.status().IsNotFound()) {
        return Status::NotFound("bucket " + bucket_ + " does not exist on " + conn_->url() +
                                " (no stream " + stream_ + ")");
      }
      return reply.status();
    }
    const json& j = *reply;
    const std::string no_quorum = nats::LeaderWithoutQuorum(j);
    if (!no_quorum.empty()) {
      return Status::Unavailable("stream " + stream_ + " as server " + conn_->ConnectedServer() +
                                 " answers for it: " + no_quorum);
    }
    const auto cfg = j.find("config");
    const auto st = j.find("state");
    StreamState out;
    std::string discard = "old";
    if (cfg == j.end() || st == j.end() ||
        !core::ReadJsonField(j, "created", &out.created, /*required=*/true) ||
        !core::ReadJsonField(*st, "first_seq", &out.first_seq) ||
        !core::ReadJsonField(*st, "last_seq", &out.last_seq) ||
        !core::ReadJsonField(*st, "messages", &out.messages) ||
        !core::ReadJsonField(*cfg, "max_msgs", &out.max_msgs) ||
        !core::ReadJsonField(*cfg, "max_bytes", &out.max_bytes) ||
        !core::ReadJsonField(*cfg, "max_age", &out.max_age_ns) ||
        !core::ReadJsonField(*cfg, "max_msgs_per_subject", &out.history) ||
        !core::ReadJsonField(*cfg, "discard", &discard) ||
        !core::ReadJsonField(*cfg, "allow_msg_ttl", &out.allow_msg_ttl) ||
        !core::ReadJsonField(*cfg, "subject_delete_marker_ttl", &out.marker_ttl_ns)) {
      return Status::Corruption(
          "stream info for " + stream_ +
          " lacks config, state or created, or has a field of the wrong type");
    }
    out.discard_new = discard == "new";
    // The server's clock (2.10+), for the marker window. One it cannot
    // read counts as unknown: no window then passes (a bucket without
    // limit markers does not use it).
    std::string ts;
    if (core::ReadJsonField(j, "ts", &ts) && !ts.empty()) {
      out.server_time_ns = core::ParseApiTimeNs(ts).value_or(0);
    }
    return out;
  }

  nats::OrderedDeliveryConfig OrderedConfig(const DeliveryStart& start, const Scope& scope,
                                            bool headers_only) const {
    nats::OrderedDeliveryConfig cfg;
    cfg.bucket = bucket_;
    cfg.start = start;
    cfg.filters = nats::ScopeFilters(bucket_, scope);
    cfg.headers_only = headers_only;
    cfg.strikes = strikes_;
    cfg.stranded = stranded_;
    return cfg;
  }

  StatusOr<std::unique_ptr<nats::OrderedDelivery>> OpenOrdered(const DeliveryStart& start,
                                                               const Scope& scope,
                                                               bool headers_only) {
    return nats::OrderedDelivery::Open(conn_, OrderedConfig(start, scope, headers_only),
                                       &multi_filter_);
  }

  // Runs `call` (a stream read or a delivery's opening) on the connected
  // server, counting what it could not answer (ServerStrikes). A server
  // with kMoveAt strikes is left for another of the list, before the call
  // or after it failed, and a failed call is made once more there: the
  // watch goes on without waiting out a backoff. nats.c alone would stay,
  // as its connection is fine.
  template <typename Call>
  auto Served(Call call) -> decltype(call()) {
    const bool listed = options_.url.find(',') != std::string::npos;
    if (listed && strikes_->ShouldMove()) {
      (void)MoveOff("a delivery went silent, or its view of the stream lagged");
    }
    // The last call here was answered: a good time to delete what was
    // stranded. Before the call, not after it: a stalled request must not
    // come between a stream read (or a delivery's opening) and its use.
    if (answered_) DeleteStranded();
    auto r = call();
    answered_ = r.ok();
    if (r.ok() || !r.status().IsUnavailable()) return r;
    strikes_->Add(nats::ServerStrikes::kUnanswered);
    if (!listed || !strikes_->ShouldMove()) return r;
    Status moved = MoveOff(r.status().message());
    if (!moved.ok()) return r.status().WithContext(moved.message());
    r = call();
    answered_ = r.ok();
    if (!r.ok() && r.status().IsUnavailable()) strikes_->Add(nats::ServerStrikes::kUnanswered);
    return r;
  }

  void DeleteStranded() {
    if (KVFOLD_MUTANT("bucket-keep-stranded-consumers")) return;
    (void)stranded_->DeleteHeld(
        nats::StrandedConsumers::Clock::now(),
        [this](const std::string& stream, const std::string& consumer) {
          return conn_->ApiRequest("CONSUMER.DELETE." + stream + "." + consumer, nullptr).status();
        });
  }

  // Connects to another server of the list (REQUIRES: several), those
  // left before last, and says so in moved_. Unavailable when none other
  // answers (the current connection stays: it reconnects by itself).
  Status MoveOff(const std::string& why) {
    const std::string from = conn_->ConnectedServer();
    const std::string named = from.empty() ? "the server (disconnected)" : "server " + from;
    // Servers left before are tried after the rest, the latest last: a
    // move goes round the list instead of back to where it came from.
    if (!from.empty()) {
      std::erase(left_, from);
      left_.push_back(from);
    }
    auto moved = nats::NatsConnection::Connect(options_, left_);
    // Staying: a fresh count, so a failed move is not tried again on every
    // call (each try may wait out every other server's connect timeout).
    if (!moved.ok() || (!from.empty() && (*moved)->ConnectedServer() == from)) strikes_->Clear();
    if (!moved.ok()) {
      return Status::Unavailable(named + " is failing and moving to another server of the list " +
                                 "failed: " + moved.status().message());
    }
    if (!from.empty() && (*moved)->ConnectedServer() == from) {
      return Status::Unavailable(named + " is failing and no other server of the list answered");
    }
    conn_ = std::move(moved).value();
    // A fresh count: deliveries still open on the old server keep the old.
    strikes_ = std::make_shared<nats::ServerStrikes>();
    stranded_->Rearm();
    answered_ = false;  // until this server answers
    moved_ = named + " is failing (" + why + "): moved to " + conn_->ConnectedServer();
    return Status::OK();
  }

  std::shared_ptr<nats::NatsConnection> conn_;
  ConnectOptions options_;
  std::string bucket_;
  std::string stream_;
  bool multi_filter_ = true;  // until a server shows it ignores filter_subjects
  std::shared_ptr<nats::ServerStrikes> strikes_ = std::make_shared<nats::ServerStrikes>();
  std::shared_ptr<nats::StrandedConsumers> stranded_ = std::make_shared<nats::StrandedConsumers>();
  bool answered_ = false;          // the last Served call succeeded
  std::string moved_;              // the last move, until TakeMoveNotice
  std::vector<std::string> left_;  // servers moved off, the latest last
};

}  // namespace

Status ValidateBucketName(const std::string& bucket) {
  if (bucket.empty()) return Status::InvalidArgument("bucket name is empty");
  for (char c : bucket) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) {
      return Status::InvalidArgument("bucket name \"" + bucket + "\" has character '" +
                                     std::string(1, c) + "'; allowed are [-_a-zA-Z0-9]");
    }
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<BucketSource>> OpenNatsBucket(const ConnectOptions& options,
                                                       const std::string& bucket) {
  KVFOLD_RETURN_IF_ERROR(ValidateBucketName(bucket));
  auto conn = nats::NatsConnection::Connect(options);
  if (!conn.ok()) return conn.status();
  auto source = std::make_unique<NatsBucket>(*conn, options, bucket);
  // Fail early and clearly when the bucket is missing. Given a list, a
  // server that cannot serve it now (cut off from its cluster) is left for
  // each of the others in turn before giving up.
  auto state = source->ReadStream();
  for (size_t tried = 1; !state.ok() && state.status().IsUnavailable() && tried < source->listed();
       ++tried) {
    if (!source->MoveNow(state.status().message()).ok()) break;
    state = source->ReadStream();
  }
  if (!state.ok()) return state.status();
  // A move's notice stays for the watch to log when it starts.
  const std::shared_ptr<nats::NatsConnection>& conn_now = source->connection();
  // ... and when the credentials lack a right the watch or a repair needs
  // later (a single message read, a consumer's deletion, a flow-control
  // reply): the server would refuse it only then. Reading a key nobody
  // writes, deleting a consumer that does not exist and replying to a
  // flow-control subject no consumer uses change nothing. A server that
  // cannot answer them now (a cluster electing a leader: 503) has not
  // refused them: the watch meets that state anyway and retries it.
  const std::string stream = nats::StreamName(bucket);
  auto read = conn_now->LastMessage(stream, nats::SubjectPrefix(bucket) + kAccessCheckKey);
  if (!read.ok() && !PassingOutage(read.status())) {
    return read.status().WithContext("bucket " + bucket);
  }
  auto deleted = conn_now->ApiRequest("CONSUMER.DELETE." + stream + "." + kAccessCheckKey, nullptr);
  if (!deleted.ok() && !deleted.status().IsNotFound() && !PassingOutage(deleted.status())) {
    return deleted.status().WithContext("bucket " + bucket);
  }
  KVFOLD_RETURN_IF_ERROR(conn_now->CheckCorePublish("$JS.FC." + stream + "." + kAccessCheckKey)
                             .WithContext("bucket " + bucket));
  return std::unique_ptr<BucketSource>(std::move(source));
}

}  // namespace kvfold
