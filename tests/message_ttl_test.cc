// The Nats-TTL header as nats-server reads it (server/stream.go,
// parseMessageTTL): a wrong reading moves a key's deadline.

#include "core/message_ttl.h"

#include <gtest/gtest.h>

namespace kvfold::core {
namespace {

TEST(MessageTtlTest, ReadsTheHeaderAsTheServerDoes) {
  EXPECT_EQ(ParseMessageTtlSeconds(""), 0);
  EXPECT_EQ(ParseMessageTtlSeconds("never"), -1);
  EXPECT_EQ(ParseMessageTtlSeconds("NEVER"), -1);
  EXPECT_EQ(ParseMessageTtlSeconds("30"), 30);
  EXPECT_EQ(ParseMessageTtlSeconds("0"), 0);
  EXPECT_EQ(ParseMessageTtlSeconds("30s"), 30);
  EXPECT_EQ(ParseMessageTtlSeconds("1m30s"), 90);
  EXPECT_EQ(ParseMessageTtlSeconds("1.5h"), 5400);
  EXPECT_EQ(ParseMessageTtlSeconds("2500ms"), 2);  // truncated to whole seconds
  EXPECT_EQ(ParseMessageTtlSeconds("1000ms"), 1);
  EXPECT_EQ(ParseMessageTtlSeconds("1h0m0.5s"), 3600);
  // Every unit Go's time.ParseDuration knows, and its sign.
  EXPECT_EQ(ParseMessageTtlSeconds("3000000us"), 3);
  EXPECT_EQ(ParseMessageTtlSeconds("3000000\xC2\xB5s"), 3);  // U+00B5 micro sign
  EXPECT_EQ(ParseMessageTtlSeconds("3000000\xCE\xBCs"), 3);  // U+03BC Greek mu
  EXPECT_EQ(ParseMessageTtlSeconds("4000000000ns"), 4);
  EXPECT_EQ(ParseMessageTtlSeconds("+5s"), 5);
  EXPECT_EQ(ParseMessageTtlSeconds("2h"), 7200);
  // Refused by the server (so never stored): no deadline.
  EXPECT_EQ(ParseMessageTtlSeconds("500ms"), 0);  // under a second
  EXPECT_EQ(ParseMessageTtlSeconds("-5s"), 0);
  EXPECT_EQ(ParseMessageTtlSeconds("-1"), 0);
  EXPECT_EQ(ParseMessageTtlSeconds("5x"), 0);
  EXPECT_EQ(ParseMessageTtlSeconds("s"), 0);
  EXPECT_EQ(ParseMessageTtlSeconds("1 s"), 0);
  EXPECT_EQ(ParseMessageTtlSeconds("99999999999999999999"), 0);
}

TEST(MessageTtlTest, TheDeadlineIsTheStoredTimePlusTheTtl) {
  const int64_t stored = 1'796'122'413'204'078'132;
  EXPECT_EQ(MessageDeadlineNs(stored, "90s"), stored + 90'000'000'000);
  EXPECT_EQ(MessageDeadlineNs(stored, "7"), stored + 7'000'000'000);
  EXPECT_EQ(MessageDeadlineNs(stored, "never"), 0);
  EXPECT_EQ(MessageDeadlineNs(stored, ""), 0);
  EXPECT_EQ(MessageDeadlineNs(0, "90s"), 0);              // stored time unknown
  EXPECT_EQ(MessageDeadlineNs(stored, "9223372036"), 0);  // past any clock
}

}  // namespace
}  // namespace kvfold::core
