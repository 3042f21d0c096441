// The keys whose entries carry a deadline (Entry::expires_ns), soonest
// first: what the watch loop deletes once the server's clock passes it, on
// a bucket whose expiries leave no trace in the stream (per-message TTL
// without limit markers).
//
// Items are hints, never trusted: an item stays after its key was
// rewritten or deleted, so the watch loop checks each due item against the
// key's entry (pending or folded) before it expires anything.
//
// Not thread-safe: the watch loop's thread owns it.

#ifndef KVFOLD_WATCH_DEADLINE_QUEUE_H_
#define KVFOLD_WATCH_DEADLINE_QUEUE_H_

#include <cstdint>
#include <optional>
#include <queue>
#include <string>
#include <vector>

namespace kvfold {

class DeadlineQueue {
 public:
  struct Item {
    int64_t due_ns = 0;      // when to look at it: its deadline, or a later look
    int64_t expires_ns = 0;  // the entry's deadline
    uint64_t revision = 0;   // of the entry that carries the deadline
    std::string key;
  };

  // Due at the deadline, or at `due_ns` when later (a look again).
  void Add(std::string key, uint64_t revision, int64_t expires_ns, int64_t due_ns = 0);
  // The soonest due time; none when empty.
  std::optional<int64_t> Next() const;
  // Removes and returns every item due at server time `now_ns`, soonest first.
  std::vector<Item> PopDue(int64_t now_ns);
  void Clear() { heap_ = {}; }
  size_t size() const { return heap_.size(); }

 private:
  struct Later {
    bool operator()(const Item& a, const Item& b) const { return a.due_ns > b.due_ns; }
  };
  std::priority_queue<Item, std::vector<Item>, Later> heap_;
};

}  // namespace kvfold

#endif  // KVFOLD_WATCH_DEADLINE_QUEUE_H_
