// RaiseOpenFileLimit (kvfold/fold.h): a fold keeps every table file open, so
// a process that opens a large one needs its soft descriptor limit raised.

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>

#include "kvfold/fold.h"

namespace kvfold {
namespace {

uint64_t AsValue(rlim_t limit) {
  return limit == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(limit);
}

// Puts the process's limit back as it was when the test began.
class OpenFileLimitTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &original_), 0); }
  void TearDown() override { EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &original_), 0); }
  rlimit original_{};
};

TEST_F(OpenFileLimitTest, RaisesTheSoftLimitToTheHardOne) {
  rlimit low = original_;
  // Lowering the soft limit needs no privilege (raising it back to the
  // hard one neither): the shape of a default 1024 under a larger hard.
  if (low.rlim_max == RLIM_INFINITY || low.rlim_max > 256) low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);

  auto raised = RaiseOpenFileLimit();
  ASSERT_TRUE(raised.ok()) << raised.status().ToString();
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, original_.rlim_max);
  EXPECT_EQ(now.rlim_max, original_.rlim_max) << "the hard limit is the administrator's";
  EXPECT_EQ(*raised, AsValue(now.rlim_cur)) << "returns the limit now in force";
}

TEST_F(OpenFileLimitTest, ALimitAtTheHardOneIsLeftAsItIs) {
  ASSERT_TRUE(RaiseOpenFileLimit().ok());
  auto again = RaiseOpenFileLimit();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(*again, AsValue(now.rlim_cur));
  EXPECT_EQ(now.rlim_cur, now.rlim_max);
}

}  // namespace
}  // namespace kvfold
