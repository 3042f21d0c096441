#include "artifact/object_store_transport.h"

#include <chrono>
#include <random>
#include <thread>

#include "artifact/object_meta.h"
#include "artifact/pointer_codec.h"
#include "artifact/signer.h"
#include "core/base64.h"
#include "core/mutation.h"
#include "core/pointer_rule.h"
#include "nats/nats_connection.h"

namespace kvfold::artifact {
namespace {

using nlohmann::json;

constexpr size_t kObjectChunkSize = 128 * 1024;  // ADR-20 default
constexpr int kWrongLastSequence = 10071;        // JetStream err_code

std::string NewNuid() {
  static constexpr char kAlphabet[] =
      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string out;
  for (int i = 0; i < 22; ++i) out += kAlphabet[rng() % 62];
  return out;
}

std::string NowRfc3339() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A publish that failed without a refusal from JetStream (a timeout, a
// lost connection): the message may or may not have been stored.
bool Ambiguous(const Status& s) { return !s.IsFailedPrecondition(); }

class ObjectStoreTransport final : public Transport {
 public:
  ObjectStoreTransport(std::shared_ptr<nats::NatsConnection> conn, std::string bucket,
                       ObjectStoreFaults faults)
      : conn_(std::move(conn)),
        bucket_(std::move(bucket)),
        stream_("OBJ_" + bucket_),
        location_("obj:" + bucket_),
        faults_(std::move(faults)) {}

  Status Init(bool create_if_missing) {
    KVFOLD_RETURN_IF_ERROR(Open(create_if_missing).WithContext("object store " + bucket_));
    // The rights a reader (and, opened to create, a writer) needs, checked
    // now so that missing ones fail here, on names nothing uses: a read,
    // publishes JetStream refuses (CheckStreamPublish), a purge of nothing.
    const std::string check_name = "kvfold-access-check";
    auto read = conn_->LastMessage(stream_, MetaSubject(check_name));
    if (!read.ok()) return read.status().WithContext("object store " + bucket_);
    if (!create_if_missing) return Status::OK();
    for (const std::string& subject : {ChunkSubject(check_name), MetaSubject(check_name)}) {
      KVFOLD_RETURN_IF_ERROR(
          conn_->CheckStreamPublish(subject).WithContext("object store " + bucket_));
    }
    auto purged =
        conn_->ApiRequest("STREAM.PURGE." + stream_, json{{"filter", ChunkSubject(check_name)}});
    if (!purged.ok()) return purged.status().WithContext("object store " + bucket_);
    return Status::OK();
  }

  Status Open(bool create_if_missing) {
    if (!create_if_missing) {
      auto info = conn_->ApiRequest("STREAM.INFO." + stream_, nullptr);
      if (info.ok()) return Status::OK();
      if (info.status().IsNotFound()) {
        return Status::NotFound("object store bucket " + bucket_ + " does not exist on " +
                                conn_->url());
      }
      return info.status();
    }
    json cfg = {{"name", stream_},
                {"subjects", {"$O." + bucket_ + ".C.>", "$O." + bucket_ + ".M.>"}},
                {"retention", "limits"},
                {"storage", "file"},
                {"num_replicas", 1},
                {"discard", "new"},
                {"allow_rollup_hdrs", true},
                {"allow_direct", true}};
    return conn_->EnsureStream(cfg);
  }

  const std::string& location() const override { return location_; }

  Status Put(const std::string& name, std::string_view bytes) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    auto old = ReadMeta(name);
    if (!old.ok()) return old.status();
    auto fresh = WriteData(name, bytes);
    if (!fresh.ok()) return fresh.status();
    auto published = Publish(MetaSubject(name), fresh->record.dump(), {{"Nats-Rollup", "sub"}});
    if (!published.ok()) {
      KVFOLD_RETURN_IF_ERROR(SettleFailedMetaPublish(name, fresh->nuid, published.status())
                                 .WithContext("publishing object " + name));
    }
    if (*old && !(*old)->meta.deleted) Purge(ChunkSubject((*old)->meta.nuid));
    return Status::OK();
  }

  StatusOr<std::string> Get(const std::string& name, uint64_t max_bytes) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    auto meta = ReadMeta(name);
    if (!meta.ok()) return meta.status();
    if (!*meta || (*meta)->meta.deleted) {
      return Status::NotFound("object " + name + " does not exist in " + location_);
    }
    return ReadData(name, (*meta)->meta, max_bytes);
  }

