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

// What a KV message does, from its headers, as nats.go folds it:
// `KV-Operation` DEL or PURGE is a delete; any other KV-Operation is a put
// (a client may write any header). Without KV-Operation, a nats-server
// 2.11+ limit marker (`Nats-Marker-Reason` MaxAge, Purge or Remove) is a
// delete too, never a value. Neither header: a put.
Op OpOfHeaders(std::string_view kv_operation, std::string_view marker_reason);

// Whether a delivered message is the server's status (an idle heartbeat,
// a flow-control request, a consumer's end) rather than a stored message,
// decided as the NATS clients decide it: a status has no JetStream ack
// reply (`reply` is the flow-control subject or empty), an empty body and
// a status. nats.c keeps the status line in an ordinary `Status` header,
// so `status` may just as well be a header a client wrote on a message of
// the stream; that message comes with an ack reply, and is data.
bool IsServerStatus(std::string_view reply, size_t body_size, std::string_view status);

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
