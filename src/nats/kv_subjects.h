// Pure subject math for KV buckets: mapping keys, scopes and JetStream ack
// replies to and from NATS subjects. No I/O.

#ifndef KVFOLD_NATS_KV_SUBJECTS_H_
#define KVFOLD_NATS_KV_SUBJECTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvfold/bucket.h"
#include "kvfold/scope.h"

namespace kvfold::nats {

std::string StreamName(std::string_view bucket);     // "KV_<bucket>"
std::string SubjectPrefix(std::string_view bucket);  // "$KV.<bucket>."

// The key of a KV subject, or nullopt when `subject` is not in the bucket.
std::optional<std::string_view> KeyOfSubject(std::string_view bucket, std::string_view subject);

// Server-side filter subjects that together deliver at least every key in
// `scope`, disjoint and sorted. Subject filters match whole tokens, so a
// prefix narrows the filter only up to its last '.'; the rest is filtered
// client-side. The whole bucket is {"$KV.<bucket>.>"}.
std::vector<std::string> ScopeFilters(std::string_view bucket, const Scope& scope);

// What a KV message does, from its headers: `KV-Operation` DEL or PURGE is
// a delete; so is a nats-server 2.11+ limit marker (`Nats-Marker-Reason`
// MaxAge, Purge or Remove, no KV-Operation), which is never a value.
// Neither header: a put. nullopt for a KV-Operation kvfold does not know.
std::optional<Op> OpOfHeaders(std::string_view kv_operation, std::string_view marker_reason);

// What a JetStream delivery's ack reply subject says about the message.
struct AckReply {
  int64_t time_ns = 0;  // when the stream stored the message
  uint64_t stream_seq = 0;
  uint64_t consumer_seq = 0;
  uint64_t pending = 0;
};

// Parses "$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>"
// and the 12-token form with domain and account hash. nullopt when the
// subject has another shape.
std::optional<AckReply> ParseAckReply(std::string_view reply);

}  // namespace kvfold::nats

#endif  // KVFOLD_NATS_KV_SUBJECTS_H_