  Status Remove(const std::string& name) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    auto meta = ReadMeta(name);
    if (!meta.ok()) return meta.status();
    if (!*meta || (*meta)->meta.deleted) return Status::OK();
    json gone = (*meta)->meta.raw;
    gone["deleted"] = true;
    gone["size"] = 0;
    gone["chunks"] = 0;
    gone["digest"] = "";
    gone["mtime"] = NowRfc3339();
    auto published = Publish(MetaSubject(name), gone.dump(), {{"Nats-Rollup", "sub"}});
    if (!published.ok()) return published.status();  // the data stays: never purge on doubt
    Purge(ChunkSubject((*meta)->meta.nuid));
    return Status::OK();
  }

  StatusOr<std::vector<std::string>> List() override {
    auto info = conn_->ApiRequest("STREAM.INFO." + stream_,
                                  json{{"subjects_filter", "$O." + bucket_ + ".M.>"}});
    if (!info.ok()) return info.status();
    std::vector<std::string> out;
    const auto state = info->find("state");
    if (state == info->end() || !state->is_object()) {
      return Status::Corruption("stream info of " + stream_ + " has no state");
    }
    const auto subjects = state->find("subjects");
    if (subjects == state->end() || subjects->is_null()) return out;  // no objects yet
    if (!subjects->is_object()) {
      return Status::Corruption("stream info of " + stream_ + " lists subjects as " +
                                std::string(subjects->type_name()));
    }
    const std::string prefix = "$O." + bucket_ + ".M.";
    for (auto it = subjects->begin(); it != subjects->end(); ++it) {
      if (!std::string_view(it.key()).starts_with(prefix)) continue;
      auto name = core::Base64Decode(std::string_view(it.key()).substr(prefix.size()));
      if (!name || *name == kPointerName || !ValidateObjectName(*name).ok()) continue;
      auto meta = ReadMeta(*name);
      if (!meta.ok()) return meta.status();
      if (*meta && !(*meta)->meta.deleted) out.push_back(*name);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  StatusOr<std::optional<ArtifactPointer>> ReadPointer() override {
    // A concurrent swap may purge the chunks of the meta just read: re-read.
    for (int attempt = 0;; ++attempt) {
      auto meta = ReadMeta(kPointerName);
      if (!meta.ok()) return meta.status();
      if (!*meta || (*meta)->meta.deleted) return std::optional<ArtifactPointer>();
      auto data = ReadData(kPointerName, (*meta)->meta, kMaxPointerBytes);
      if (data.ok()) {
        auto p = DecodePointer(*data, location_);
        if (!p.ok()) return p.status();
        return std::optional<ArtifactPointer>(*p);
      }
      if (attempt >= 5) return data.status();
    }
  }

  Status AdvancePointer(const ArtifactPointer& next) override {
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto meta = ReadMeta(kPointerName);
      if (!meta.ok()) return meta.status();
      std::optional<ArtifactPointer> current;
      uint64_t expected_seq = 0;
      if (*meta) {
        expected_seq = (*meta)->seq;
        if (!(*meta)->meta.deleted) {
          auto data = ReadData(kPointerName, (*meta)->meta, kMaxPointerBytes);
          if (!data.ok()) {
            // Raced a swap (the meta moved on: read again), or the meta
            // names data that is gone, which no retry mends.
            auto again = ReadMeta(kPointerName);
            if (again.ok() && *again && (*again)->seq == expected_seq) {
              return data.status().WithContext(
                  "the latest pointer cannot be read, so it cannot be moved forward; to reset "
                  "it, purge subject " +
                  MetaSubject(kPointerName) + " of stream " + stream_ + " and export again");
            }
            continue;
          }
          auto p = DecodePointer(*data, location_);
          if (!p.ok()) return p.status();
          current = *p;
        }
      }
      KVFOLD_RETURN_IF_ERROR(core::CheckPointerAdvance(current, next));
      auto fresh = WriteData(kPointerName, EncodePointer(next));
      if (!fresh.ok()) return fresh.status();
      auto published =
          Publish(MetaSubject(kPointerName), fresh->record.dump(),
                  {{"Nats-Rollup", "sub"},
                   {"Nats-Expected-Last-Subject-Sequence", std::to_string(expected_seq)}});
      Status swapped = published.status();
      if (!published.ok()) {
        const bool lost_race =
            published.status().message().find("err_code " + std::to_string(kWrongLastSequence)) !=
            std::string::npos;
        swapped = SettleFailedMetaPublish(kPointerName, fresh->nuid, published.status());
        // Another exporter moved the pointer between our read and write.
        if (!swapped.ok() && lost_race) continue;
      }
      if (!swapped.ok()) return swapped;
      if (*meta && !(*meta)->meta.deleted) Purge(ChunkSubject((*meta)->meta.nuid));
      return Status::OK();
    }
    return Status::Unavailable("the latest pointer in " + location_ +
                               " kept changing; gave up after 20 attempts");
  }

 private:
  // A meta record as stored: parsed, with its stream sequence.
  struct StoredMeta {
    ObjectMeta meta;
    uint64_t seq = 0;
  };
  // What WriteData stored: the meta record to publish for it.
  struct WrittenData {
    json record;
    std::string nuid;
  };

  std::string MetaSubject(const std::string& name) const {
    return "$O." + bucket_ + ".M." + core::Base64UrlEncode(name);
  }
  std::string ChunkSubject(const std::string& nuid) const { return "$O." + bucket_ + ".C." + nuid; }

  void Purge(const std::string& subject) {
    (void)conn_->ApiRequest("STREAM.PURGE." + stream_, json{{"filter", subject}});
  }

  // conn_->Publish, through the test seam.
  StatusOr<uint64_t> Publish(const std::string& subject, std::string_view data,
                             const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    auto seq = conn_->Publish(subject, data, headers);
    if (seq.ok() && faults_.lose_ack && faults_.lose_ack(subject)) {
      return Status::Unavailable("publishing to " + subject + " failed: timeout (ack lost)");
    }
    return seq;
  }

  // After publishing the meta of `name` (data under `nuid`) failed with
  // `error`: OK when the meta landed anyway, else the error. The new data is
  // purged only when JetStream refused the meta: after a timeout the meta
  // may have landed, and purging would leave it naming data that is gone
  // (for the pointer: every later read and swap failing until repaired by
  // hand). Unreferenced data left behind is only wasted space.
  Status SettleFailedMetaPublish(const std::string& name, const std::string& nuid,
                                 const Status& error) {
    if (!Ambiguous(error)) {
      Purge(ChunkSubject(nuid));
      return error;
    }
    auto now = ReadMeta(name);
    if (!now.ok()) {
      return error.WithContext("the outcome is unknown (re-reading failed: " +
                               now.status().ToString() + "); its data was kept");
    }
    if (*now && (*now)->meta.nuid == nuid) return Status::OK();  // it landed
    return error;
  }

  // The object's current meta with its stream sequence, or nullopt when
  // there never was one.
  StatusOr<std::optional<StoredMeta>> ReadMeta(const std::string& name) {
    auto msg = conn_->LastMessage(stream_, MetaSubject(name));
    if (!msg.ok()) return msg.status();
    if (!*msg) return std::optional<StoredMeta>();
    auto meta = ParseObjectMeta((*msg)->data, "object " + name + " in " + location_);
    if (!meta.ok()) return meta.status();
    return std::optional<StoredMeta>(StoredMeta{std::move(meta).value(), (*msg)->seq});
  }

  // Publishes `bytes` as chunk messages under a new nuid; returns the meta.
  StatusOr<WrittenData> WriteData(const std::string& name, std::string_view bytes) {
    const std::string nuid = NewNuid();
    const std::string subject = ChunkSubject(nuid);
    uint64_t chunks = 0;
    for (size_t off = 0; off < bytes.size(); off += kObjectChunkSize) {
      auto seq = Publish(subject, bytes.substr(off, kObjectChunkSize));
      if (!seq.ok()) {
        Purge(subject);  // no meta names this nuid yet
        return seq.status().WithContext("writing object " + name);
      }
      ++chunks;
    }
    return WrittenData{json{{"name", name},
                            {"bucket", bucket_},
                            {"nuid", nuid},
                            {"size", bytes.size()},
                            {"chunks", chunks},
                            {"mtime", NowRfc3339()},
                            {"digest", "SHA-256=" + core::Base64UrlEncode(Sha256(bytes))},
                            {"options", {{"max_chunk_size", kObjectChunkSize}}}},
                       nuid};
  }

  // The object's data, refused unread when its meta says it holds more
  // than `max_bytes`; the read stops as soon as it holds more than the meta
  // says.
  StatusOr<std::string> ReadData(const std::string& name, const ObjectMeta& meta,
                                 uint64_t max_bytes) {
    if (meta.size > max_bytes && !KVFOLD_MUTANT("obj-read-past-max")) {
      return Status::Corruption("object " + name + " in " + location_ + " is " +
                                std::to_string(meta.size) +
                                " bytes (its meta says), more than the " +
                                std::to_string(max_bytes) + " expected of it: refused unread");
    }
    // One direct get per chunk, each answered at once: when a concurrent
    // swap or prune purged the chunks, the read fails at the first missing
    // one, where a consumer would wait out its timeout.
    const std::string subject = ChunkSubject(meta.nuid);
    std::string out;
    uint64_t next_seq = 1;
    for (uint64_t i = 0; i < meta.chunks; ++i) {
      auto msg = conn_->NextMessage(stream_, subject, next_seq);
      if (!msg.ok()) return msg.status().WithContext("reading object " + name);
      if (!*msg) {
        return Status::NotFound("object " + name + " in " + location_ + " has missing chunks");
      }
      out.append((*msg)->data);
      next_seq = (*msg)->seq + 1;
      if (out.size() > meta.size) break;  // the size check below reports it
    }
    if (out.size() != meta.size) {
      return Status::Corruption("object " + name + " in " + location_ + " holds " +
                                std::to_string(out.size()) + " bytes; its meta says " +
                                std::to_string(meta.size));
    }
    if (meta.digest != "SHA-256=" + core::Base64UrlEncode(Sha256(out))) {
      return Status::Corruption("object " + name + " in " + location_ +
                                " does not match its SHA-256 digest");
    }
    return out;
  }

  std::shared_ptr<nats::NatsConnection> conn_;
  std::string bucket_;
  std::string stream_;
  std::string location_;
  ObjectStoreFaults faults_;
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> OpenObjectStoreTransport(const ConnectOptions& connect,
                                                              const std::string& bucket,
                                                              bool create_if_missing,
                                                              ObjectStoreFaults faults) {
  KVFOLD_RETURN_IF_ERROR(ValidateBucketName(bucket).WithContext("object store"));
  auto conn = nats::NatsConnection::Connect(connect);
  if (!conn.ok()) return conn.status();
  auto t = std::make_unique<ObjectStoreTransport>(*conn, bucket, std::move(faults));
  KVFOLD_RETURN_IF_ERROR(t->Init(create_if_missing));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace kvfold::artifact
