// The repair drivers: Relist (key-listing diff) and Restore (from an
// artifact), run by the watch loop after it has folded and flushed
// everything it received. The rules they apply live in core/repair_rules.h.

#ifndef KVFOLD_REPAIR_REPAIR_DRIVERS_H_
#define KVFOLD_REPAIR_REPAIR_DRIVERS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "kvfold/bucket.h"
#include "kvfold/clock.h"
#include "kvfold/fold.h"
#include "repair/repair_context.h"

namespace kvfold::repair {

struct RelistResult {
  uint64_t listing_revision = 0;  // the stream's last_seq read before the listing
  // The server's clock read before the listing began (0: unknown): the
  // cursor's new anchor (FoldMeta::cursor_time_ns).
  int64_t anchor_ns = 0;
  uint64_t listed = 0;
  uint64_t deleted = 0;
  bool stopped = false;  // a stop request ended it between commits
};

// Deletes, through the hook and with `origin`, the fold's live keys in
// `scope` that the bucket does not list, each with the listing's revision.
// With `rebase` (a recreated stream) every surviving entry is rebased to
// revision 0. The fold's cursor is not moved; `final_meta` goes into the last
// commit. With `anchor_cursor` (the fold has a cursor) that commit also
// anchors the cursor at the server time read before the listing began: on
// a bucket with limit markers every expiry before it shows in the listing,
// so from there on only markers written after it must be read in time.
// FailedPrecondition when the key listing stopped being the truth during
// the listing (the bucket evicted meanwhile): nothing was written.
Status RunRelist(RepairContext& ctx, const Scope& scope, ChangeOrigin origin, bool rebase,
                 bool anchor_cursor, FoldCommit final_meta, RelistResult* out);

struct RestoreRequest {
  Scope scope;
  std::optional<uint64_t> fold_cursor;  // nullopt: none, or rebase
  bool rebase = false;
  // The marker TTL the watch measures windows with (core::MarkerTtl); the
  // artifact's window uses the smaller of it and the bucket's.
  int64_t marker_ttl_ns = 0;
};

struct RestoreResult {
  std::string artifact_id;
  uint64_t cursor = 0;  // the artifact's: the fold's cursor now
  uint64_t taken = 0;   // entries taken from the artifact
  uint64_t deleted = 0;
  uint64_t listed = 0;
  int attempts = 0;
  bool stopped = false;
  // The bucket's marker window as last read (core/marker_window.h), or 0:
  // a restore waiting for a fresh enough artifact retries at least this
  // often, or it could never catch one inside the window.
  int64_t marker_window_ns = 0;
};

// Restores from the newest usable artifact of ctx.artifacts,
// waiting with backoff up to ctx.repair_timeout for one to appear.
// The cursor moves to the artifact's only in the final commit, with the
// stream identity and the eviction memo. CursorExpired when no usable
// artifact appeared in time (the fold may hold finished chunks, all under
// the old cursor); a store error when the fold fails.
Status RunRestore(RepairContext& ctx, const RestoreRequest& request, RestoreResult* out);

}  // namespace kvfold::repair

#endif  // KVFOLD_REPAIR_REPAIR_DRIVERS_H_
