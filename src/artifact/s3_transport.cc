#include "artifact/s3_transport.h"

#include <algorithm>

#include "artifact/pointer_codec.h"
#include "artifact/s3_client.h"
#include "artifact/s3_xml.h"
#include "core/mutation.h"
#include "core/pointer_rule.h"

namespace kvfold::artifact {
namespace {

bool Ok(const S3Response& r) { return r.status >= 200 && r.status < 300; }

// Room for an error answer's XML body (NoSuchKey and its message) when a
// small object is asked for.
constexpr uint64_t kErrorBodyBytes = uint64_t{64} << 10;

class S3Transport final : public Transport {
 public:
  S3Transport(S3Config config, std::string location, const S3Options& options)
      : client_(std::move(config)),
        location_(std::move(location)),
        allow_unconditional_(options.allow_unconditional_pointer) {
    client_.set_reload_credentials(
        [location = location_, options] { return ResolveS3Config(location, options); });
  }

  // The bucket answers HEAD (it exists and may be listed), or is made; an
  // exporter also checks conditional writes.
  Status Init(bool create_if_missing) {
    KVFOLD_RETURN_IF_ERROR(OpenBucket(create_if_missing));
    if (!create_if_missing) return Status::OK();
    return CheckConditionalWrites();
  }

  Status OpenBucket(bool create_if_missing) {
    S3Request probe("HEAD", "");
    auto r = client_.Send(probe);
    if (!r.ok()) return r.status();
    if (Ok(*r)) return Status::OK();
    if (r->status != 404) return client_.ErrorOf(probe, *r);
    if (!KVFOLD_MUTANT("s3-bare-404-no-bucket")) {
      // A HEAD answer has no body, so its 404 carries no error code: only a
      // listing's NoSuchBucket says the bucket is absent. A bare 404 (a
      // proxy, a wrong endpoint or addressing) never does.
      S3Request list("GET", "", ListQuery("", 1));
      auto listed = client_.Send(list);
      if (!listed.ok()) return listed.status();
      if (Ok(*listed)) return Status::OK();
      if (listed->ErrorCode() != "NoSuchBucket") {
        Status why = client_.ErrorOf(list, *listed);
        if (listed->status != 404 || why.IsNotFound()) return why;
        return Status::FailedPrecondition(
            why.message() +
            " (a 404 without S3's NoSuchBucket, after HEAD of the bucket also "
            "answered 404: is the endpoint, the addressing style or a proxy "
            "wrong? set --s3-endpoint or --s3-addressing)");
      }
    }
    if (!create_if_missing) {
      return Status::NotFound("no S3 bucket " + client_.config().where.bucket + " at " +
                              client_.config().endpoint);
    }
    std::string body;
    if (client_.config().region != "us-east-1") {
      body = "<CreateBucketConfiguration><LocationConstraint>" +
             XmlEscape(client_.config().region) +
             "</LocationConstraint></CreateBucketConfiguration>";
    }
    S3Request create("PUT", "", "", body);
    auto made = client_.Send(create);
    if (!made.ok()) return made.status();
    if (Ok(*made) || made->ErrorCode() == "BucketAlreadyOwnedByYou") return Status::OK();
    return client_.ErrorOf(create, *made).WithContext("creating the bucket");
  }

  // Writes a probe object twice with If-None-Match: *; the second must be
  // refused (412), or this server cannot keep the pointer forward-only.
  Status CheckConditionalWrites() {
    const std::string probe = Key(".kvfold-conditional-write-probe");
    S3Request first("PUT", probe, "", "probe");
    first.headers.push_back("If-None-Match: *");
    auto r = client_.Send(first);
    if (!r.ok()) return r.status();
    if (!Ok(*r) && r->status != 412 && r->status != 501) return client_.ErrorOf(first, *r);
    bool kept = false;
    if (r->status != 501) {
      auto second = client_.Send(first);
      if (!second.ok()) return second.status();
      kept = second->status == 412;
    }
    S3Request cleanup("DELETE", probe);
    (void)client_.Send(cleanup);
    if (kept) return Status::OK();
    if (allow_unconditional_) {
      conditional_writes_ = false;
      return Status::OK();
    }
    return Status::FailedPrecondition(
        "the S3 server at " + client_.config().endpoint +
        (r->status == 501 ? std::string(" refuses conditional writes (501)")
                          : std::string(" ignores conditional writes (If-None-Match)")) +
        ", so two exporters could move the latest pointer of " + location_ +
        " back; if only `mirror --export-every` exports here (its lease serializes "
        "exporters), allow it with --s3-allow-unconditional-pointer "
        "(S3Options::allow_unconditional_pointer)");
  }

