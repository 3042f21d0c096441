#include "nats/nats_connection.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "core/base64.h"
#include "core/json_fields.h"
#include "core/mutation.h"
#include "nats/kv_subjects.h"

namespace kvfold::nats {
namespace {

// How often a request's wait looks for a refusal.
constexpr int64_t kRefusalCheckMs = 20;

std::mutex registry_mu;
uintptr_t next_callback_id = 1;

// Never destroyed: a late callback may run while the process exits.
std::unordered_map<uintptr_t, std::weak_ptr<void>>& Registry() {
  static auto* registry = new std::unordered_map<uintptr_t, std::weak_ptr<void>>();
  return *registry;
}

// `urls` (comma separated) as messages may show it: a password or token
// in a URL's user part becomes "***".
// The comma-separated parts of `list`, as written (empty ones too).
std::vector<std::string> SplitOnCommas(const std::string& list) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string Redacted(const std::string& urls) {
  std::string out;
  bool first = true;
  for (std::string one : SplitOnCommas(urls)) {
    const size_t scheme = one.find("://");
    const size_t from = scheme == std::string::npos ? 0 : scheme + 3;
    // nats.c ends the user part at the last '@' (a password may hold '/'
    // or '@').
    const size_t at = one.rfind('@');
    if (at != std::string::npos && at >= from) {
      const size_t colon = one.find(':', from);
      const size_t keep = colon != std::string::npos && colon < at ? colon + 1 : from;
      one.replace(keep, at - keep, "***");
    }
    if (!first) out += ",";
    first = false;
    out += one;
  }
  return out;
}

}  // namespace

std::string NatsError(natsStatus s) {
  std::string out = natsStatus_GetText(s);
  natsStatus last_status = NATS_OK;
  const char* last = nats_GetLastError(&last_status);
  if (last == nullptr || last_status != s) return out;
  // nats.c prefixes its detail with "(file.c:line): "; keep only the detail.
  std::string detail = last;
  if (!detail.empty() && detail.front() == '(') {
    const size_t end = detail.find("): ");
    if (end != std::string::npos) detail.erase(0, end + 3);
  }
  if (!detail.empty() && detail != out) out += " (" + detail + ")";
  return out;
}

// "host:port" of a URL ("nats://user:pw@host:port" -> "host:port"), with
// NATS's default port when it names none, as nats.c reports the server
// it is connected to.
std::string HostPort(const std::string& url) {
  size_t from = url.find("://");
  from = from == std::string::npos ? 0 : from + 3;
  const size_t at = url.rfind('@');
  if (at != std::string::npos && at >= from) from = at + 1;
  std::string host = url.substr(from, url.find('/', from) - from);
  const size_t colon = host.rfind(':');
  const size_t bracket = host.rfind(']');  // [::1] has colons of its own
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) {
    host += ":4222";
  }
  return host;
}

