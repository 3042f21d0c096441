// A KV message as STREAM.MSG.GET answers it: the "message" object of the
// reply, with its subject, sequence, time, base64 headers and data.

#ifndef KVFOLD_NATS_STORED_MESSAGE_H_
#define KVFOLD_NATS_STORED_MESSAGE_H_

#include <nlohmann/json.hpp>
#include <string_view>

#include "kvfold/bucket.h"
#include "kvfold/status.h"

namespace kvfold::nats {

// Whether a STREAM.MSG.GET request was answered "no message found"
// (err_code 10037); any other 404 is a missing stream, which is an error.
bool IsNoMessageFound(const Status& s);

// The message of bucket `bucket` in `message` (the reply's "message"
// object), folded as a delivery would deliver it: its key, operation (from
// KV-Operation, and from Nats-Marker-Reason unless `read_marker` is false),
// stored time, and for a put its value and TTL deadline. Corruption when a
// field is missing or unreadable, or the subject is not in the bucket.
StatusOr<BucketMessage> MessageOfGetReply(std::string_view bucket, const nlohmann::json& message,
                                          bool read_marker = true);

}  // namespace kvfold::nats

#endif  // KVFOLD_NATS_STORED_MESSAGE_H_
