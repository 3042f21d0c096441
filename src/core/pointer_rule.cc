#include "core/pointer_rule.h"

#include "core/mutation.h"

namespace kvfold::core {

Status CheckPointerAdvance(const std::optional<ArtifactPointer>& current,
                           const ArtifactPointer& next) {
  if (!current || KVFOLD_MUTANT("pointer-any-direction")) return Status::OK();
  // Read and found wanting by this exporter, and still the pointer now.
  if (next.replaces_invalid && *next.replaces_invalid == current->artifact_id &&
      !KVFOLD_MUTANT("pointer-keep-invalid")) {
    return Status::OK();
  }
  if (current->bucket != next.bucket || current->stream_created != next.stream_created) {
    return Status::FailedPrecondition(
        "the latest pointer names artifact " + current->artifact_id + " of bucket " +
        current->bucket + " (stream created " + current->stream_created + "); artifact " +
        next.artifact_id + " is of bucket " + next.bucket + " (stream created " +
        next.stream_created +
        "): publish artifacts of different buckets or streams to different locations");
  }
  // The stream's last sequence only grows within one history, and it was
  // read after `current` was: a cursor beyond it is another history's.
  if (next.cursor <= current->cursor && next.replaces &&
      next.replaces->artifact_id == current->artifact_id &&
      current->cursor > next.replaces->stream_last_seq &&
      next.cursor <= next.replaces->stream_last_seq && !KVFOLD_MUTANT("pointer-keep-beyond-head")) {
    return Status::OK();
  }
  if (next.cursor <= current->cursor) {
    return Status::AlreadyExists(
        "the latest pointer already names artifact " + current->artifact_id + " at cursor " +
        std::to_string(current->cursor) + "; artifact " + next.artifact_id + " at cursor " +
        std::to_string(next.cursor) + " is not newer, so the pointer stays");
  }
  return Status::OK();
}

}  // namespace kvfold::core
