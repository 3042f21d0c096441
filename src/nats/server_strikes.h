// How badly the connected server is serving this bucket: strikes for each
// request it could not answer and for each delivery that went silent while
// the connection stayed up, cleared by any sign of life on a delivery. A
// cluster node cut off from its peers keeps the client connection (so
// nats.c stays on it) and may still answer stream info from its stale
// copy, or accept a consumer that never delivers: only a delivery heard
// from proves the server serves. NatsBucket moves to another server of the
// list at kMoveAt strikes.
//
// Thread safety: deliveries and the bucket that opened them may be used
// from different threads; every method is safe to call concurrently.

#ifndef KVFOLD_NATS_SERVER_STRIKES_H_
#define KVFOLD_NATS_SERVER_STRIKES_H_

#include <atomic>

namespace kvfold::nats {

class ServerStrikes {
 public:
  static constexpr int kMoveAt = 3;
  // A request the server could not answer (503, timeout).
  static constexpr int kUnanswered = 1;
  // Stream info with a head behind what a delivery already brought (the
  // server's copy may be the one lagging; it may as well be the leader's
  // answer racing a follower's delivery).
  static constexpr int kLagging = 1;
  // Three heartbeat intervals of silence on a delivery (15 s by default):
  // stronger evidence, so one more failure moves.
  static constexpr int kSilent = 2;

  void Add(int strikes) { strikes_.fetch_add(strikes, std::memory_order_relaxed); }
  // A message or heartbeat arrived. Called per message: no write unless
  // there is something to clear.
  void Alive() {
    if (strikes_.load(std::memory_order_relaxed) != 0) strikes_.store(0, std::memory_order_relaxed);
  }
  bool ShouldMove() const { return strikes_.load(std::memory_order_relaxed) >= kMoveAt; }
  // A move was tried and failed: the server gets a fresh count.
  void Clear() { strikes_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<int> strikes_{0};
};

}  // namespace kvfold::nats

#endif  // KVFOLD_NATS_SERVER_STRIKES_H_