StatusOr<std::shared_ptr<NatsConnection>> NatsConnection::Connect(
    const ConnectOptions& options, const std::vector<std::string>& avoid) {
  std::shared_ptr<NatsConnection> c(new NatsConnection());
  c->timeout_ = options.timeout;
  c->url_ = Redacted(options.url);
  natsStatus s = natsOptions_Create(&c->opts_);
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(what + ": " + NatsError(s));
  };
  if (s != NATS_OK) return bad("creating connection options");
  natsOptions* o = c->opts_;
  // nats.c takes one URL per natsOptions_SetURL: a comma-separated list
  // there fails every connect ("No server available"), so a list goes to
  // natsOptions_SetServers, which also reconnects through it.
  std::vector<std::string> urls;
  for (std::string one : SplitOnCommas(options.url)) {
    one.erase(0, one.find_first_not_of(' '));
    one.erase(one.find_last_not_of(' ') + 1);
    if (!one.empty()) urls.push_back(std::move(one));
  }
  if (!avoid.empty()) {
    // The others first, in the order given, then those to avoid in
    // theirs: nats.c would otherwise pick one at random.
    auto rank = [&](const std::string& u) {
      const auto at = std::find(avoid.begin(), avoid.end(), HostPort(u));
      return at == avoid.end() ? 0 : 1 + (at - avoid.begin());
    };
    std::stable_sort(urls.begin(), urls.end(),
                     [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
    natsOptions_SetNoRandomize(o, true);
  }
  std::vector<const char*> servers;
  for (const auto& u : urls) servers.push_back(u.c_str());
  s = servers.size() == 1
          ? natsOptions_SetURL(o, servers[0])
          : natsOptions_SetServers(o, servers.data(), static_cast<int>(servers.size()));
  if (s != NATS_OK) return bad("server URL \"" + c->url_ + "\"");
  natsOptions_SetName(o, options.name.c_str());
  natsOptions_SetTimeout(o, options.timeout.count());
  natsOptions_SetMaxReconnect(o, -1);
  natsOptions_SetReconnectWait(o, 500);
  {
    std::lock_guard lock(registry_mu);
    c->callback_id_ = next_callback_id++;
    Registry()[c->callback_id_] = c->state_;
  }
  void* closure = reinterpret_cast<void*>(c->callback_id_);
  natsOptions_SetDisconnectedCB(o, &NatsConnection::OnDisconnected, closure);
  natsOptions_SetReconnectedCB(o, &NatsConnection::OnReconnected, closure);
  natsOptions_SetErrorHandler(o, &NatsConnection::OnError, closure);
  if (!options.creds_file.empty() && (s = natsOptions_SetUserCredentialsFromFiles(
                                          o, options.creds_file.c_str(), nullptr)) != NATS_OK) {
    return bad("credentials file " + options.creds_file);
  }
  if (!options.user.empty() &&
      (s = natsOptions_SetUserInfo(o, options.user.c_str(), options.password.c_str())) != NATS_OK) {
    return bad("user and password");
  }
  if (!options.token.empty() && (s = natsOptions_SetToken(o, options.token.c_str())) != NATS_OK) {
    return bad("token");
  }
  const bool tls = !options.tls_ca_file.empty() || !options.tls_cert_file.empty() ||
                   !options.tls_key_file.empty();
  if (tls) {
    if ((s = natsOptions_SetSecure(o, true)) != NATS_OK) return bad("TLS");
    if (!options.tls_ca_file.empty() &&
        (s = natsOptions_LoadCATrustedCertificates(o, options.tls_ca_file.c_str())) != NATS_OK) {
      return bad("TLS CA file " + options.tls_ca_file);
    }
    if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
      return Status::InvalidArgument(
          "a TLS client certificate needs both a certificate and a key file");
    }
    if (!options.tls_cert_file.empty() &&
        (s = natsOptions_LoadCertificatesChain(o, options.tls_cert_file.c_str(),
                                               options.tls_key_file.c_str())) != NATS_OK) {
      return bad("TLS certificate " + options.tls_cert_file);
    }
  }
  if ((s = natsConnection_Connect(&c->conn_, o)) != NATS_OK) {
    return Status::Unavailable("cannot connect to " + c->url_ + ": " + NatsError(s));
  }
  return c;
}

std::string NatsConnection::ConnectedServer() const {
  char buf[256] = {0};
  if (natsConnection_GetConnectedUrl(conn_, buf, sizeof(buf)) != NATS_OK) return "";
  return HostPort(buf);
}

NatsConnection::~NatsConnection() {
  if (conn_ != nullptr) {
    natsConnection_Close(conn_);  // joins the reader thread
    for (natsSubscription* sub : retired_) natsSubscription_Destroy(sub);
    natsConnection_Destroy(conn_);
  }
  if (opts_ != nullptr) natsOptions_Destroy(opts_);
  std::lock_guard lock(registry_mu);
  Registry().erase(callback_id_);
}

std::shared_ptr<NatsConnection::CallbackState> NatsConnection::FindState(void* closure) {
  std::lock_guard lock(registry_mu);
  auto it = Registry().find(reinterpret_cast<uintptr_t>(closure));
  if (it == Registry().end()) return nullptr;
  return std::static_pointer_cast<CallbackState>(it->second.lock());
}

void NatsConnection::OnDisconnected(natsConnection*, void* closure) {
  if (auto state = FindState(closure)) state->generation.fetch_add(1);
}

