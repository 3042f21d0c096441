#include "artifact/object_store_transport.h"

#include <chrono>
#include <random>
#include <thread>

#include "artifact/pointer_codec.h"
#include "artifact/signer.h"
#include "core/base64.h"
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

class ObjectStoreTransport final : public Transport {
 public:
  ObjectStoreTransport(std::shared_ptr<nats::NatsConnection> conn, std::string bucket)
      : conn_(std::move(conn)),
        bucket_(std::move(bucket)),
        stream_("OBJ_" + bucket_),
        location_("obj:" + bucket_) {}

  ~ObjectStoreTransport() override {
    if (js_ != nullptr) jsCtx_Destroy(js_);
  }

  Status Init(bool create_if_missing) {
    if (!create_if_missing) {
      auto info = conn_->ApiRequest("STREAM.INFO." + stream_, nullptr);
      if (info.ok()) return Status::OK();
      if (info.status().IsNotFound()) {
        return Status::NotFound("object store bucket " + bucket_ + " does not exist on " +
                                conn_->url());
      }
      return info.status().WithContext("object store " + bucket_);
    }
    json cfg = {{"name", stream_},
                {"subjects", {"$O." + bucket_ + ".C.>", "$O." + bucket_ + ".M.>"}},
                {"retention", "limits"},
                {"storage", "file"},
                {"num_replicas", 1},
                {"discard", "new"},
                {"allow_rollup_hdrs", true},
                {"allow_direct", true}};
    return conn_->EnsureStream(cfg).WithContext("object store " + bucket_);
  }

  const std::string& location() const override { return location_; }

