// Who may take an export lease: the rule the NATS lease applies to the
// record it reads (tests/live/artifact_live_test.cc runs it on a server).

#include <gtest/gtest.h>

#include "nats/lease_record.h"

namespace kvfold::nats {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;
constexpr int64_t kMinute = 60'000;

TEST(LeaseRuleTest, AnotherHoldersLeaseHoldsForAFewPeriodsAtMost) {
  EXPECT_EQ(StateOf({"a", kNow + kMinute}, "a", kNow, kMinute), LeaseState::kFree);  // its own
  EXPECT_EQ(StateOf({"b", kNow}, "a", kNow, kMinute), LeaseState::kFree);            // expired
  EXPECT_EQ(StateOf({"b", kNow + kMinute}, "a", kNow, kMinute), LeaseState::kHeld);
  // A holder with a longer period (up to 4 of the asker's) and a clock a
  // minute ahead still holds it.
  EXPECT_EQ(StateOf({"b", kNow + 5 * kMinute}, "a", kNow, kMinute), LeaseState::kHeld);
  // Further ahead than that, no holder set it: squatted (issue 36, item 4;
  // mutant lease-trust-far-expiry).
  EXPECT_EQ(StateOf({"b", kNow + 5 * kMinute + 1}, "a", kNow, kMinute), LeaseState::kImplausible);
  EXPECT_EQ(StateOf({"b", INT64_MAX}, "a", kNow, kMinute), LeaseState::kImplausible);
}

}  // namespace
}  // namespace kvfold::nats