void NatsConnection::OnReconnected(natsConnection*, void* closure) {
  if (auto state = FindState(closure)) state->generation.fetch_add(1);
}

void NatsConnection::OnError(natsConnection* nc, natsSubscription* sub, natsStatus err,
                             void* closure) {
  if (err == NATS_NOT_PERMITTED) {
    // The server's text names the subject: 'Permissions Violation for
    // Publish to "<subject>"' (or Subscription to).
    const char* text = nullptr;
    (void)natsConnection_GetLastError(nc, &text);
    auto state = FindState(closure);
    if (!state) return;
    {
      std::lock_guard lock(state->mu);
      if (state->refused.empty()) {
        state->refused = text != nullptr && *text != '\0' ? text : "a permission violation";
      }
    }
    state->reported.fetch_add(1, std::memory_order_release);
    return;
  }
  if (err != NATS_SLOW_CONSUMER || sub == nullptr) return;
  auto state = FindState(closure);
  if (!state) return;
  {
    std::lock_guard lock(state->mu);
    state->slow.insert(sub);
  }
  if (KVFOLD_MUTANT("slow-consumer-unreported")) return;
  state->reported.fetch_add(1, std::memory_order_release);
}

Status NatsConnection::PermissionError() const {
  // nats.c records the refusal on the connection as it reads it, before
  // the error callback runs on another thread: after a round trip it is
  // here already.
  const char* last = nullptr;
  if (natsConnection_GetLastError(conn_, &last) == NATS_NOT_PERMITTED) {
    std::lock_guard lock(state_->mu);
    if (state_->refused.empty()) {
      state_->refused = last != nullptr && *last != '\0' ? last : "a permission violation";
    }
  }
  std::lock_guard lock(state_->mu);
  if (state_->refused.empty()) return Status::OK();
  return Status::PermissionDenied(
      "the server at " + url_ + " refused this client: " + state_->refused +
      "; the credentials lack a permission kvfold needs (the permissions each role needs are in "
      "docs/operating.md, \"Permissions\")");
}

StatusOr<NatsConnection::Reply> NatsConnection::Request(
    const std::string& subject, std::string_view data,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  KVFOLD_RETURN_IF_ERROR(PermissionError());
  natsInbox* inbox = nullptr;
  natsStatus s = natsInbox_Create(&inbox);
  if (s != NATS_OK) return Status::Internal("creating a reply inbox: " + NatsError(s));
  std::unique_ptr<natsInbox, void (*)(natsInbox*)> inbox_owner(inbox, &natsInbox_Destroy);
  natsSubscription* sub = nullptr;
  s = natsConnection_SubscribeSync(&sub, conn_, inbox);
  if (s != NATS_OK) {
    return Status::Unavailable("subscribing to a reply inbox on " + url_ + ": " + NatsError(s));
  }
  struct SubOwner {
    NatsConnection* owner;
    natsSubscription* sub;
    bool replied = false;
    ~SubOwner() {
      (void)natsSubscription_Unsubscribe(sub);
      // Without a reply taken, nats.c's reader thread may still be handing
      // a late one to this subscription (DestroySubscription).
      if (replied) {
        natsSubscription_Destroy(sub);
      } else {
        owner->DestroySubscription(sub);
      }
    }
  } sub_owner{this, sub};
  natsMsg* msg = nullptr;
  s = natsMsg_Create(&msg, subject.c_str(), inbox, data.data(), static_cast<int>(data.size()));
  if (s != NATS_OK) return Status::Internal("creating a message: " + NatsError(s));
  for (const auto& [k, v] : headers) natsMsgHeader_Set(msg, k.c_str(), v.c_str());
  s = natsConnection_PublishMsg(conn_, msg);
  natsMsg_Destroy(msg);
  if (s != NATS_OK) return Reply{s, nullptr};
  // Waited for in slices: a refusal comes back as an asynchronous error,
  // never as a reply, and should end the wait at once.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Reply{NATS_TIMEOUT, nullptr};
    natsMsg* reply = nullptr;
    s = natsSubscription_NextMsg(&reply, sub,
                                 std::clamp<int64_t>(left.count(), 1, kRefusalCheckMs));
    if (s == NATS_OK) {
      const char* status = nullptr;
      const char* reply_to = natsMsg_GetReply(reply);
      if (natsMsgHeader_Get(reply, "Status", &status) == NATS_OK && status != nullptr &&
          IsServerStatus(reply_to == nullptr ? "" : reply_to,
                         static_cast<size_t>(natsMsg_GetDataLength(reply)), status) &&
          std::string_view(status) == "503") {
        natsMsg_Destroy(reply);
        sub_owner.replied = true;
        return Reply{NATS_NO_RESPONDERS, nullptr};
      }
      sub_owner.replied = true;
      return Reply{NATS_OK, reply};
    }
    if (s != NATS_TIMEOUT) return Reply{s, nullptr};
    KVFOLD_RETURN_IF_ERROR(PermissionError());
  }
}

