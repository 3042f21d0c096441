#include "kvfold/lease.h"

#include "core/base64.h"
#include "kvfold/scope.h"
#include "nats/kv_subjects.h"
#include "nats/nats_connection.h"

namespace kvfold {
namespace {

using nlohmann::json;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class NatsExportLease final : public ExportLease {
 public:
  NatsExportLease(std::shared_ptr<nats::NatsConnection> conn, std::string bucket)
      : conn_(std::move(conn)), bucket_(std::move(bucket)), stream_(nats::StreamName(bucket_)) {}

  Status Init() {
    auto info = conn_->ApiRequest("STREAM.INFO." + stream_, nullptr);
    if (info.ok()) return Status::OK();
    if (!info.status().IsNotFound()) return info.status();
    json cfg = {{"name", stream_},
                {"subjects", {nats::SubjectPrefix(bucket_) + ">"}},
                {"retention", "limits"},
                {"max_msgs_per_subject", 1},
                {"discard", "new"},
                {"allow_rollup_hdrs", true},
                {"deny_delete", true},
                {"allow_direct", true},
                {"storage", "file"},
                {"num_replicas", 1}};
    auto created = conn_->ApiRequest("STREAM.CREATE." + stream_, cfg);
    if (!created.ok() && !created.status().IsFailedPrecondition()) {
      return created.status().WithContext("creating lease bucket " + bucket_);
    }
    return Status::OK();
  }

  StatusOr<bool> TryAcquire(const std::string& key, const std::string& holder,
                            std::chrono::milliseconds ttl) override {
    KVFOLD_RETURN_IF_ERROR(ValidateKey(key).WithContext("lease key"));
    const std::string subject = nats::SubjectPrefix(bucket_) + key;
    uint64_t last_seq = 0;
    auto reply = conn_->ApiRequest("STREAM.MSG.GET." + stream_, json{{"last_by_subj", subject}});
    if (reply.ok()) {
      const json& msg = (*reply)["message"];
      last_seq = msg.value("seq", uint64_t{0});
      auto data = core::Base64Decode(msg.value("data", std::string()));
      json lease = data ? json::parse(*data, nullptr, false) : json();
      if (lease.is_object() && lease.value("holder", std::string()) != holder &&
          lease.value("expires_unix_ms", int64_t{0}) > NowMs()) {
        return false;  // someone else holds it this round
      }
    } else if (!reply.status().IsNotFound()) {
      return reply.status();
    }
    json lease = {{"holder", holder}, {"expires_unix_ms", NowMs() + ttl.count()}};
    auto published = conn_->Publish(
        subject, lease.dump(), {{"Nats-Expected-Last-Subject-Sequence", std::to_string(last_seq)}});
    if (published.ok()) return true;
    if (published.status().IsFailedPrecondition()) return false;  // another node won the swap
    return published.status();
  }

 private:
  std::shared_ptr<nats::NatsConnection> conn_;
  std::string bucket_;
  std::string stream_;
};

}  // namespace

StatusOr<std::unique_ptr<ExportLease>> ExportLease::Open(const ConnectOptions& connect,
                                                         const std::string& lease_bucket) {
  KVFOLD_RETURN_IF_ERROR(ValidateBucketName(lease_bucket).WithContext("lease bucket"));
  auto conn = nats::NatsConnection::Connect(connect);
  if (!conn.ok()) return conn.status();
  auto lease = std::make_unique<NatsExportLease>(*conn, lease_bucket);
  KVFOLD_RETURN_IF_ERROR(lease->Init());
  return std::unique_ptr<ExportLease>(std::move(lease));
}

}  // namespace kvfold
