// Tutorial 3: bring up a new node from the newest artifact instead of
// replaying the bucket, then mirror from the artifact's cursor on.
//
//   seed_node URL BUCKET ARTIFACTS FOLD_DIR
//
// ARTIFACTS is dir:PATH or obj:BUCKET, written by an exporting node (see
// scheduled_export.cc). Re-running it on a seeded fold skips the seed and
// just catches up. (`kvfold seed` then `kvfold mirror` do the same.)
//
// Things to copy from here:
//  1. Seed only an empty fold. A seed verifies the whole artifact (manifest,
//     every chunk's hash, the bucket it came from) before it writes, and
//     sets the cursor only with its last chunk: a node killed mid-seed
//     finishes the same seed when it runs again.
//  2. Give the watch the same artifacts for repairs: if retention evicted
//     what the node needs (it was down too long), the watch restores from
//     the newest artifact instead of guessing which keys were deleted.
#include <iostream>

#include "kvfold/kvfold.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: seed_node URL BUCKET ARTIFACTS FOLD_DIR\n";
    return 2;
  }
  const std::string bucket_name = argv[2];
  kvfold::ConnectOptions connect;
  connect.url = argv[1];
  auto artifacts = kvfold::OpenTransport(argv[3], connect);
  if (!artifacts.ok()) return std::cerr << artifacts.status().ToString() << "\n", 1;
  auto fold = kvfold::OpenRocksFold(argv[4]);
  if (!fold.ok()) return std::cerr << fold.status().ToString() << "\n", 1;

  // 1. Seed a new node.
  auto meta = (*fold)->ReadMeta();
  if (!meta.ok()) return std::cerr << meta.status().ToString() << "\n", 1;
  if (!meta->cursor) {
    kvfold::SeedOptions seed;
    seed.expected_bucket = bucket_name;  // never seed from another bucket's artifact
    auto manifest = kvfold::SeedFold(**fold, **artifacts, seed);
    if (!manifest.ok()) return std::cerr << "seed: " << manifest.status().ToString() << "\n", 1;
    std::cout << "seeded from " << manifest->artifact_id << ": " << manifest->entry_count
              << " entries through cursor " << manifest->cursor << std::endl;
  }

  // 2. Catch up from the artifact's cursor; repairs restore from the same
  // place. Drop until_caught_up to follow the bucket for good.
  auto bucket = kvfold::OpenNatsBucket(connect, bucket_name);
  if (!bucket.ok()) return std::cerr << bucket.status().ToString() << "\n", 1;
  auto source = kvfold::NewArtifactSource(**artifacts);
  kvfold::WatchOptions options;
  options.until_caught_up = true;
  options.repair = kvfold::ExpiryRepair::kAuto;  // relist or restore, never lossy
  options.artifacts = source.get();
  uint64_t caught_up = 0;
  options.apply = [&caught_up](const kvfold::Change&) {
    ++caught_up;
    return kvfold::Status::OK();
  };
  options.log = [](const kvfold::LogLine& line) { std::cerr << "kvfold: " << line.text << "\n"; };
  kvfold::Status s = kvfold::Watch(**bucket, **fold, options);
  if (!s.ok()) return std::cerr << "watch: " << s.ToString() << "\n", s.IsCursorExpired() ? 3 : 1;
  meta = (*fold)->ReadMeta();
  if (!meta.ok()) return std::cerr << meta.status().ToString() << "\n", 1;
  std::cout << "caught up: " << caught_up << " changes after the seed; cursor " << *meta->cursor
            << ", " << meta->live_keys << " live keys" << std::endl;
  return 0;
}
