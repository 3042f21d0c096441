#include "artifact/s3_client.h"

#include <curl/curl.h>

#include <charconv>
#include <mutex>
#include <thread>

#include "artifact/s3_xml.h"
#include "artifact/signer.h"
#include "core/backoff.h"
#include "core/mutation.h"

namespace kvfold::artifact {
namespace {

// Where an answer's body goes, up to `max` bytes.
struct BodySink {
  std::string* body;
  uint64_t max;
  bool over = false;
};

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  auto* sink = static_cast<BodySink*>(out);
  if (sink->body->size() + size * n > sink->max && !KVFOLD_MUTANT("s3-read-past-max")) {
    sink->over = true;
    return 0;  // curl ends the transfer (CURLE_WRITE_ERROR)
  }
  sink->body->append(data, size * n);
  return size * n;
}

// Keeps the response headers kvfold reads: ETag, x-amz-bucket-region and
// Content-Length.
size_t TakeHeader(char* data, size_t size, size_t n, void* out) {
  auto* response = static_cast<S3Response*>(out);
  std::string_view line(data, size * n);
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * n;
  std::string name(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view v = line.substr(colon + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' '))
    v.remove_suffix(1);
  if (name == "etag") response->etag = std::string(v);
  if (name == "x-amz-bucket-region") response->bucket_region = std::string(v);
  if (name == "content-length") {
    int64_t length = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), length);
    response->content_length = ec == std::errc() && end == v.data() + v.size() ? length : -1;
  }
  return size * n;
}

// Failures of the connection that another attempt may not meet.
bool TransientCurlError(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

bool Retried(const S3Response& r) {
  // 501: the server lacks the feature; asking again will not add it.
  if ((r.status >= 500 && r.status != 501) || r.status == 429) return true;
  const std::string code = r.ErrorCode();
  return code == "SlowDown" || code == "RequestTimeout" || code == "InternalError";
}

// Temporary credentials that ran out: read them again (a rotated file or
// environment) and ask once more.
bool ExpiredCredentials(const S3Response& r) {
  const std::string code = r.ErrorCode();
  return code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired";
}

}  // namespace

std::string S3Response::ErrorCode() const {
  if (status < 300) return "";
  return XmlText(body, "Code").value_or("");
}

struct S3Client::Curl {
  CURL* handle = nullptr;
};

S3Client::S3Client(S3Config config) : config_(std::move(config)), curl_(new Curl) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_->handle = curl_easy_init();
}

S3Client::~S3Client() {
  if (curl_->handle != nullptr) curl_easy_cleanup(curl_->handle);
}

std::string S3Client::Escape(std::string_view text) const {
  char* escaped = curl_easy_escape(curl_->handle, text.data(), static_cast<int>(text.size()));
  std::string out = escaped == nullptr ? std::string() : std::string(escaped);
  curl_free(escaped);
  return out;
}

StatusOr<S3Response> S3Client::Send(const S3Request& request) {
  auto r = SendWithRetries(request);
  if (!r.ok() || !ExpiredCredentials(*r) || !reload_credentials_) return r;
  auto fresh = reload_credentials_();
  if (!fresh.ok())
    return fresh.status().WithContext("reading S3 credentials again after " + r->ErrorCode());
  config_.access_key = fresh->access_key;
  config_.secret_key = fresh->secret_key;
  if (!KVFOLD_MUTANT("s3-reload-keeps-session-token")) config_.session_token = fresh->session_token;
  return SendWithRetries(request);
}

