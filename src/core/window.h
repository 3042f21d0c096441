// The resume window check: may a fold at `position` resume on this stream?
//
// NATS clamps a start sequence below the first retained one without an
// error, so this check is the only thing that notices evicted history.

#ifndef KVFOLD_CORE_WINDOW_H_
#define KVFOLD_CORE_WINDOW_H_

#include <cstdint>
#include <optional>
#include <string>

#include "kvfold/bucket.h"
#include "kvfold/status.h"

namespace kvfold::core {

// OK when a watch that has received everything in scope through `position`
// can continue on `stream`: the stream is the one the fold recorded
// (`recorded_created`, "" when none yet), it has not gone backward
// (last_seq >= position) and it still retains position + 1 (first_seq <=
// position + 1). Without a position (a state sync) only identity matters.
// Otherwise CursorExpired with a message that names the numbers and the fix.
Status CheckWindow(const std::string& bucket, const StreamState& stream,
                   std::optional<uint64_t> position,
                   const std::string& recorded_created);

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_WINDOW_H_
