// What a new node gains by seeding from an artifact instead of folding the
// bucket's messages: export and seed throughput against the watch loop
// (BM_WatchLoop/rocks:1 in fold_commit_bench.cc) over the same number of
// keys and value sizes, all into RocksDB with sync off.
// Run: scripts/bench.sh   (figures are ratios within one run; see README)

#include <benchmark/benchmark.h>

#include "kvfold/artifact.h"
#include "kvfold/fold.h"
#include "kvfold/transport.h"
#include "test_dir.h"

namespace kvfold {
namespace {

constexpr int kKeys = 20000;

// A RocksDB fold of kKeys live keys with 100-byte values, as a mirror of a
// whole bucket leaves it.
std::unique_ptr<Fold> SourceFold(const std::string& path) {
  FoldOptions o;
  o.sync = false;
  auto fold = std::move(OpenRocksFold(path, o)).value();
  FoldCommit c;
  const std::string value(100, 'v');
  for (int i = 0; i < kKeys; ++i) {
    c.entries["key." + std::to_string(i)] = Entry{static_cast<uint64_t>(i + 1), false, value};
  }
  c.cursor = kKeys;
  c.bucket = "bench";
  c.scope = std::vector<std::string>{""};
  c.stream_created = "2026-01-01T00:00:00Z";
  if (!fold->Commit(c).ok()) return nullptr;
  return fold;
}

std::unique_ptr<Transport> Directory(const std::string& path) {
  return std::move(OpenTransport("dir:" + path, ConnectOptions{},
                                 TransportOptions{.create_if_missing = true, .s3 = {}}))
      .value();
}

// Fold -> chunks -> manifest -> pointer, each round into a fresh directory.
// Reports entries/s.
void BM_Export(benchmark::State& state) {
  TestDir dir;
  auto fold = SourceFold(dir.path() + "/fold");
  if (!fold) {
    state.SkipWithError("building the source fold failed");
    return;
  }
  int round = 0;
  for (auto _ : state) {
    auto to = Directory(dir.path() + "/arts" + std::to_string(round++));
    if (!ExportArtifact(*fold, *to, ExportOptions{}).ok()) state.SkipWithError("export failed");
  }
  state.SetItemsProcessed(state.iterations() * kKeys);
}
BENCHMARK(BM_Export)->Unit(benchmark::kMillisecond)->UseRealTime();

// Verify pass + per-chunk apply into a fresh RocksDB fold. Reports entries/s.
void BM_Seed(benchmark::State& state) {
  TestDir dir;
  auto source = SourceFold(dir.path() + "/fold");
  auto arts = Directory(dir.path() + "/arts");
  if (!source || !ExportArtifact(*source, *arts, ExportOptions{}).ok()) {
    state.SkipWithError("building the artifact failed");
    return;
  }
  int round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    FoldOptions o;
    o.sync = false;
    const std::string path = dir.path() + "/seeded" + std::to_string(round++);
    auto fold = std::move(OpenRocksFold(path, o)).value();
    state.ResumeTiming();
    auto m = SeedFold(*fold, *arts, SeedOptions{});
    if (!m.ok() || m->entry_count != kKeys) state.SkipWithError("seed failed");
    state.PauseTiming();
    fold.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kKeys);
}
BENCHMARK(BM_Seed)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kvfold
