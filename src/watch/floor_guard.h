// The floor guard's positions: what the watch loop has received, what it
// has proven, and the server times they are anchored at. It owns only that
// state and the rules that move it; the watch loop reads the stream,
// decides when to check, and turns a failed check into a repair.
//
// Three positions, all stream sequences:
//  - received: everything in scope up to here has arrived (or the store
//    proved there was nothing); a new delivery starts after it.
//  - verified: the frontier the floor guard has proven: no in-scope message
//    at or below it was evicted before it arrived. A check that reads
//    first_seq <= verified + 1 proves everything received before the read.
//  - the cursor, committed with the data: min(received, verified), so a
//    crash never leaves a cursor past an unproven stretch.
// On a bucket with limit markers (nats-server 2.11+) each position also
// has an anchor, a server time (core/marker_window.h): reading on past a
// position is safe only within the marker window of its anchor, since an
// interior TTL removal leaves no gap at the head and an expired marker
// leaves no trace. Once a stretch is read too late the anchor is lost: no
// check passes until a repair re-anchors the guard with ResetTo.
//
// Not thread-safe: the watch loop's thread owns it.

#ifndef KVFOLD_WATCH_FLOOR_GUARD_H_
#define KVFOLD_WATCH_FLOOR_GUARD_H_

#include <cstdint>
#include <optional>
#include <utility>

#include "kvfold/bucket.h"
#include "kvfold/clock.h"

namespace kvfold {

class FloorGuard {
 public:
  // Every position at `cursor` (none: nothing received yet), anchored at
  // `anchor_ns` (0: unknown), the anchor valid again. A `new_stream` (the
  // bucket was recreated) also drops the relist floor. The one re-anchor
  // that starting from a fold and every repair outcome go through.
  void ResetTo(std::optional<uint64_t> cursor, int64_t anchor_ns, bool new_stream);

  const std::optional<uint64_t>& received() const { return received_; }
  uint64_t verified() const { return verified_; }
  int64_t received_anchor() const { return received_anchor_; }
  int64_t verified_anchor() const { return verified_anchor_; }
  uint64_t relist_floor() const { return relist_floor_; }
  bool anchor_lost() const { return anchor_lost_; }
  // Something received is not proven yet.
  bool unverified() const { return received_ && verified_ < *received_; }

  // The cursor a commit would carry now, min(received, verified); none
  // before anything is received.
  std::optional<uint64_t> Cursor() const;
  // That cursor's anchor.
  int64_t CursorAnchor() const {
    return received_ && *received_ <= verified_ ? received_anchor_ : verified_anchor_;
  }
  // The frontier the floor is checked against on `state`: past verified up
  // to the relist floor only while the bucket keeps current values.
  uint64_t Frontier(const StreamState& state) const;

  // A delivered message at `seq`, stored at server time `time_ns`: true if
  // it repeats what was received (a re-created delivery may).
  bool AlreadyReceived(uint64_t seq) const { return received_ && seq <= *received_; }
  // True if `seq` leaves a stretch after received with nothing delivered.
  bool Jumps(uint64_t seq) const { return received_ && seq > *received_ + 1; }
  // Takes the message: consecutive sequences after a proven position stay
  // proven; a jump leaves its stretch for the next floor check.
  void Receive(uint64_t seq, int64_t time_ns);
  // The store holds nothing in scope up to `last`, and everything after it
  // was stored after server time `ts_ns`.
  void ReceiveQuietStretch(uint64_t last, int64_t ts_ns);
  // The stream stored nothing after received as of server time `ts_ns`.
  void ReanchorReceived(int64_t ts_ns);
  // verified := received (everything received is proven), with its anchor.
  void VerifyReceived();
  // A relist at server time `ts_ns` put every expiry before it into the
  // fold: received and verified are anchored there, the anchor valid again.
  void ReanchorAfterListing(int64_t ts_ns);
  // A state sync from a consumer created when the stream began at
  // `first_seq` and the server read `ts_ns`: what retention removed before
  // is superseded. `forget_received` (repair none's resync) starts received
  // afresh.
  void StartStateSync(uint64_t first_seq, int64_t ts_ns, bool forget_received);
  // A relist put every delete at or below `revision` into the fold.
  void RaiseRelistFloor(uint64_t revision) { relist_floor_ = std::max(relist_floor_, revision); }
  // A stretch after received was read outside the marker window. Returns
  // true the first time (until the next ResetTo).
  bool LoseAnchor();
  // Received's anchor is still inside a marker window of `window_ns` at
  // server time `now_ns`, and the anchor was never lost.
  bool ReceivedInsideWindow(int64_t now_ns, int64_t window_ns) const;

  // A floor check read `last_seq` at `at`. The write rate (an upper bound
  // on how fast a count limit moves the head) is quick to rise and slow to
  // fall, so a burst never finds the probe asleep.
  void SampleWrites(Clock::TimePoint at, uint64_t last_seq);
  double write_rate() const { return write_rate_; }  // < 0: not measured yet

 private:
  std::optional<uint64_t> received_;
  uint64_t verified_ = 0;
  // After a relist: every delete at or below this is in the fold. On a
  // bucket that does not evict current values nothing else can be missing,
  // so the floor may stand here; honoured only while the fresh retention
  // says so (limits can be edited live).
  uint64_t relist_floor_ = 0;
  // Every message after the position was stored at or after its anchor.
  int64_t received_anchor_ = 0;
  int64_t verified_anchor_ = 0;
  bool anchor_lost_ = false;
  std::optional<std::pair<Clock::TimePoint, uint64_t>> write_sample_;
  double write_rate_ = -1;
};

}  // namespace kvfold

#endif  // KVFOLD_WATCH_FLOOR_GUARD_H_
