#include "store/record_codec.h"

#include <gtest/gtest.h>

namespace kvfold::store {
namespace {

TEST(RecordCodecTest, EntryRoundTrips) {
  for (const Entry& e : {Entry{1, false, "v"}, Entry{UINT64_MAX, false, ""}, Entry{42, true, ""},
                         Entry{7, false, std::string("\0\xff", 2)}}) {
    Entry out;
    ASSERT_TRUE(DecodeEntry(EncodeEntry(e), &out).ok());
    EXPECT_EQ(out, e);
  }
}

TEST(RecordCodecTest, EntryLayoutIsStable) {
  EXPECT_EQ(EncodeEntry(Entry{0x0102, false, "ab"}),
            std::string("\x00\x00\x00\x00\x00\x00\x00\x01\x02"
                        "ab",
                        11));
  EXPECT_EQ(EncodeEntry(Entry{1, true, ""}),
            std::string("\x01\x00\x00\x00\x00\x00\x00\x00\x01", 9));
}

// A deadline travels with a live entry (flags bit 1, after the revision);
// a tombstone never carries one.
TEST(RecordCodecTest, ADeadlineRoundTripsAfterTheRevision) {
  const Entry e{0x0102, false, "ab", 0x0a0b0c0d0e0f1011};
  EXPECT_EQ(EncodeEntry(e), std::string("\x02\x00\x00\x00\x00\x00\x00\x01\x02"
                                        "\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11"
                                        "ab",
                                        19));
  Entry out;
  ASSERT_TRUE(DecodeEntry(EncodeEntry(e), &out).ok());
  EXPECT_EQ(out, e);
  EXPECT_EQ(EncodeEntry(Entry{1, true, "", 5}), EncodeEntry(Entry{1, true, ""}));
  // Cut, zero, or beside a tombstone flag: corrupt.
  EXPECT_TRUE(DecodeEntry(EncodeEntry(e).substr(0, 12), &out).IsCorruption());
  EXPECT_TRUE(DecodeEntry(std::string("\x02"
                                      "12345678"
                                      "\0\0\0\0\0\0\0\0",
                                      17),
                          &out)
                  .IsCorruption());
  EXPECT_TRUE(DecodeEntry(std::string("\x03"
                                      "12345678"
                                      "12345678",
                                      17),
                          &out)
                  .IsCorruption());
}

TEST(RecordCodecTest, BadRecordsAreCorruption) {
  Entry out;
  EXPECT_TRUE(DecodeEntry("short", &out).IsCorruption());
  EXPECT_TRUE(DecodeEntry(std::string("\x07"
                                      "12345678",
                                      9),
                          &out)
                  .IsCorruption());
  EXPECT_TRUE(DecodeEntry(std::string("\x01"
                                      "12345678x",
                                      10),
                          &out)
                  .IsCorruption());
  uint64_t v;
  EXPECT_TRUE(DecodeU64("1234567", &v).IsCorruption());
  std::vector<std::string> list;
  EXPECT_TRUE(DecodeStringList(std::string("\x00\x00\x00\x05"
                                           "ab",
                                           6),
                               &list)
                  .IsCorruption());
  EXPECT_TRUE(DecodeStringList(std::string("\x00\x00", 2), &list).IsCorruption());
}

TEST(RecordCodecTest, StringListRoundTrips) {
  std::vector<std::string> in{"", "a.", "b"};
  std::vector<std::string> out;
  ASSERT_TRUE(DecodeStringList(EncodeStringList(in), &out).ok());
  EXPECT_EQ(out, in);
}

TEST(RecordCodecTest, CountReplacement) {
  FoldMeta m;
  Entry live{1, false, "v"};
  Entry tomb{2, true, ""};
  CountReplacement(nullptr, live, &m);
  EXPECT_EQ(m.live_keys, 1u);
  EXPECT_EQ(m.entries, 1u);
  CountReplacement(&live, tomb, &m);
  EXPECT_EQ(m.live_keys, 0u);
  EXPECT_EQ(m.entries, 1u);
  CountReplacement(&tomb, live, &m);
  EXPECT_EQ(m.live_keys, 1u);
  CountReplacement(nullptr, tomb, &m);
  EXPECT_EQ(m.live_keys, 1u);
  EXPECT_EQ(m.entries, 2u);
}

}  // namespace
}  // namespace kvfold::store
