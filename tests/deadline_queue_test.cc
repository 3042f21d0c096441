#include "watch/deadline_queue.h"

#include <gtest/gtest.h>

namespace kvfold {
namespace {

std::vector<std::string> Keys(const std::vector<DeadlineQueue::Item>& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(i.key);
  return out;
}

// Items pop soonest first, at their due time exactly, and a look again
// (a later due time) keeps the deadline it was queued for.
TEST(DeadlineQueueTest, PopsWhatIsDueSoonestFirst) {
  DeadlineQueue q;
  EXPECT_FALSE(q.Next());
  q.Add("b", 2, 200);
  q.Add("a", 1, 100);
  q.Add("c", 3, 300, /*due_ns=*/250);  // its deadline was before: due only at 300
  q.Add("d", 4, 400, /*due_ns=*/450);  // looked at again later
  EXPECT_EQ(q.Next(), 100);
  EXPECT_TRUE(q.PopDue(99).empty());
  EXPECT_EQ(Keys(q.PopDue(100)), (std::vector<std::string>{"a"}));
  EXPECT_EQ(Keys(q.PopDue(300)), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(q.Next(), 450);
  auto d = q.PopDue(450);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].expires_ns, 400);
  EXPECT_EQ(d[0].revision, 4u);
  q.Add("e", 5, 500);
  q.Clear();
  EXPECT_EQ(q.size(), 0u);
}

}  // namespace
}  // namespace kvfold
