// StrandedConsumers keeps the consumers whose delete went unanswered and
// deletes them again: no server is asked twice within kRetryAfter of an
// unanswered try, and none is held forever.

#include "nats/stranded_consumers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace kvfold::nats {
namespace {

using Clock = StrandedConsumers::Clock;

// A delete that answers `answer` and records what it was asked.
struct Deleter {
  explicit Deleter(Status a = Status::OK()) : answer(std::move(a)) {}
  Status answer;
  std::vector<std::string> asked;
  StrandedConsumers::DeleteFn fn() {
    return [this](const std::string& stream, const std::string& consumer) {
      asked.push_back(stream + "." + consumer);
      return answer;
    };
  }
};

TEST(StrandedConsumersTest, DeletedOrAlreadyGoneOrRefusedAreDropped) {
  StrandedConsumers s;
  s.Add("KV_a", "c1");
  s.Add("KV_a", "c2");
  Deleter ok;
  EXPECT_EQ(s.DeleteHeld(Clock::now(), ok.fn()), 2u);
  EXPECT_EQ(ok.asked, (std::vector<std::string>{"KV_a.c1", "KV_a.c2"}));
  EXPECT_EQ(s.held(), 0u);

  s.Add("KV_a", "c3");
  Deleter gone(Status::NotFound("consumer not found"));
  EXPECT_EQ(s.DeleteHeld(Clock::now(), gone.fn()), 0u);
  EXPECT_EQ(s.held(), 0u);

  s.Add("KV_a", "c4");
  Deleter refused(Status::PermissionDenied("no"));
  EXPECT_EQ(s.DeleteHeld(Clock::now(), refused.fn()), 0u);
  EXPECT_EQ(s.held(), 0u);
}

// One unanswered delete stops the round: the server would not answer the
// next either, and each costs a request timeout.
TEST(StrandedConsumersTest, AnUnansweredDeleteStopsTheRoundAndWaitsBeforeTheNext) {
  StrandedConsumers s;
  s.Add("KV_a", "c1");
  s.Add("KV_a", "c2");
  Deleter down(Status::Unavailable("timeout"));
  const auto t0 = Clock::now();
  EXPECT_EQ(s.DeleteHeld(t0, down.fn()), 0u);
  EXPECT_EQ(down.asked.size(), 1u);
  EXPECT_EQ(s.held(), 2u);

  Deleter ok;
  EXPECT_EQ(s.DeleteHeld(t0 + StrandedConsumers::kRetryAfter / 2, ok.fn()), 0u);
  EXPECT_TRUE(ok.asked.empty());
  EXPECT_EQ(s.DeleteHeld(t0 + StrandedConsumers::kRetryAfter, ok.fn()), 2u);
  EXPECT_EQ(ok.asked, (std::vector<std::string>{"KV_a.c1", "KV_a.c2"}));  // oldest first
  EXPECT_EQ(s.held(), 0u);
}

// Moved to another server: it is asked at once, not after the wait the
// last one earned.
TEST(StrandedConsumersTest, RearmLetsTheNextServerTryAtOnce) {
  StrandedConsumers s;
  s.Add("KV_a", "c1");
  Deleter down(Status::Unavailable("timeout"));
  const auto t0 = Clock::now();
  (void)s.DeleteHeld(t0, down.fn());
  s.Rearm();
  Deleter ok;
  EXPECT_EQ(s.DeleteHeld(t0 + std::chrono::seconds(1), ok.fn()), 1u);
}

// A server that never answers is asked ever less often, but the consumer
// is not given up for it: it must still go when the node rejoins.
TEST(StrandedConsumersTest, TheWaitDoublesUpToItsBoundAndNoneIsGivenUpForSilence) {
  StrandedConsumers s;
  s.Add("KV_a", "c1");
  Deleter down(Status::Unavailable("timeout"));
  auto t = Clock::now();
  std::chrono::seconds wait = StrandedConsumers::kRetryAfter;
  for (int round = 0; round < 8; ++round) {
    (void)s.DeleteHeld(t, down.fn());
    EXPECT_EQ(down.asked.size(), static_cast<size_t>(round + 1));
    (void)s.DeleteHeld(t + wait - std::chrono::seconds(1), down.fn());
    EXPECT_EQ(down.asked.size(), static_cast<size_t>(round + 1)) << "asked within the wait";
    t += wait;
    wait = std::min(wait * 2, StrandedConsumers::kMaxWait);
  }
  EXPECT_EQ(wait, StrandedConsumers::kMaxWait);
  EXPECT_EQ(s.held(), 1u);
  Deleter ok;
  EXPECT_EQ(s.DeleteHeld(t, ok.fn()), 1u);
  EXPECT_EQ(s.held(), 0u);
}

TEST(StrandedConsumersTest, BeyondTheBoundTheOldestAreGivenUp) {
  StrandedConsumers s;
  for (size_t i = 0; i < StrandedConsumers::kMaxHeld + 3; ++i) s.Add("KV_a", std::to_string(i));
  EXPECT_EQ(s.held(), StrandedConsumers::kMaxHeld);
  Deleter ok;
  EXPECT_EQ(s.DeleteHeld(Clock::now(), ok.fn()), StrandedConsumers::kMaxHeld);
  EXPECT_EQ(ok.asked.front(), "KV_a.3");
}

}  // namespace
}  // namespace kvfold::nats