StatusOr<S3Response> S3Client::SendWithRetries(const S3Request& request) {
  if (curl_->handle == nullptr) return Status::Internal("curl_easy_init failed");
  const std::string url = S3Url(config_, request.key, request.query);
  const std::string sigv4 = "aws:amz:" + config_.region + ":s3";
  const std::string userpwd = config_.access_key + ":" + config_.secret_key;
  const std::string payload_hash = HexEncode(Sha256(request.body));
  core::Backoff backoff(std::chrono::milliseconds(100), std::chrono::milliseconds(2000));
  std::string last_failure;
  for (int attempt = 1; attempt <= config_.max_attempts; ++attempt) {
    CURL* h = curl_->handle;
    curl_easy_reset(h);
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, ("x-amz-content-sha256: " + payload_hash).c_str());
    if (!config_.session_token.empty()) {
      headers =
          curl_slist_append(headers, ("x-amz-security-token: " + config_.session_token).c_str());
    }
    for (const std::string& extra : request.headers)
      headers = curl_slist_append(headers, extra.c_str());
    const std::string method = request.method;
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    // A stalled transfer (under 1 KiB/s for a minute) fails and is retried.
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(h, CURLOPT_USERPWD, userpwd.c_str());
    if (method == "HEAD") {
      curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (method == "PUT" || method == "POST") {
      headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method);
    } else if (method != "GET") {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    S3Response response;
    BodySink sink{&response.body, request.max_body};
    // Refused by Content-Length before the body; the sink stops a body
    // that declared none (or lied) once it passes the limit.
    if (request.max_body < static_cast<uint64_t>(std::numeric_limits<curl_off_t>::max()) &&
        !KVFOLD_MUTANT("s3-read-past-max")) {
      curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(request.max_body));
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, AppendBody);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, TakeHeader);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &response);
    ++requests_sent_;
    const CURLcode code = curl_easy_perform(h);
    curl_slist_free_all(headers);
    if (code == CURLE_FILESIZE_EXCEEDED || (code == CURLE_WRITE_ERROR && sink.over)) {
      // Not a fault of the connection: asking again gets the same answer.
      response.body_over_limit = true;
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
      return response;
    }
    if (code == CURLE_OK) {
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
      if (!Retried(response)) return response;
      last_failure = std::string("HTTP ") + std::to_string(response.status) +
                     (response.ErrorCode().empty() ? "" : " " + response.ErrorCode());
    } else {
      last_failure = curl_easy_strerror(code);
      if (!TransientCurlError(code)) {
        return Status::Unavailable("S3 " + method + " " + url + ": " + last_failure);
      }
    }
    if (attempt < config_.max_attempts) std::this_thread::sleep_for(backoff.Next());
  }
  return Status::Unavailable(std::string("S3 ") + std::string(request.method) + " " + url + ": " +
                             last_failure + std::string(" (after ") +
                             std::to_string(config_.max_attempts) + " attempts)");
}

Status S3Client::ErrorOf(const S3Request& request, const S3Response& response) const {
  std::string what = std::string("S3 ") + std::string(request.method) + " " +
                     S3Url(config_, request.key, {}) + std::string(": HTTP ") +
                     std::to_string(response.status);
  const std::string code = response.ErrorCode();
  if (!code.empty()) what += " " + code;
  if (auto message = XmlText(response.body, "Message")) what += ": " + *message;
  // Only S3's own "no such" answers mean absent: a bare 404 (a proxy, a
  // wrong endpoint) must not pass for "no artifact yet".
  if (response.status == 404 && (code == "NoSuchKey" || code == "NoSuchBucket")) {
    return Status::NotFound(what);
  }
  if (response.status >= 300 && response.status < 400) {
    return Status::FailedPrecondition(
        what + (response.bucket_region.empty()
                    ? std::string(" (a redirect: is the endpoint or region right?)")
                    : " (the bucket is in region " + response.bucket_region +
                          ": set --s3-region or AWS_REGION)"));
  }
  if (code == "AccessDenied") {
    return Status::FailedPrecondition(what + " (the credentials lack the right for this request)");
  }
  // A refusal of the server's is not a usage error of this command (exit 2
  // would also keep systemd from restarting the mirror).
  if (response.status >= 400 && response.status < 500) return Status::FailedPrecondition(what);
  return Status::Unavailable(what);
}

}  // namespace kvfold::artifact
