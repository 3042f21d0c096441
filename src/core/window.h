// The resume window check: may a watch that has everything in scope
// through `frontier` continue on this stream?
//
// NATS clamps a start sequence below the first retained one without an
// error, so this check is what notices evicted history.

#ifndef KVFOLD_CORE_WINDOW_H_
#define KVFOLD_CORE_WINDOW_H_

#include <cstdint>
#include <optional>
#include <string>

#include "kvfold/bucket.h"

namespace kvfold::core {

enum class WindowFault {
  kNone,
  kRecreated,  // another stream identity, or last_seq below the frontier
  kExpired,    // first_seq > frontier + 1: history after it was evicted
};

// kNone when a watch at `frontier` can continue on `stream`: the stream is
// the one the fold recorded (`recorded_created`, "" when none yet), it has
// not gone backward (last_seq >= frontier) and it still retains
// frontier + 1. Without a frontier (a state sync) only identity matters.
// Otherwise the fault, with a message naming the numbers in *why.
WindowFault CheckWindow(const std::string& bucket, const StreamState& stream,
                        std::optional<uint64_t> frontier, const std::string& recorded_created,
                        std::string* why);

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_WINDOW_H_
