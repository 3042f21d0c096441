// The marker window (per-message TTL): how long a position in the
// stream stays resumable on a bucket that writes limit markers.
//
// On nats-server 2.11+ an expiry that empties a key writes a limit marker,
// and the marker itself expires after the bucket's marker TTL M with no
// trace. Interior removals leave no gap at the head, so first_seq proves
// nothing there: a reader at position P has missed nothing only if it reads
// on before any marker written after P expires. Every message after P was
// stored at or after P's *anchor* (a server time: the stored time of the
// message at P, or a later server time at which the stream held nothing
// after P), so reading on from P is safe while the server's clock is
// within the window W = M - margin of the anchor.

#ifndef KVFOLD_CORE_MARKER_WINDOW_H_
#define KVFOLD_CORE_MARKER_WINDOW_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvfold/bucket.h"

namespace kvfold::core {

// The window W in ns for `stream`, or nullopt when the bucket writes no
// limit markers (the rule does not apply). The margin is a tenth of M, at
// least 250 ms: clock steps between a cluster's leaders, a reply's delay.
std::optional<int64_t> MarkerWindowNs(const StreamState& stream);

// How often a reader re-checks against window `window_ns` so that it never
// misses it: a quarter of it, at least 10 ms (an idle probe's pace, a
// restore's wait for a fresh artifact).
std::chrono::milliseconds QuarterWindow(int64_t window_ns);

// True when a reader anchored at `anchor_ns` may still read on at server
// time `now_ns` under window `window_ns`. An unknown anchor or server time
// (0) proves nothing: false.
bool InsideMarkerWindow(int64_t anchor_ns, int64_t now_ns, int64_t window_ns);

// The message for a position outside the window: "<what> was last current
// at <time> (<n> s ago by the server's clock); limit markers on bucket B
// live <m> s, so ...".
std::string DescribeMarkerWindowMiss(std::string_view what, std::string_view bucket,
                                     int64_t anchor_ns, int64_t now_ns, const StreamState& stream);

// The marker TTL a position's window is measured with. A marker keeps the
// TTL it was written with, so after the bucket's marker TTL is raised (or
// markers are turned off) the markers written before still expire on the
// old one: the smaller TTL holds until a position's anchor passes the
// server time the change was first seen. A lowered TTL holds at once.
class MarkerTtl {
 public:
  // `recorded_ns`: what the fold recorded (FoldMeta::marker_ttl_ns).
  explicit MarkerTtl(int64_t recorded_ns = 0) : effective_(recorded_ns) {}
  // Takes a fresh reading of the bucket, for a reader anchored at
  // `anchor_ns`. True when the effective TTL changed (record it).
  bool Observe(const StreamState& stream, int64_t anchor_ns);
  int64_t effective_ns() const { return effective_; }
  // `stream` with its marker TTL replaced by the effective one.
  StreamState Apply(StreamState stream) const {
    stream.marker_ttl_ns = effective_;
    return stream;
  }

 private:
  int64_t effective_ = 0;
  int64_t change_seen_at_ = 0;  // server time `changed_to_` was first seen
  int64_t changed_to_ = 0;      // the larger TTL (or 0, none) waited for
};

// "2026-12-01T10:53:33.204078132Z" -> ns since the Unix epoch; nullopt for
// anything else (a JetStream API time, always UTC). The zero time
// "0001-01-01T00:00:00Z" parses as 0 (unknown).
std::optional<int64_t> ParseApiTimeNs(std::string_view text);
// ns since the Unix epoch -> "2026-12-01T10:53:33.204Z"; "<unknown>" for 0.
std::string FormatTimeNs(int64_t ns);

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_MARKER_WINDOW_H_
