// How batch size and the sync policy shape commit throughput of the
// RocksDB fold, and what the watch loop costs on top of the store.
// Run: scripts/bench.sh   (figures are ratios within one run; see README)

#include <benchmark/benchmark.h>

#include "kvfold/fold.h"
#include "kvfold/watcher.h"
#include "sim/sim_bucket.h"
#include "test_dir.h"

namespace kvfold {
namespace {

constexpr int kEntries = 20000;

// Folds kEntries puts (100-byte values over 5000 keys) in commits of
// `batch` entries. Reports entries/s.
void BM_RocksCommit(benchmark::State& state) {
  const size_t batch = static_cast<size_t>(state.range(0));
  const bool sync = state.range(1) != 0;
  const std::string value(100, 'v');
  for (auto _ : state) {
    state.PauseTiming();
    TestDir dir;
    FoldOptions o;
    o.sync = sync;
    auto fold = OpenRocksFold(dir.path() + "/fold", o);
    state.ResumeTiming();
    FoldCommit c;
    for (int i = 1; i <= kEntries; ++i) {
      c.entries["key." + std::to_string(i % 5000)] = Entry{static_cast<uint64_t>(i), false, value};
      c.cursor = i;
      if (c.entries.size() >= batch || i == kEntries) {
        if (!(*fold)->Commit(c).ok()) state.SkipWithError("commit failed");
        c.entries.clear();
      }
    }
    state.PauseTiming();
    fold->reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kEntries);
}
BENCHMARK(BM_RocksCommit)
    ->ArgNames({"batch", "sync"})
    ->Args({1, 1})
    ->Args({100, 1})
    ->Args({1000, 1})
    ->Args({1, 0})
    ->Args({100, 0})
    ->Args({1000, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The whole watch loop (decode, scope, revision check, hook, batch, commit)
// over a simulated bucket into a memory or RocksDB fold. Reports messages/s.
void BM_WatchLoop(benchmark::State& state) {
  const bool rocks = state.range(0) != 0;
  sim::SimBucket bucket;
  const std::string value(100, 'v');
  for (int i = 0; i < kEntries; ++i) bucket.Put("key." + std::to_string(i % 5000), value);
  for (auto _ : state) {
    state.PauseTiming();
    TestDir dir;
    std::unique_ptr<Fold> fold;
    if (rocks) {
      FoldOptions o;
      o.sync = false;
      fold = std::move(OpenRocksFold(dir.path() + "/fold", o)).value();
    } else {
      fold = NewMemoryFold();
    }
    // Resume from cursor 0 so every message is delivered, not a state sync.
    FoldCommit anchor;
    anchor.cursor = 0;
    (void)fold->Commit(anchor);
    WatchOptions o;
    o.until_caught_up = true;
    o.idle_probe = std::chrono::milliseconds(1);
    uint64_t changes = 0;
    o.apply = [&changes](const Change&) {
      ++changes;
      return Status::OK();
    };
    state.ResumeTiming();
    Status s = Watch(bucket, *fold, o);
    if (!s.ok() || changes != kEntries) state.SkipWithError("watch failed");
    state.PauseTiming();
    fold.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kEntries);
}
BENCHMARK(BM_WatchLoop)
    ->ArgNames({"rocks"})
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace kvfold

BENCHMARK_MAIN();
