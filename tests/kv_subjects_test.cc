#include "nats/kv_subjects.h"

#include <gtest/gtest.h>

namespace kvfold::nats {
namespace {

TEST(KvSubjectsTest, KeyOfSubject) {
  EXPECT_EQ(KeyOfSubject("b", "$KV.b.a.c"), "a.c");
  EXPECT_FALSE(KeyOfSubject("b", "$KV.bb.a"));
  EXPECT_FALSE(KeyOfSubject("b", "$KV.b."));
}

TEST(KvSubjectsTest, ScopeFiltersCoverEveryKeyInScope) {
  EXPECT_EQ(ScopeFilters("b", Scope()), (std::vector<std::string>{"$KV.b.>"}));
  EXPECT_EQ(ScopeFilters("b", *Scope::Make({"a."})), (std::vector<std::string>{"$KV.b.a.>"}));
  // "a.us" cannot be a subject filter: only "a." is a whole token.
  EXPECT_EQ(ScopeFilters("b", *Scope::Make({"a.us"})), (std::vector<std::string>{"$KV.b.a.>"}));
  EXPECT_EQ(ScopeFilters("b", *Scope::Make({"user"})), (std::vector<std::string>{"$KV.b.>"}));
  EXPECT_EQ(ScopeFilters("b", *Scope::Make({"a.", "c.d."})),
            (std::vector<std::string>{"$KV.b.a.>", "$KV.b.c.d.>"}));
  // Overlapping filters would be refused by the server: the wider one wins.
  EXPECT_EQ(ScopeFilters("b", *Scope::Make({"a.x", "a.b."})),
            (std::vector<std::string>{"$KV.b.a.>"}));
  EXPECT_EQ(ScopeFilters("b", *Scope::Make({"a.", "user"})), (std::vector<std::string>{"$KV.b.>"}));
  // The covering filter may sort after the covered one ('1' < '>').
  EXPECT_EQ(ScopeFilters("b", *Scope::Make({"a.1.x", "a.c"})),
            (std::vector<std::string>{"$KV.b.a.>"}));
  EXPECT_EQ(ScopeFilters("b", *Scope::Make({"a.1.x", "a.1-y.z", "b"})),
            (std::vector<std::string>{"$KV.b.>"}));
  EXPECT_EQ(ScopeFilters("b", *Scope::Make({"a.1.x", "a.1-y.z", "c.d"})),
            (std::vector<std::string>{"$KV.b.a.1-y.>", "$KV.b.a.1.>", "$KV.b.c.>"}));
}

TEST(KvSubjectsTest, ParsesAckReplies) {
  auto v1 = ParseAckReply("$JS.ACK.KV_b.c1.1.42.7.1700000000.3");
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->stream_seq, 42u);
  EXPECT_EQ(v1->consumer_seq, 7u);
  EXPECT_EQ(v1->pending, 3u);
  EXPECT_EQ(v1->time_ns, 1700000000);  // the stored time, ns since the epoch
  auto v2 = ParseAckReply("$JS.ACK.hub.ACCHASH.KV_b.c1.1.43.8.1700000000.0.rand");
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->stream_seq, 43u);
  EXPECT_EQ(v2->consumer_seq, 8u);
  EXPECT_EQ(v2->pending, 0u);
  EXPECT_FALSE(ParseAckReply(""));
  EXPECT_FALSE(ParseAckReply("_INBOX.abc"));
  EXPECT_FALSE(ParseAckReply("$JS.ACK.KV_b.c1.1.x.7.1.3"));
  EXPECT_FALSE(ParseAckReply("$JS.ACK.a.b.c.d.e.f.g.h.i.j"));
}

// Invariant: user data is never protocol. A message of the stream (it has
// an ack reply) is data whatever its `Status` header says, body or not; the
// server's status (no ack reply, empty body) is told apart as the NATS
// clients tell it.
TEST(ServerStatusTest, OnlyAMessageWithoutAnAckReplyAndWithoutABodyIsAStatus) {
  const std::string ack = "$JS.ACK.KV_b.c.1.5.5.1700000000000000000.0";
  // The server's: a heartbeat (no reply), flow control ($JS.FC reply), a
  // consumer's end, a request's no-responders.
  EXPECT_TRUE(IsServerStatus("", 0, "100"));
  EXPECT_TRUE(IsServerStatus("$JS.FC.KV_b.x.1", 0, "100"));
  EXPECT_TRUE(IsServerStatus("", 0, "409"));
  EXPECT_TRUE(IsServerStatus("", 0, "503"));
  // A client's header on a stored message: with a body, without one (a
  // headers-only listing delivers every body empty), any value.
  for (const char* status : {"active", "100", "404", "409"}) {
    EXPECT_FALSE(IsServerStatus(ack, 0, status)) << status;
    EXPECT_FALSE(IsServerStatus(ack, 1, status)) << status;
  }
  // No status at all, or a body: not a status.
  EXPECT_FALSE(IsServerStatus("", 0, ""));
  EXPECT_FALSE(IsServerStatus("", 3, "100"));
}

}  // namespace
}  // namespace kvfold::nats
