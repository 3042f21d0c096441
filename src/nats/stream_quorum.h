// Whether a stream's answer comes from a leader that can still make
// progress. A cluster node cut off from its peers stays the stream's
// leader for a while: it answers stream info from a copy that no longer
// moves, and its consumers keep sending idle heartbeats, so to a client it
// looks like a quiet bucket. Its own stream info gives it away: the peers
// it has not heard from lately.

#ifndef KVFOLD_NATS_STREAM_QUORUM_H_
#define KVFOLD_NATS_STREAM_QUORUM_H_

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

namespace kvfold::nats {

// A peer not heard from for longer counts as gone. The raft heartbeat is
// 1 s; a follower that is merely behind is still heard from.
inline constexpr std::chrono::seconds kPeerSilence{10};

// Empty when `info` (a STREAM.INFO reply) has no cluster section (a single
// server), or when it names a leader that has heard, within kPeerSilence,
// from enough replicas to form a majority with itself. Otherwise why not,
// for an error (no leader at all counts as not served).
std::string LeaderWithoutQuorum(const nlohmann::json& info);

}  // namespace kvfold::nats

#endif  // KVFOLD_NATS_STREAM_QUORUM_H_
