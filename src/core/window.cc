#include "core/window.h"

#include "core/mutation.h"

namespace kvfold::core {

namespace {
constexpr const char* kNoRepairYet =
    " kvfold cannot repair this yet (no expiry repair policy is configured):"
    " mirror into a new, empty --fold directory to start over from the"
    " bucket's current state.";
}  // namespace

Status CheckWindow(const std::string& bucket, const StreamState& stream,
                   std::optional<uint64_t> position,
                   const std::string& recorded_created) {
  if (!recorded_created.empty() && recorded_created != stream.created &&
      !KVFOLD_MUTANT("window-ignore-identity")) {
    return Status::CursorExpired(
        "stream KV_" + bucket + " was created at " + stream.created +
        " but the fold was mirrored from the stream created at " +
        recorded_created + ": the bucket was deleted and recreated." +
        kNoRepairYet);
  }
  if (!position) return Status::OK();
  const uint64_t pos = *position;
  if (stream.last_seq < pos) {
    return Status::CursorExpired(
        "stream KV_" + bucket + " ends at sequence " +
        std::to_string(stream.last_seq) + " but the fold's cursor is " +
        std::to_string(pos) + ": the stream was reset or recreated." +
        kNoRepairYet);
  }
  if (stream.first_seq > pos + 1 && !KVFOLD_MUTANT("window-ignore-first-seq")) {
    return Status::CursorExpired(
        "cursor " + std::to_string(pos) + " expired: bucket " + bucket +
        " retains sequences from " + std::to_string(stream.first_seq) +
        " but the fold needs everything from " + std::to_string(pos + 1) +
        "; retention removed " + std::to_string(stream.first_seq - pos - 1) +
        " message(s) this fold never saw." + kNoRepairYet);
  }
  return Status::OK();
}

}  // namespace kvfold::core
