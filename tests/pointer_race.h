// Two exporters race to advance one location's latest pointer through
// interleaved cursors while a reader watches it: the pointer must never be
// seen going backward and must end at the highest cursor.

#ifndef KVFOLD_TESTS_POINTER_RACE_H_
#define KVFOLD_TESTS_POINTER_RACE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "kvfold/transport.h"

namespace kvfold {

inline void RacePointer(const std::function<std::unique_ptr<Transport>()>& open, uint64_t top) {
  std::atomic<bool> done{false};
  std::atomic<int> regressions{0};
  auto watcher = open();
  ASSERT_TRUE(watcher);
  std::thread reader([&] {
    uint64_t seen = 0;
    while (!done) {
      auto p = watcher->ReadPointer();
      if (p.ok() && *p) {
        if ((*p)->cursor < seen) ++regressions;
        seen = std::max(seen, (*p)->cursor);
      }
    }
  });
  auto exporter = [&](uint64_t parity) {
    auto t = open();
    for (uint64_t c = 1 + parity; c <= top; c += 2) {
      const uint64_t cursor = (c * 37) % top + 1;  // a shuffled order
      Status s = t->AdvancePointer(ArtifactPointer{"a" + std::to_string(cursor), cursor, "b", "t"});
      EXPECT_TRUE(s.ok() || s.IsAlreadyExists()) << s.ToString();
    }
  };
  std::thread a(exporter, 0), b(exporter, 1);
  a.join();
  b.join();
  done = true;
  reader.join();
  EXPECT_EQ(regressions.load(), 0);
  auto last = watcher->ReadPointer();
  ASSERT_TRUE(last.ok() && *last);
  EXPECT_EQ((*last)->cursor, top);
}

}  // namespace kvfold

#endif  // KVFOLD_TESTS_POINTER_RACE_H_