bool NatsConnection::TakeSlowConsumer(natsSubscription* sub) {
  std::lock_guard lock(state_->mu);
  return state_->slow.erase(sub) > 0;
}

void NatsConnection::DestroySubscription(natsSubscription* sub) {
  std::vector<natsSubscription*> done;
  const bool flushed = natsConnection_FlushTimeout(conn_, 2000) == NATS_OK;
  {
    std::lock_guard lock(retired_mu_);
    retired_.push_back(sub);
    // A round trip proves the reader past everything read before it, also
    // for what earlier failed ones kept (a reader from before a reconnect
    // was joined when the new one started): all of it may go.
    if (flushed) done.swap(retired_);
  }
  for (natsSubscription* s : done) natsSubscription_Destroy(s);
}

StatusOr<nlohmann::json> NatsConnection::ApiRequest(const std::string& api,
                                                    const nlohmann::json& body) {
  const std::string subject = "$JS.API." + api;
  const std::string data = body.is_null() ? std::string() : body.dump();
  auto sent = Request(subject, data, {});
  if (!sent.ok()) return sent.status();
  const natsStatus s = sent->status;
  natsMsg* reply = sent->msg;
  if (s == NATS_NO_RESPONDERS) {
    return Status::Unavailable("JetStream is not enabled on " + url_ + " (no responders for " +
                               subject + ")");
  }
  if (s != NATS_OK) {
    return Status::Unavailable("JetStream request " + subject + " to " + url_ +
                               " failed: " + NatsError(s));
  }
  auto j = ParseApiReply(subject, reply);
  natsMsg_Destroy(reply);
  return j;
}

StatusOr<nlohmann::json> NatsConnection::ParseApiReply(const std::string& subject, natsMsg* reply) {
  std::string text(natsMsg_GetData(reply), static_cast<size_t>(natsMsg_GetDataLength(reply)));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Corruption("JetStream answered " + subject +
                              " with something that is not a JSON object");
  }
  if (j.contains("error")) {
    const auto& e = j["error"];
    int64_t code = 0, err_code = 0;
    std::string desc = "unknown error";
    (void)core::ReadJsonField(e, "code", &code);
    (void)core::ReadJsonField(e, "err_code", &err_code);
    (void)core::ReadJsonField(e, "description", &desc);
    const std::string msg = subject + ": " + desc + " (code " + std::to_string(code) +
                            ", err_code " + std::to_string(err_code) + ")";
    if (code == 404) return Status::NotFound(msg);
    if (code == 503) return Status::Unavailable(msg);
    return Status::FailedPrecondition(msg);
  }
  return j;
}

Status NatsConnection::EnsureStream(const nlohmann::json& config) {
  const std::string name = config.value("name", std::string());
  auto info = ApiRequest("STREAM.INFO." + name, nullptr);
  if (info.ok()) return Status::OK();
  if (!info.status().IsNotFound()) return info.status();
  auto created = ApiRequest("STREAM.CREATE." + name, config);
  if (created.ok()) return Status::OK();
  // Lost a creation race? Then the stream is there now.
  if (ApiRequest("STREAM.INFO." + name, nullptr).ok()) return Status::OK();
  return created.status().WithContext("creating stream " + name);
}

