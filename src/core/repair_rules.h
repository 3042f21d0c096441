// The decisions of expiry repair, free of I/O, shared by the
// watcher, the repair drivers in src/repair, the simulation and the tests.

#ifndef KVFOLD_CORE_REPAIR_RULES_H_
#define KVFOLD_CORE_REPAIR_RULES_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "kvfold/artifact.h"
#include "kvfold/fold.h"
#include "kvfold/repair.h"
#include "kvfold/retention.h"
#include "kvfold/scope.h"

namespace kvfold::core {

// Why a repair runs.
enum class RepairCause {
  kExpired,     // first_seq > cursor + 1 at start (the window check)
  kFloorTrip,   // the floor guard saw retention pass the frontier mid-watch
  kUnanchored,  // the fold holds data but no cursor
  kFreshStart,  // no cursor, no data, and the listing is not the truth
  kRecreated,   // the stream is not the one the fold came from
  kReconcile,   // the periodic key-set diff (--reconcile-every)
};
const char* RepairCauseName(RepairCause cause);

enum class RepairAction {
  kRelist,   // key-listing diff, then resume
  kRestore,  // from the newest usable artifact
  kResync,   // None: re-list current values, delete nothing, warn
  kRefuse,   // fail the watch (CursorExpired), fold untouched
};
const char* RepairActionName(RepairAction action);

struct RepairChoice {
  RepairAction action = RepairAction::kRefuse;
  std::string why;  // one line with the numbers, for logs and errors
};

// Which repair `policy` runs for `cause` on a bucket with `retention`.
RepairChoice ChooseRepair(ExpiryRepair policy, RepairCause cause, const Retention& retention);

// What Restore needs to hold of an artifact (conditions (a)–(d); (e), the
// checksums, is checked by reading it).
struct RestoreTarget {
  std::string bucket;
  std::string stream_created;  // the stream as it is now
  Scope scope;                 // the watch's scope
  // The fold's cursor; nullopt when it has none or its revisions belong to
  // a recreated stream.
  std::optional<uint64_t> fold_cursor;
  uint64_t first_seq = 0;  // fresh
  // Fresh too: the marker TTL and the server's clock (StreamState), for
  // the marker window on a bucket with limit markers.
  int64_t marker_ttl_ns = 0;
  int64_t server_time_ns = 0;
  // Fresh: the stream's last sequence. An artifact beyond it describes a
  // history this stream no longer has (restored from a backup, same
  // identity). nullopt: not known, not checked.
  std::optional<uint64_t> last_seq = std::nullopt;
};

// OK when `manifest` may be restored onto `target` (its cursor at or below
// the stream's last sequence; on a bucket with limit markers, also: the
// stream stored nothing after its cursor, or its cursor's anchor is inside
// the marker window);
// otherwise
// FailedPrecondition naming the condition that fails and the numbers.
Status CheckRestore(const ArtifactManifest& manifest, const RestoreTarget& target);

// What a repair writes for one key, or nothing.
struct KeyChange {
  Entry entry;
  // False for bookkeeping the domain cannot see (a tombstone's revision
  // rebased onto a recreated stream): the apply hook is not called.
  bool hook = true;
};

// Restore's per-key rule. `fold`: the fold's entry (tombstones included);
// `artifact`: the artifact's live entry; `listed_live`: the bucket lists the
// key live (consulted only when the fold alone has it); `delete_revision`:
// the stream's last sequence read before that listing. With `rebase` the
// fold's revisions come from a recreated stream and are not compared.
std::optional<KeyChange> RestoreKey(const std::optional<Entry>& fold,
                                    const std::optional<Entry>& artifact, bool listed_live,
                                    uint64_t delete_revision, bool rebase);

// Relist's per-key rule for a fold entry: a live key the bucket does not
// list is deleted with revision `listing_revision` (the stream's last
// sequence read before the listing began) unless the entry is newer.
std::optional<KeyChange> RelistKey(const Entry& fold, bool listed_live, uint64_t listing_revision,
                                   bool rebase);

// The floor guard: OK while the stream still retains everything
// after the verified frontier: first_seq <= frontier + 1.
bool FloorHolds(uint64_t first_seq, uint64_t frontier);

// The catch-up proof: with `last_seq` read first, nothing in scope up to it
// is still to come when the store's first retained in-scope message after
// what was received is past it (or there is none).
bool NothingInScopeToCome(uint64_t last_seq, std::optional<uint64_t> first_in_scope_after);

// When to run the next idle floor probe: a quarter of the time retention needs to
// reach the frontier: the messages between the stream's first retained one
// and the frontier, plus what max_msgs still leaves room for, at the
// observed write rate (an upper bound on how fast a count limit moves the
// head; `write_rate` < 0 when not measured yet: soon); at most 200 ms on a
// bucket with max_msgs or max_bytes, a quarter of max_age; clamped to
// [10 ms, `longest`].
std::chrono::milliseconds NextFloorProbe(const StreamState& stream, uint64_t frontier,
                                         double write_rate, std::chrono::milliseconds longest);

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_REPAIR_RULES_H_
