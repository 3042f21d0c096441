#include "nats/stored_message.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/base64.h"
#include "core/json_fields.h"
#include "core/marker_window.h"
#include "core/message_ttl.h"
#include "nats/kv_subjects.h"

namespace kvfold::nats {

bool IsNoMessageFound(const Status& s) {
  return s.IsNotFound() && s.message().find("err_code 10037") != std::string::npos;
}

StatusOr<BucketMessage> MessageOfGetReply(std::string_view bucket, const nlohmann::json& message,
                                          bool read_marker) {
  std::string subject;
  BucketMessage m;
  if (!message.is_object() || !core::ReadJsonField(message, "subject", &subject, true) ||
      !core::ReadJsonField(message, "seq", &m.seq, true)) {
    return Status::Corruption("a stored message of bucket " + std::string(bucket) +
                              " came back without its subject or sequence");
  }
  const auto key = KeyOfSubject(bucket, subject);
  if (!key) {
    return Status::Corruption("stored message " + std::to_string(m.seq) + " has subject " +
                              subject + ", not in bucket " + std::string(bucket));
  }
  m.key = std::string(*key);
  // Headers come as base64 of an HTTP-like block: "NATS/1.0\r\nName: v\r\n...".
  std::string kv_op, marker, ttl;
  std::string hdrs64, time, data64;
  if (!core::ReadJsonField(message, "hdrs", &hdrs64) ||
      !core::ReadJsonField(message, "time", &time) ||
      !core::ReadJsonField(message, "data", &data64)) {
    return Status::Corruption("stored message " + std::to_string(m.seq) + " of bucket " +
                              std::string(bucket) + " has a field of the wrong type");
  }
  if (!hdrs64.empty()) {
    auto raw = core::Base64Decode(hdrs64);
    if (!raw) {
      return Status::Corruption("the headers of stored message " + std::to_string(m.seq) +
                                " are not base64");
    }
    auto header = [&raw](const std::string& name) {
      const std::string needle = "\r\n" + name + ":";
      const size_t at = raw->find(needle);
      if (at == std::string::npos) return std::string();
      size_t start = at + needle.size();
      size_t end = std::min(raw->find("\r\n", start), raw->size());
      // Trimmed on both sides, as nats.c trims what a delivery carries.
      while (start < end && std::isspace(static_cast<unsigned char>((*raw)[start]))) ++start;
      while (end > start && std::isspace(static_cast<unsigned char>((*raw)[end - 1]))) --end;
      return raw->substr(start, end - start);
    };
    kv_op = header("KV-Operation");
    if (read_marker) marker = header("Nats-Marker-Reason");
    ttl = header("Nats-TTL");
  }
  m.op = OpOfHeaders(kv_op, marker);
  if (!time.empty()) {
    m.time_ns = core::ParseApiTimeNs(time).value_or(0);
  }
  if (m.op == Op::kPut) {
    if (!data64.empty()) {
      auto data = core::Base64Decode(data64);
      if (!data) {
        return Status::Corruption("the value of stored message " + std::to_string(m.seq) +
                                  " is not base64");
      }
      m.value = std::move(*data);
    }
    m.expires_ns = core::MessageDeadlineNs(m.time_ns, ttl);
  }
  return m;
}

}  // namespace kvfold::nats
