// A message's per-message TTL (its Nats-TTL header, nats-server 2.11+), read
// as the server reads it, and the deadline it gives the message.

#ifndef KVFOLD_CORE_MESSAGE_TTL_H_
#define KVFOLD_CORE_MESSAGE_TTL_H_

#include <cstdint>
#include <string_view>

#include "kvfold/bucket.h"

namespace kvfold::core {

// The TTL in whole seconds as nats-server parses the header: "never" (any
// case) is -1; a Go duration ("90s", "1h30m", "1.5h") of at least a second
// is its seconds, truncated; else a plain count of seconds. 0 for no
// header, for "0" and for anything the server refuses.
int64_t ParseMessageTtlSeconds(std::string_view header);

// When a message stored at server time `time_ns` with that header leaves
// the stream: time_ns plus the TTL (the server's rule). 0 when it has no
// deadline: no TTL, "never", or an unknown stored time.
int64_t MessageDeadlineNs(int64_t time_ns, std::string_view header);

// An expiry on this bucket may leave no trace in the stream, so a fold must
// follow each key's deadline itself: it allows per-message TTL and writes
// no limit markers, or keeps history (nats-server marks only a subject's
// last message; an earlier one's expiry uncovers the one before).
bool ExpiriesMayGoUnmarked(const StreamState& state);

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_MESSAGE_TTL_H_
