#include "core/meta_merge.h"

#include <string>

#include "core/mutation.h"

namespace kvfold::core {

Status MergeCommitMeta(const FoldCommit& commit, FoldMeta* meta) {
  const bool rebase = commit.rebase && commit.stream_created;
  if (commit.new_keys && (!commit.counts || commit.clear_entries || commit.rebase)) {
    return Status::InvalidArgument(
        "a commit of new keys states its count change and neither clears nor rebases the fold");
  }
  if (commit.uncounted &&
      (commit.counts || commit.new_keys || commit.bulk || commit.clear_entries)) {
    return Status::InvalidArgument(
        "an uncounted commit neither states counts nor is new keys, bulk or a clear");
  }
  if (commit.cursor && meta->cursor && *commit.cursor < *meta->cursor && !rebase &&
      !KVFOLD_MUTANT("fold-cursor-backward")) {
    return Status::FailedPrecondition("refusing to move the fold's cursor backward from " +
                                      std::to_string(*meta->cursor) + " to " +
                                      std::to_string(*commit.cursor));
  }
  if (commit.cursor_time_ns) {
    meta->cursor_time_ns = *commit.cursor_time_ns;
  } else if (commit.cursor && commit.cursor != meta->cursor) {
    meta->cursor_time_ns = 0;  // a new cursor, anchor unknown
  }
  if (commit.cursor) meta->cursor = commit.cursor;
  if (commit.marker_ttl_ns &&
      (*commit.marker_ttl_ns > 0 || !KVFOLD_MUTANT("meta-marker-ttl-off-ignored"))) {
    meta->marker_ttl_ns = *commit.marker_ttl_ns;  // 0: markers turned off
  }
  if (commit.bucket) meta->bucket = *commit.bucket;
  if (commit.scope) meta->scope = commit.scope;
  if (commit.stream_created) meta->stream_created = *commit.stream_created;
  if (commit.seeding) meta->seeding = *commit.seeding;
  // The memo is permanent; only a fold rebuilt against a recreated stream
  // starts the new stream's memo over.
  if (commit.eviction_observed && (*commit.eviction_observed || rebase)) {
    const bool had = meta->eviction_observed;
    meta->eviction_observed = *commit.eviction_observed;
    if (!meta->eviction_observed) {
      meta->eviction_cause.clear();
    } else if (!had || rebase) {
      meta->eviction_cause = commit.eviction_cause.value_or(std::string(kEvictionCauseUnknown));
    }
  }
  if (commit.last_repair) meta->last_repair = *commit.last_repair;
  return Status::OK();
}

}  // namespace kvfold::core
