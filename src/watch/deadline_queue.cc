#include "watch/deadline_queue.h"

#include <algorithm>
#include <utility>

namespace kvfold {

void DeadlineQueue::Add(std::string key, uint64_t revision, int64_t expires_ns, int64_t due_ns) {
  heap_.push(Item{std::max(expires_ns, due_ns), expires_ns, revision, std::move(key)});
}

std::optional<int64_t> DeadlineQueue::Next() const {
  if (heap_.empty()) return std::nullopt;
  return heap_.top().due_ns;
}

std::vector<DeadlineQueue::Item> DeadlineQueue::PopDue(int64_t now_ns) {
  std::vector<Item> due;
  while (!heap_.empty() && heap_.top().due_ns <= now_ns) {
    due.push_back(heap_.top());
    heap_.pop();
  }
  return due;
}

}  // namespace kvfold