  const std::string& location() const override { return location_; }

  Status Put(const std::string& name, std::string_view bytes) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    if (bytes.size() > client_.config().part_size) return PutInParts(Key(name), bytes);
    S3Request put("PUT", Key(name), "", bytes);
    return Expect(put, client_.Send(put));
  }

  StatusOr<std::string> Get(const std::string& name, uint64_t max_bytes) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    auto r = GetObject(name, max_bytes);
    if (!r.ok()) return r.status();
    return std::move(r->body);
  }

  Status Remove(const std::string& name) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    S3Request del("DELETE", Key(name));
    auto r = client_.Send(del);
    if (!r.ok()) return r.status();
    if (Ok(*r) || r->status == 404) return Status::OK();
    return client_.ErrorOf(del, *r);
  }

  StatusOr<std::vector<std::string>> List() override {
    const std::string& prefix = client_.config().where.prefix;
    std::vector<std::string> out;
    std::string token;
    while (true) {
      S3Request list("GET", "", ListQuery(token, 1000));
      auto r = client_.Send(list);
      if (!r.ok()) return r.status();
      if (!Ok(*r)) return client_.ErrorOf(list, *r);
      for (std::string& key : XmlTexts(r->body, "Key")) {
        if (!key.starts_with(prefix)) continue;
        std::string name = key.substr(prefix.size());
        if (name == kPointerName || !ValidateObjectName(name).ok()) continue;
        // A dot name is kvfold's own (the conditional-write probe).
        if (name.substr(name.rfind('/') + 1).front() == '.') continue;
        out.push_back(std::move(name));
      }
      if (XmlText(r->body, "IsTruncated").value_or("false") != "true") break;
      auto next = XmlText(r->body, "NextContinuationToken");
      if (!next || next->empty()) {
        return Status::Corruption("S3 listing of " + location_ +
                                  " is truncated but names no continuation token");
      }
      token = *next;
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  StatusOr<std::optional<ArtifactPointer>> ReadPointer() override {
    auto read = ReadPointerWithEtag();
    if (!read.ok()) return read.status();
    return read->pointer;
  }

  Status AdvancePointer(const ArtifactPointer& next) override {
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto current = ReadPointerWithEtag();
      if (!current.ok()) return current.status();
      // Our own write, whose answer was lost and whose retry then lost the
      // condition to it.
      if (current->pointer == next && attempt > 0) return Status::OK();
      KVFOLD_RETURN_IF_ERROR(core::CheckPointerAdvance(current->pointer, next));
      const std::string bytes = EncodePointer(next);
      S3Request put("PUT", Key(kPointerName), "", bytes);
      if (conditional_writes_) {
        if (current->pointer && current->etag.empty()) {
          return Status::Corruption("the latest pointer of " + location_ +
                                    " was read without an ETag; it cannot be moved by condition");
        }
        put.headers.push_back(current->pointer ? "If-Match: " + current->etag
                                               : std::string("If-None-Match: *"));
      }
      auto r = client_.Send(put);
      if (!r.ok()) return r.status();
      if (Ok(*r)) return Status::OK();
      if (r->status == 412 || r->status == 409) continue;  // another exporter moved it
      return client_.ErrorOf(put, *r);
    }
    return Status::Unavailable("the latest pointer of " + location_ +
                               " kept moving under 20 attempts to advance it");
  }

 private:
  struct PointerRead {
    std::optional<ArtifactPointer> pointer;
    std::string etag;
  };

  std::string Key(std::string_view name) const {
    return client_.config().where.prefix + std::string(name);
  }

  // ListObjectsV2's query, parameters in the byte order SigV4 signs them.
  std::string ListQuery(const std::string& token, int max_keys) const {
    std::string q;
    if (!token.empty()) q.append("continuation-token=").append(client_.Escape(token)).append("&");
    q += std::string("list-type=2&max-keys=") + std::to_string(max_keys);
    const std::string& prefix = client_.config().where.prefix;
    if (!prefix.empty()) q.append("&prefix=").append(client_.Escape(prefix));
    return q;
  }

  // Object `name`, refused (unread when its Content-Length says so, else
  // as soon as it passes the limit) when it holds more than `max_bytes`.
  // Room is left for an error answer's body (NoSuchKey) however small
  // `max_bytes` is.
  StatusOr<S3Response> GetObject(const std::string& name, uint64_t max_bytes) {
    S3Request get("GET", Key(name));
    get.max_body = std::max(max_bytes, kErrorBodyBytes);
    auto r = client_.Send(get);
    if (!r.ok()) return r.status();
    if (!Ok(*r)) return client_.ErrorOf(get, *r);
    if (r->body_over_limit || r->body.size() > max_bytes) {
      const std::string what = "object " + name + " in " + location_;
      const std::string limit = std::to_string(max_bytes);
      if (r->content_length >= 0) {
        return Status::Corruption(what + " is " + std::to_string(r->content_length) +
                                  " bytes, more than the " + limit +
                                  " expected of it: refused unread");
      }
      return Status::Corruption(what + " holds more than the " + limit +
                                " bytes expected of it: refused after " +
                                std::to_string(r->body.size()) + " bytes");
    }
    return r;
  }

  StatusOr<PointerRead> ReadPointerWithEtag() {
    S3Request get("GET", Key(kPointerName));
    get.max_body = kMaxPointerBytes;
    auto r = client_.Send(get);
    if (!r.ok()) return r.status();
    if (r->body_over_limit) {
      return Status::Corruption("the latest pointer of " + location_ + " holds more than " +
                                std::to_string(kMaxPointerBytes) + " bytes: refused unread");
    }
    // Only NoSuchKey is "nothing published yet".
    if (r->status == 404 && r->ErrorCode() == "NoSuchKey") return PointerRead{};
    if (!Ok(*r)) return client_.ErrorOf(get, *r);
    auto p = DecodePointer(r->body, location_);
    if (!p.ok()) return p.status();
    return PointerRead{*p, r->etag};
  }

  Status Expect(const S3Request& request, const StatusOr<S3Response>& r) {
    if (!r.ok()) return r.status();
    if (!Ok(*r)) return client_.ErrorOf(request, *r);
    return Status::OK();
  }

  // A multipart upload: the object appears whole on completion, or never.
  Status PutInParts(const std::string& key, std::string_view bytes) {
    S3Request create("POST", key, "uploads=");
    auto created = client_.Send(create);
    KVFOLD_RETURN_IF_ERROR(Expect(create, created));
    auto upload_id = XmlText(created->body, "UploadId");
    if (!upload_id || upload_id->empty()) {
      return Status::Corruption("S3 multipart upload of " + key + " got no UploadId");
    }
    const std::string id = client_.Escape(*upload_id);
    Status s = UploadParts(key, id, bytes);
    if (!s.ok()) {
      // Best effort: an upload left behind costs storage, never a reader.
      S3Request abort("DELETE", key, "uploadId=" + id);
      (void)client_.Send(abort);
    }
    return s;
  }

  Status UploadParts(const std::string& key, const std::string& id, std::string_view bytes) {
    const size_t part_size = client_.config().part_size;
    std::string complete = "<CompleteMultipartUpload>";
    int number = 1;
    for (size_t at = 0; at < bytes.size(); at += part_size, ++number) {
      S3Request part("PUT", key,
                     std::string("partNumber=") + std::to_string(number) + "&uploadId=" + id,
                     bytes.substr(at, part_size));
      auto r = client_.Send(part);
      KVFOLD_RETURN_IF_ERROR(Expect(part, r));
      if (r->etag.empty()) {
        return Status::Corruption(std::string("S3 part ") + std::to_string(number) + " of " + key +
                                  " was stored without an ETag");
      }
      complete += std::string("<Part><PartNumber>") + std::to_string(number) +
                  "</PartNumber><ETag>" + XmlEscape(r->etag) + "</ETag></Part>";
    }
    complete += "</CompleteMultipartUpload>";
    S3Request finish("POST", key, "uploadId=" + id, complete);
    auto r = client_.Send(finish);
    KVFOLD_RETURN_IF_ERROR(Expect(finish, r));
    // S3 may answer 200 and report the failure in the body.
    if (XmlText(r->body, "Code") && !KVFOLD_MUTANT("s3-complete-error-body-ok")) {
      return Status::Unavailable("S3 multipart upload of " + key +
                                 " failed on completion: " + XmlText(r->body, "Code").value() +
                                 ": " + XmlText(r->body, "Message").value_or(""));
    }
    return Status::OK();
  }

  S3Client client_;
  std::string location_;
  const bool allow_unconditional_;
  bool conditional_writes_ = true;
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> OpenS3Transport(const std::string& location,
                                                     const S3Options& options,
                                                     bool create_if_missing) {
  auto config = ResolveS3Config(location, options);
  if (!config.ok()) return config.status();
  std::string shown = "s3://" + config->where.bucket;
  if (!config->where.prefix.empty()) {
    shown.append("/").append(config->where.prefix, 0, config->where.prefix.size() - 1);
  }
  auto t = std::make_unique<S3Transport>(std::move(config).value(), shown, options);
  KVFOLD_RETURN_IF_ERROR(t->Init(create_if_missing).WithContext(shown));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace kvfold::artifact
