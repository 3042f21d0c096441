// Expiry repair: what a watch does when retention evicted history its fold
// needs (the README's "Repair policies"). Where a restore finds artifacts:
// artifact_source.h.
//
// A repair runs when the fold's cursor expired (at start, or mid-watch when
// the floor guard trips), when the fold holds data but no cursor (an
// unanchored fold, repaired like an expiry at revision 0), on a cursor-less
// start on a bucket whose key listing is not the truth, and when the stream
// was recreated. Every change a repair makes reaches the apply hook, tagged
// with its origin, and commits under the old cursor; the cursor moves only
// in a repair's final commit, so a crash mid-repair re-runs it.

#ifndef KVFOLD_REPAIR_H_
#define KVFOLD_REPAIR_H_

#include <string_view>

#include "kvfold/artifact_source.h"
#include "kvfold/status.h"

namespace kvfold {

enum class ExpiryRepair {
  // No repair: re-list current values without deleting anything, with a
  // warning that deleted or aged-out keys may persist. The way to start the
  // first node of a fleet on a bucket that has already evicted and has no
  // artifact yet.
  kNone,
  // Key-listing diff: delete fold keys the bucket no longer lists, then
  // resume. Only when the listing is the truth (see retention.h); refused
  // otherwise, fold untouched.
  kRelist,
  // Restore from the newest usable artifact, key by key (newer wins, a key
  // is deleted only if the bucket does not list it live), then resume from
  // the artifact's cursor.
  kRestore,
  // Relist when the listing is the truth, otherwise Restore. Never lossy:
  // it refuses rather than guess.
  kAuto,
};

std::string_view ExpiryRepairName(ExpiryRepair repair);  // "none", "relist", ...
// Parses "auto", "relist", "restore" or "none"; InvalidArgument naming the
// choices otherwise.
StatusOr<ExpiryRepair> ParseExpiryRepair(std::string_view name);

}  // namespace kvfold

#endif  // KVFOLD_REPAIR_H_
