#include "core/window.h"

#include "core/mutation.h"
#include "core/repair_rules.h"

namespace kvfold::core {

WindowFault CheckWindow(const std::string& bucket, const StreamState& stream,
                        std::optional<uint64_t> frontier, const std::string& recorded_created,
                        std::string* why) {
  if (!recorded_created.empty() && recorded_created != stream.created &&
      !KVFOLD_MUTANT("window-ignore-identity")) {
    *why = "stream KV_" + bucket + " was created at " + stream.created +
           " but the fold was mirrored from the stream created at " + recorded_created +
           ": the bucket was deleted and recreated";
    return WindowFault::kRecreated;
  }
  if (!frontier) return WindowFault::kNone;
  const uint64_t pos = *frontier;
  if (stream.last_seq < pos) {
    *why = "stream KV_" + bucket + " ends at sequence " + std::to_string(stream.last_seq) +
           " but the fold has everything through " + std::to_string(pos) +
           ": the stream was reset or recreated";
    return WindowFault::kRecreated;
  }
  if (!FloorHolds(stream.first_seq, pos) && !KVFOLD_MUTANT("window-ignore-first-seq")) {
    *why = "cursor " + std::to_string(pos) + " expired: bucket " + bucket +
           " retains sequences from " + std::to_string(stream.first_seq) +
           " but the fold needs everything from " + std::to_string(pos + 1) +
           "; retention removed " + std::to_string(stream.first_seq - pos - 1) +
           " message(s) this fold never saw";
    return WindowFault::kExpired;
  }
  return WindowFault::kNone;
}

}  // namespace kvfold::core
