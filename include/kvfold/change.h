// A change to a fold, as the apply hook sees it (WatchOptions::apply):
// from a delivered message, or from a repair.
//
// Thread safety: plain values; the views inside a Change are valid only
// during the hook call that receives it.

#ifndef KVFOLD_CHANGE_H_
#define KVFOLD_CHANGE_H_

#include <cstdint>
#include <functional>
#include <string_view>

#include "kvfold/bucket.h"
#include "kvfold/status.h"

namespace kvfold {

// Where a change comes from.
enum class ChangeOrigin {
  kLive,       // a delivered message (also a state sync's)
  kRelist,     // a key-listing diff deleted a key the bucket no longer lists
  kRestore,    // taken from an artifact, or deleted by a restore
  kReconcile,  // the periodic key-set diff deleted a key
  kExpiry,     // the key's per-message TTL passed (Entry::expires_ns) and no
               // limit marker says so: deleted at its revision, or, where the
               // bucket keeps history, back to its previous message's state
};
std::string_view ChangeOriginName(ChangeOrigin origin);  // "live", "relist", ...

// One change to the fold, as the apply hook sees it. The views are valid
// only during the hook call.
struct Change {
  std::string_view key;
  Op op = Op::kPut;
  std::string_view value;  // empty for delete and purge
  // > previous_revision, except when a fold is rebuilt against a recreated
  // stream (whose sequences start over), and for an expiry (kExpiry): the
  // revision that expired (== previous_revision), with a delete, or where
  // the bucket keeps history the state of the key's previous message that
  // the expiry uncovered (a put with that message's value and deadline, or
  // a delete). Revisions never go backward.
  uint64_t revision = 0;
  uint64_t previous_revision = 0;  // the key's last revision in the fold, 0 if none
  // A put's deadline: when its per-message TTL (Nats-TTL) removes it, by the
  // server's clock (ns since the Unix epoch); 0 for none (Entry::expires_ns).
  int64_t expires_ns = 0;
  ChangeOrigin origin = ChangeOrigin::kLive;
};

// The apply hook: sees every change before the commit holding it. A
// non-OK return stops the watch (or the repair) before the cursor passes
// the change.
using ApplyHook = std::function<Status(const Change&)>;

}  // namespace kvfold

#endif  // KVFOLD_CHANGE_H_
