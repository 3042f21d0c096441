#include "kvfold/lease.h"

#include "core/json_fields.h"
#include "core/mutation.h"
#include "kvfold/scope.h"
#include "nats/kv_subjects.h"
#include "nats/lease_record.h"
#include "nats/nats_connection.h"

namespace kvfold {

namespace nats {

std::string EncodeLeaseRecord(const LeaseRecord& lease) {
  return nlohmann::json{{"holder", lease.holder}, {"expires_unix_ms", lease.expires_unix_ms}}
      .dump();
}

StatusOr<LeaseRecord> DecodeLeaseRecord(std::string_view data, const std::string& what) {
  const auto j = nlohmann::json::parse(data, nullptr, false);
  LeaseRecord lease;
  if (j.is_discarded() || !core::ReadJsonField(j, "holder", &lease.holder, true) ||
      !core::ReadJsonField(j, "expires_unix_ms", &lease.expires_unix_ms, true)) {
    return Status::Corruption(what +
                              " holds a value that is not a lease (want {\"holder\":"
                              "string,\"expires_unix_ms\":integer}); delete the key to free it");
  }
  return lease;
}

LeaseState StateOf(const LeaseRecord& lease, const std::string& asker, int64_t now_ms,
                   int64_t ttl_ms) {
  if (lease.holder == asker || lease.expires_unix_ms <= now_ms) return LeaseState::kFree;
  if (lease.expires_unix_ms - now_ms > kMaxLeasePeriods * ttl_ms + kLeaseClockSkewMs &&
      !KVFOLD_MUTANT("lease-trust-far-expiry")) {
    return LeaseState::kImplausible;
  }
  return LeaseState::kHeld;
}

}  // namespace nats

namespace {

using nlohmann::json;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class NatsExportLease final : public ExportLease {
 public:
  NatsExportLease(std::shared_ptr<nats::NatsConnection> conn, std::string bucket,
                  LeaseOptions options)
      : conn_(std::move(conn)),
        bucket_(std::move(bucket)),
        stream_(nats::StreamName(bucket_)),
        options_(std::move(options)) {}

  Status Init() {
    json cfg = {{"name", stream_},       {"subjects", {nats::SubjectPrefix(bucket_) + ">"}},
                {"retention", "limits"}, {"max_msgs_per_subject", 1},
                {"discard", "new"},      {"allow_rollup_hdrs", true},
                {"deny_delete", true},   {"allow_direct", true},
                {"storage", "file"},     {"num_replicas", 1}};
    return conn_->EnsureStream(cfg).WithContext("lease bucket " + bucket_);
  }

  StatusOr<bool> TryAcquire(const std::string& key, const std::string& holder,
                            std::chrono::milliseconds ttl) override {
    KVFOLD_RETURN_IF_ERROR(ValidateKey(key).WithContext("lease key"));
    const std::string subject = nats::SubjectPrefix(bucket_) + key;
    auto current = conn_->LastMessage(stream_, subject);
    if (!current.ok()) return current.status();
    uint64_t last_seq = 0;
    if (*current) {
      last_seq = (*current)->seq;
      // An empty value is a deleted key (a KV delete marker): free.
      if (!(*current)->data.empty()) {
        auto lease =
            nats::DecodeLeaseRecord((*current)->data, "lease key " + key + " in bucket " + bucket_);
        if (!lease.ok()) return lease.status();
        const int64_t now = NowMs();
        switch (nats::StateOf(*lease, holder, now, ttl.count())) {
          case nats::LeaseState::kHeld:
            return false;  // someone else holds it this round
          case nats::LeaseState::kImplausible:
            if (options_.warn) {
              options_.warn("lease key " + key + " in bucket " + bucket_ + " is held by \"" +
                            lease->holder + "\" for " +
                            std::to_string((lease->expires_unix_ms - now) / 1000) +
                            " s more, beyond any holder's period (at most " +
                            std::to_string(nats::kMaxLeasePeriods) +
                            " of this node's, plus a minute of clock skew): taking it over");
            }
            break;
          case nats::LeaseState::kFree:
            break;
        }
      }
    }
    auto published =
        conn_->Publish(subject, nats::EncodeLeaseRecord({holder, NowMs() + ttl.count()}),
                       {{"Nats-Expected-Last-Subject-Sequence", std::to_string(last_seq)}});
    if (published.ok()) return true;
    if (published.status().IsFailedPrecondition()) return false;  // another node won the swap
    return published.status();
  }

  Status CheckAccess(const std::string& key) override {
    KVFOLD_RETURN_IF_ERROR(ValidateKey(key).WithContext("lease key"));
    const std::string subject = nats::SubjectPrefix(bucket_) + key;
    auto current = conn_->LastMessage(stream_, subject);
    if (!current.ok()) return current.status().WithContext("lease bucket " + bucket_);
    return conn_->CheckStreamPublish(subject).WithContext("lease bucket " + bucket_);
  }

 private:
  std::shared_ptr<nats::NatsConnection> conn_;
  std::string bucket_;
  std::string stream_;
  LeaseOptions options_;
};

}  // namespace

StatusOr<std::unique_ptr<ExportLease>> ExportLease::Open(const ConnectOptions& connect,
                                                         const std::string& lease_bucket,
                                                         LeaseOptions options) {
  KVFOLD_RETURN_IF_ERROR(ValidateBucketName(lease_bucket).WithContext("lease bucket"));
  auto conn = nats::NatsConnection::Connect(connect);
  if (!conn.ok()) return conn.status();
  auto lease = std::make_unique<NatsExportLease>(*conn, lease_bucket, std::move(options));
  KVFOLD_RETURN_IF_ERROR(lease->Init());
  return std::unique_ptr<ExportLease>(std::move(lease));
}

}  // namespace kvfold