  Status Put(const std::string& name, std::string_view bytes) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    auto old = ReadMeta(name);
    if (!old.ok()) return old.status();
    auto meta = WriteData(name, bytes);
    if (!meta.ok()) return meta.status();
    auto published = conn_->Publish(MetaSubject(name), meta->dump(), {{"Nats-Rollup", "sub"}});
    if (!published.ok()) {
      Purge(ChunkSubject((*meta)["nuid"].get<std::string>()));
      return published.status().WithContext("publishing object " + name);
    }
    if (*old && !(*old)->value("deleted", false)) Purge(ChunkSubject((**old)["nuid"].get<std::string>()));
    return Status::OK();
  }

  StatusOr<std::string> Get(const std::string& name) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    auto meta = ReadMeta(name);
    if (!meta.ok()) return meta.status();
    if (!*meta || (*meta)->value("deleted", false)) {
      return Status::NotFound("object " + name + " does not exist in " + location_);
    }
    return ReadData(name, **meta);
  }

  Status Remove(const std::string& name) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    auto meta = ReadMeta(name);
    if (!meta.ok()) return meta.status();
    if (!*meta || (*meta)->value("deleted", false)) return Status::OK();
    json gone = **meta;
    gone.erase("$seq");
    gone["deleted"] = true;
    gone["size"] = 0;
    gone["chunks"] = 0;
    gone["digest"] = "";
    gone["mtime"] = NowRfc3339();
    auto published = conn_->Publish(MetaSubject(name), gone.dump(), {{"Nats-Rollup", "sub"}});
    if (!published.ok()) return published.status();
    Purge(ChunkSubject((**meta)["nuid"].get<std::string>()));
    return Status::OK();
  }

  StatusOr<std::vector<std::string>> List() override {
    auto info = conn_->ApiRequest("STREAM.INFO." + stream_,
                                  json{{"subjects_filter", "$O." + bucket_ + ".M.>"}});
    if (!info.ok()) return info.status();
    std::vector<std::string> out;
    const json& subjects = (*info)["state"].value("subjects", json::object());
    const std::string prefix = "$O." + bucket_ + ".M.";
    for (auto it = subjects.begin(); it != subjects.end(); ++it) {
      auto name = core::Base64Decode(std::string_view(it.key()).substr(prefix.size()));
      if (!name || *name == kPointerName || !ValidateObjectName(*name).ok()) continue;
      auto meta = ReadMeta(*name);
      if (!meta.ok()) return meta.status();
      if (*meta && !(*meta)->value("deleted", false)) out.push_back(*name);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  StatusOr<std::optional<ArtifactPointer>> ReadPointer() override {
    // A concurrent swap may purge the chunks of the meta just read: re-read.
    for (int attempt = 0;; ++attempt) {
      auto meta = ReadMeta(kPointerName);
      if (!meta.ok()) return meta.status();
      if (!*meta || (*meta)->value("deleted", false)) return std::optional<ArtifactPointer>();
      auto data = ReadData(kPointerName, **meta);
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
        expected_seq = (**meta)["$seq"].get<uint64_t>();
        if (!(*meta)->value("deleted", false)) {
          auto data = ReadData(kPointerName, **meta);
          if (!data.ok()) continue;  // raced a swap: read again
          auto p = DecodePointer(*data, location_);
          if (!p.ok()) return p.status();
          current = *p;
        }
      }
      KVFOLD_RETURN_IF_ERROR(core::CheckPointerAdvance(current, next));
      auto fresh = WriteData(kPointerName, EncodePointer(next));
      if (!fresh.ok()) return fresh.status();
      auto published = conn_->Publish(
          MetaSubject(kPointerName), fresh->dump(),
          {{"Nats-Rollup", "sub"},
           {"Nats-Expected-Last-Subject-Sequence", std::to_string(expected_seq)}});
      if (published.ok()) {
        if (*meta && !(*meta)->value("deleted", false)) {
          Purge(ChunkSubject((**meta)["nuid"].get<std::string>()));
        }
        return Status::OK();
      }
      Purge(ChunkSubject((*fresh)["nuid"].get<std::string>()));
      if (published.status().message().find("err_code " + std::to_string(kWrongLastSequence)) ==
          std::string::npos) {
        return published.status();
      }
      // Another exporter moved the pointer between our read and write.
    }
    return Status::Unavailable("the latest pointer in " + location_ +
                               " kept changing; gave up after 20 attempts");
  }

 private:
  std::string MetaSubject(const std::string& name) const {
    return "$O." + bucket_ + ".M." + core::Base64UrlEncode(name);
  }
  std::string ChunkSubject(const std::string& nuid) const {
    return "$O." + bucket_ + ".C." + nuid;
  }

  void Purge(const std::string& subject) {
    (void)conn_->ApiRequest("STREAM.PURGE." + stream_, json{{"filter", subject}});
  }

  // The object's current meta JSON with its stream sequence as "$seq", or
  // nullopt when there never was one.
  StatusOr<std::optional<json>> ReadMeta(const std::string& name) {
    auto msg = conn_->LastMessage(stream_, MetaSubject(name));
    if (!msg.ok()) return msg.status();
    if (!*msg) return std::optional<json>();
    json meta = json::parse((*msg)->data, nullptr, false);
    if (!meta.is_object() || !meta.contains("nuid") || !meta["nuid"].is_string()) {
      return Status::Corruption("object " + name + " in " + location_ + " has unreadable meta");
    }
    meta["$seq"] = (*msg)->seq;
    return std::optional<json>(std::move(meta));
  }

  // Publishes `bytes` as chunk messages under a new nuid; returns the meta.
  StatusOr<json> WriteData(const std::string& name, std::string_view bytes) {
    const std::string nuid = NewNuid();
    const std::string subject = ChunkSubject(nuid);
    uint64_t chunks = 0;
    for (size_t off = 0; off < bytes.size(); off += kObjectChunkSize) {
      auto seq = conn_->Publish(subject, bytes.substr(off, kObjectChunkSize));
      if (!seq.ok()) {
        Purge(subject);
        return seq.status().WithContext("writing object " + name);
      }
      ++chunks;
    }
    return json{{"name", name},
                {"bucket", bucket_},
                {"nuid", nuid},
                {"size", bytes.size()},
                {"chunks", chunks},
                {"mtime", NowRfc3339()},
                {"digest", "SHA-256=" + core::Base64UrlEncode(Sha256(bytes))},
                {"options", {{"max_chunk_size", kObjectChunkSize}}}};
  }

  StatusOr<std::string> ReadData(const std::string& name, const json& meta) {
    const uint64_t size = meta.value("size", uint64_t{0});
    const uint64_t chunks = meta.value("chunks", uint64_t{0});
    std::string out;
    if (chunks == 1) {
      // One request, answered at once even when a concurrent swap purged the
      // chunk (the pointer is always one chunk), where a consumer would wait
      // out its timeout.
      auto only = conn_->LastMessage(stream_, ChunkSubject(meta["nuid"].get<std::string>()));
      if (!only.ok()) return only.status().WithContext("reading object " + name);
      if (!*only) {
        return Status::NotFound("object " + name + " in " + location_ + " has missing chunks");
      }
      out = std::move((*only)->data);
    } else if (chunks > 1) {
      if (js_ == nullptr) {
        natsStatus s = natsConnection_JetStream(&js_, conn_->raw(), nullptr);
        if (s != NATS_OK) return Status::Internal("JetStream context: " + nats::NatsError(s));
      }
      jsSubOptions so;
      jsSubOptions_Init(&so);
      so.Stream = stream_.c_str();
      so.Ordered = true;
      natsSubscription* sub = nullptr;
      jsErrCode jerr = static_cast<jsErrCode>(0);
      const std::string subject = ChunkSubject(meta["nuid"].get<std::string>());
      natsStatus s = js_SubscribeSync(&sub, js_, subject.c_str(), nullptr, &so, &jerr);
      if (s != NATS_OK) {
        return Status::Unavailable("reading object " + name + ": " + nats::NatsError(s));
      }
      for (uint64_t i = 0; i < chunks; ++i) {
        natsMsg* m = nullptr;
        s = natsSubscription_NextMsg(&m, sub, conn_->timeout().count());
        if (s != NATS_OK) break;
        out.append(natsMsg_GetData(m), static_cast<size_t>(natsMsg_GetDataLength(m)));
        natsMsg_Destroy(m);
      }
      natsSubscription_Unsubscribe(sub);
      natsSubscription_Destroy(sub);
      if (s == NATS_TIMEOUT) {
        return Status::NotFound("object " + name + " in " + location_ + " has missing chunks");
      }
      if (s != NATS_OK) {
        return Status::Unavailable("reading object " + name + ": " + nats::NatsError(s));
      }
    }
    if (out.size() != size) {
      return Status::Corruption("object " + name + " in " + location_ + " holds " +
                                std::to_string(out.size()) + " bytes; its meta says " +
                                std::to_string(size));
    }
    if (meta.value("digest", std::string()) != "SHA-256=" + core::Base64UrlEncode(Sha256(out))) {
      return Status::Corruption("object " + name + " in " + location_ +
                                " does not match its SHA-256 digest");
    }
    return out;
  }

  std::shared_ptr<nats::NatsConnection> conn_;
  std::string bucket_;
  std::string stream_;
  std::string location_;
  jsCtx* js_ = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> OpenObjectStoreTransport(const ConnectOptions& connect,
                                                              const std::string& bucket,
                                                              bool create_if_missing) {
  KVFOLD_RETURN_IF_ERROR(ValidateBucketName(bucket).WithContext("object store"));
  auto conn = nats::NatsConnection::Connect(connect);
  if (!conn.ok()) return conn.status();
  auto t = std::make_unique<ObjectStoreTransport>(*conn, bucket);
  KVFOLD_RETURN_IF_ERROR(t->Init(create_if_missing));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace kvfold::artifact
