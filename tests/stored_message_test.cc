// A STREAM.MSG.GET reply read as a delivery reads the same message
// (src/nats/stored_message.cc): a resume's delta and a key's last message
// come this way, the live tail by a consumer, and a message must fold the
// same by both.

#include "nats/stored_message.h"

#include <gtest/gtest.h>

#include "core/base64.h"

namespace kvfold::nats {
namespace {

nlohmann::json Stored(const std::string& subject, const std::string& headers,
                      const std::string& data) {
  nlohmann::json m = {{"subject", subject},
                      {"seq", uint64_t{7}},
                      {"time", "2026-12-06T03:48:37.600282576Z"},
                      {"data", core::Base64Encode(data)}};
  if (!headers.empty()) m["hdrs"] = core::Base64Encode(headers);
  return m;
}

TEST(StoredMessageTest, APutCarriesItsKeyValueTimeAndSequence) {
  auto m = MessageOfGetReply("b", Stored("$KV.b.a.key", "", "value"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->key, "a.key");
  EXPECT_EQ(m->op, Op::kPut);
  EXPECT_EQ(m->value, "value");
  EXPECT_EQ(m->seq, 7u);
  EXPECT_EQ(m->time_ns, 1796528917600282576);
}

// nats.c trims a header's value on both sides: "KV-Operation:\tDEL " is a
// delete on a delivery, so it must be one here too.
TEST(StoredMessageTest, HeaderValuesAreTrimmedAsADeliveryTrimsThem) {
  for (const char* line : {"KV-Operation: DEL", "KV-Operation:\tDEL ", "KV-Operation:DEL\t",
                           "KV-Operation:  PURGE  "}) {
    SCOPED_TRACE(line);
    auto m = MessageOfGetReply(
        "b", Stored("$KV.b.k", std::string("NATS/1.0\r\n") + line + "\r\n\r\n", ""));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_NE(m->op, Op::kPut);
  }
  // A header whose name only ends like it is another header.
  auto m =
      MessageOfGetReply("b", Stored("$KV.b.k", "NATS/1.0\r\nX-KV-Operation: DEL\r\n\r\n", "v"));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->op, Op::kPut);
  EXPECT_EQ(m->value, "v");
}

TEST(StoredMessageTest, AMessageOfAnotherBucketOrWithoutASequenceIsCorrupt) {
  EXPECT_TRUE(MessageOfGetReply("b", Stored("$KV.other.k", "", "v")).status().IsCorruption());
  auto no_seq = Stored("$KV.b.k", "", "v");
  no_seq.erase("seq");
  EXPECT_TRUE(MessageOfGetReply("b", no_seq).status().IsCorruption());
  auto bad_data = Stored("$KV.b.k", "", "v");
  bad_data["data"] = 5;
  EXPECT_TRUE(MessageOfGetReply("b", bad_data).status().IsCorruption());
}

}  // namespace
}  // namespace kvfold::nats
