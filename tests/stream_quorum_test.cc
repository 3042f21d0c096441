// LeaderWithoutQuorum reads a STREAM.INFO reply's cluster section: a
// leader that has not heard from a majority of its replicas lately answers
// from a copy that no longer moves.

#include "nats/stream_quorum.h"

#include <gtest/gtest.h>

namespace kvfold::nats {
namespace {

using nlohmann::json;

constexpr int64_t kSecond = 1000000000;

json Info(const std::string& leader, const std::vector<json>& replicas) {
  return json{{"config", json::object()},
              {"cluster", json{{"name", "c"}, {"leader", leader}, {"replicas", replicas}}}};
}

json Peer(const std::string& name, int64_t active_ns, bool offline = false) {
  json p{{"name", name}, {"current", true}, {"active", active_ns}};
  if (offline) p["offline"] = true;
  return p;
}

// A single server, or a replicas-1 stream, has no one to lose.
TEST(StreamQuorumTest, NoClusterOrNoReplicasIsServed) {
  EXPECT_EQ(LeaderWithoutQuorum(json{{"config", json::object()}}), "");
  EXPECT_EQ(LeaderWithoutQuorum(Info("n1", {})), "");
}

// Invariant: a leader with a majority heard from within 10 s serves, even
// with one of three replicas gone (a node down for maintenance).
TEST(StreamQuorumTest, AMajorityHeardFromServes) {
  EXPECT_EQ(LeaderWithoutQuorum(Info("n1", {Peer("n2", kSecond / 2), Peer("n3", 2 * kSecond)})),
            "");
  EXPECT_EQ(LeaderWithoutQuorum(Info("n1", {Peer("n2", kSecond), Peer("n3", 0, true)})), "");
  EXPECT_EQ(LeaderWithoutQuorum(Info("n1", {Peer("n2", 10 * kSecond), Peer("n3", 60 * kSecond)})),
            "");
}

// Invariant: a leader cut off from both other replicas (the netfaults
// cluster partition) does not serve, and the reason names them.
TEST(StreamQuorumTest, ALeaderCutOffFromItsPeersDoesNotServe) {
  const std::string why =
      LeaderWithoutQuorum(Info("n1", {Peer("n2", 11 * kSecond), Peer("n3", 0, true)}));
  EXPECT_NE(why.find("its leader n1 has not heard from n2, n3"), std::string::npos) << why;
  EXPECT_NE(why.find("no quorum of its 3 replicas"), std::string::npos) << why;
  // Five replicas, two heard from: 3 of 5 with the leader is a majority;
  // one heard from is not.
  EXPECT_EQ(LeaderWithoutQuorum(Info("n1", {Peer("a", 0), Peer("b", 0), Peer("c", 99 * kSecond),
                                            Peer("d", 99 * kSecond)})),
            "");
  EXPECT_NE(LeaderWithoutQuorum(Info("n1", {Peer("a", 0), Peer("b", 99 * kSecond),
                                            Peer("c", 99 * kSecond), Peer("d", 99 * kSecond)})),
            "");
  // No leader (a member answers for itself, listed among the replicas,
  // every peer's activity cleared: 2.14+), or a peer whose activity is
  // missing, counts against it.
  const std::string leaderless =
      LeaderWithoutQuorum(Info("", {Peer("n1", 0), Peer("n2", 0), Peer("n3", 0)}));
  EXPECT_NE(leaderless.find("no leader"), std::string::npos) << leaderless;
  EXPECT_NE(LeaderWithoutQuorum(Info("n1", {json{{"name", "n2"}}, json{{"name", "n3"}}})), "");
}

}  // namespace
}  // namespace kvfold::nats