StatusOr<std::optional<NatsConnection::StoredMessage>> NatsConnection::LastMessage(
    const std::string& stream, const std::string& subject) {
  return GetMessage(stream, subject, nlohmann::json{{"last_by_subj", subject}});
}

StatusOr<std::optional<NatsConnection::StoredMessage>> NatsConnection::NextMessage(
    const std::string& stream, const std::string& subject, uint64_t from_seq) {
  return GetMessage(stream, subject, nlohmann::json{{"seq", from_seq}, {"next_by_subj", subject}});
}

StatusOr<std::optional<NatsConnection::StoredMessage>> NatsConnection::GetMessage(
    const std::string& stream, const std::string& subject, const nlohmann::json& query) {
  auto reply = ApiRequest("STREAM.MSG.GET." + stream, query);
  if (!reply.ok()) {
    if (reply.status().IsNotFound()) return std::optional<StoredMessage>();
    return reply.status();
  }
  std::string data64;
  StoredMessage out;
  const auto it = reply->find("message");
  if (it == reply->end() || !core::ReadJsonField(*it, "data", &data64) ||
      !core::ReadJsonField(*it, "seq", &out.seq, /*required=*/true)) {
    return Status::Corruption("a message on " + subject + " in " + stream +
                              " came back unreadable");
  }
  auto data = core::Base64Decode(data64);
  if (!data) {
    return Status::Corruption("a message on " + subject + " in " + stream +
                              " came back unreadable");
  }
  out.data = std::move(*data);
  return std::optional<StoredMessage>(std::move(out));
}

StatusOr<uint64_t> NatsConnection::Publish(
    const std::string& subject, std::string_view data,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  auto sent = Request(subject, data, headers);
  if (!sent.ok()) return sent.status();
  const natsStatus s = sent->status;
  natsMsg* reply = sent->msg;
  if (s == NATS_NO_RESPONDERS) {
    return Status::Unavailable("no stream stores subject " + subject + " on " + url_);
  }
  if (s != NATS_OK) {
    return Status::Unavailable("publishing to " + subject + " failed: " + NatsError(s));
  }
  std::string text(natsMsg_GetData(reply), static_cast<size_t>(natsMsg_GetDataLength(reply)));
  natsMsg_Destroy(reply);
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Corruption("JetStream answered a publish to " + subject + " with no JSON");
  }
  if (j.contains("error")) {
    const auto& e = j["error"];
    int64_t err_code = 0;
    std::string desc = "?";
    (void)core::ReadJsonField(e, "err_code", &err_code);
    (void)core::ReadJsonField(e, "description", &desc);
    return Status::FailedPrecondition("publish to " + subject + " refused: " + desc +
                                      " (err_code " + std::to_string(err_code) + ")");
  }
  uint64_t seq = 0;
  if (!core::ReadJsonField(j, "seq", &seq, /*required=*/true)) {
    return Status::Corruption("JetStream answered a publish to " + subject +
                              " without a stream sequence");
  }
  return seq;
}

Status NatsConnection::CheckStreamPublish(const std::string& subject) {
  auto probe =
      Publish(subject, "", {{"Nats-Expected-Last-Subject-Sequence", "18446744073709551615"}});
  if (probe.status().IsFailedPrecondition())
    return Status::OK();  // let through, refused by JetStream
  if (probe.ok()) {
    return Status::Internal("a probe publish to " + subject + " was stored at sequence " +
                            std::to_string(*probe));
  }
  return probe.status();
}

Status NatsConnection::CheckCorePublish(const std::string& subject) {
  KVFOLD_RETURN_IF_ERROR(PermissionError());
  natsStatus s = natsConnection_PublishString(conn_, subject.c_str(), "");
  if (s == NATS_OK) s = natsConnection_FlushTimeout(conn_, timeout_.count());
  KVFOLD_RETURN_IF_ERROR(PermissionError());
  if (s != NATS_OK) {
    return Status::Unavailable("publishing to " + subject + " on " + url_ + ": " + NatsError(s));
  }
  return Status::OK();
}

}  // namespace kvfold::nats
