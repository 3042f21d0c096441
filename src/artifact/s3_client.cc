#include "artifact/s3_client.h"

#include <curl/curl.h>

#include <mutex>
#include <thread>

#include "artifact/s3_xml.h"
#include "artifact/signer.h"
#include "core/backoff.h"

namespace kvfold::artifact {
namespace {

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xF];
  }
  return out;
}

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

size_t TakeEtag(char* data, size_t size, size_t n, void* out) {
  std::string_view line(data, size * n);
  constexpr std::string_view kName = "etag:";
  if (line.size() > kName.size()) {
    std::string lower(line.substr(0, kName.size()));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == kName) {
      std::string_view v = line.substr(kName.size());
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) {
        v.remove_suffix(1);
      }
      *static_cast<std::string*>(out) = std::string(v);
    }
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
  return (r.status >= 500 && r.status != 501) || r.status == 429 || r.ErrorCode() == "SlowDown";
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
  if (curl_->handle == nullptr) return Status::Internal("curl_easy_init failed");
  const std::string url = S3Url(config_, request.key, request.query);
  const std::string sigv4 = "aws:amz:" + config_.region + ":s3";
  const std::string userpwd = config_.access_key + ":" + config_.secret_key;
  const std::string payload_hash = Hex(Sha256(request.body));
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
    // No "100-continue" round trip; the body is in memory.
    headers = curl_slist_append(headers, "Expect:");
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
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, AppendBody);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &response.body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, TakeEtag);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &response.etag);
    ++requests_sent_;
    const CURLcode code = curl_easy_perform(h);
    curl_slist_free_all(headers);
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
  if (response.status == 404) return Status::NotFound(what);
  if (response.status == 403) {
    return Status::FailedPrecondition(what + " (the credentials lack the right for this request)");
  }
  if (response.status == 409 || response.status == 412) return Status::FailedPrecondition(what);
  if (response.status >= 400 && response.status < 500) return Status::InvalidArgument(what);
  return Status::Unavailable(what);
}

}  // namespace kvfold::artifact
