// One S3 connection: requests signed by libcurl's SigV4 (CURLOPT_AWS_SIGV4;
// kvfold does not sign by hand), with the payload's SHA-256 declared so the
// server checks the bytes it stores, and retries where S3 says to retry
// (5xx, 429, 503 SlowDown, a dropped connection).
//
// Thread safety: one thread at a time (one curl handle, reused so the
// connection is kept alive).

#ifndef KVFOLD_ARTIFACT_S3_CLIENT_H_
#define KVFOLD_ARTIFACT_S3_CLIENT_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/s3_config.h"
#include "kvfold/status.h"

namespace kvfold::artifact {

struct S3Request {
  S3Request(const char* method, std::string key, std::string query = {}, std::string_view body = {})
      : method(method), key(std::move(key)), query(std::move(query)), body(body) {}

  const char* method;                // GET, HEAD, PUT, POST, DELETE
  std::string key;                   // "" for the bucket itself
  std::string query;                 // encoded, names in byte order ("" for none)
  std::string_view body;             // must outlive the Send
  std::vector<std::string> headers;  // "If-Match: \"...\""
  // The most of an answer's body to read: a longer one (by Content-Length,
  // or counted as it arrives) is not read on (S3Response::body_over_limit).
  uint64_t max_body = std::numeric_limits<uint64_t>::max();
};

struct S3Response {
  long status = 0;
  std::string body;
  std::string etag;           // the ETag header, quotes kept
  std::string bucket_region;  // x-amz-bucket-region, on a redirect or HEAD
  // The body held more than S3Request::max_body: reading stopped there
  // (`body` holds at most that much) and the request was not retried.
  bool body_over_limit = false;
  int64_t content_length = -1;  // the Content-Length header; -1 when none
  // S3's error code from the body ("NoSuchKey", "SlowDown"), or "".
  std::string ErrorCode() const;
};

class S3Client {
 public:
  explicit S3Client(S3Config config);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // Sends `request`, again while the answer is one S3 asks to retry, up to
  // max_attempts. Returns the final HTTP answer whatever its status (the
  // caller judges it); Unavailable when no answer came, or only ones to
  // retry.
  StatusOr<S3Response> Send(const S3Request& request);

  // A failed answer as a Status naming the request and S3's code and
  // message: NotFound only for NoSuchKey and NoSuchBucket, FailedPrecondition
  // for redirects (naming the bucket's region) and other refusals,
  // Unavailable for the rest.
  Status ErrorOf(const S3Request& request, const S3Response& response) const;

  // Called once when an answer says the credentials expired (ExpiredToken,
  // InvalidToken): a fresh config whose credentials replace these.
  void set_reload_credentials(std::function<StatusOr<S3Config>()> reload) {
    reload_credentials_ = std::move(reload);
  }

  // `text` percent-encoded for a query value (SigV4's unreserved set).
  std::string Escape(std::string_view text) const;

  const S3Config& config() const { return config_; }
  // The number of requests sent, retries included (tests count retries).
  uint64_t requests_sent() const { return requests_sent_; }

 private:
  StatusOr<S3Response> SendWithRetries(const S3Request& request);

  struct Curl;
  S3Config config_;
  std::function<StatusOr<S3Config>()> reload_credentials_;
  std::unique_ptr<Curl> curl_;
  uint64_t requests_sent_ = 0;
};

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_S3_CLIENT_H_
