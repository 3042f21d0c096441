// Tutorial 2: mirror a bucket and export a snapshot artifact of the fold on
// a schedule, one node of the fleet per round (a lease decides which).
//
//   scheduled_export URL BUCKET FOLD_DIR ARTIFACTS PERIOD_SECONDS ROUNDS
//
// ARTIFACTS is dir:PATH or obj:BUCKET (a NATS Object Store bucket). ROUNDS
// bounds the run for this example; a service loops until it is stopped.
// (`kvfold mirror --export-to ARTIFACTS --export-every 5m` does the same.)
//
// Things to copy from here:
//  1. Export from the fold while the watch writes it: an export reads one
//     consistent snapshot (entries and cursor together).
//  2. The lease's time to live is one period: whoever wins exports this
//     round; the others skip it. A node that dies frees the round.
//  3. "Nothing newer" is not an error: the fold has not moved since the
//     newest artifact.
//  4. Prune old artifacts, but keep more than one: a node that is
//     restoring may still be reading the one before.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "kvfold/kvfold.h"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: scheduled_export URL BUCKET FOLD_DIR ARTIFACTS PERIOD_SECONDS ROUNDS\n";
    return 2;
  }
  const std::string bucket_name = argv[2];
  const auto period = std::chrono::seconds(std::atoi(argv[5]));
  const int rounds = std::atoi(argv[6]);
  if (period.count() <= 0 || rounds <= 0) return std::cerr << "bad period or rounds\n", 2;

  kvfold::ConnectOptions connect;
  connect.url = argv[1];
  auto bucket = kvfold::OpenNatsBucket(connect, bucket_name);
  if (!bucket.ok()) return std::cerr << bucket.status().ToString() << "\n", 1;
  auto fold = kvfold::OpenRocksFold(argv[3]);
  if (!fold.ok()) return std::cerr << fold.status().ToString() << "\n", 1;
  auto artifacts = kvfold::OpenTransport(argv[4], connect, {.create_if_missing = true, .s3 = {}});
  if (!artifacts.ok()) return std::cerr << artifacts.status().ToString() << "\n", 1;
  auto lease = kvfold::ExportLease::Open(connect, "kvfold-leases");
  if (!lease.ok()) return std::cerr << lease.status().ToString() << "\n", 1;

  // 2. and 4.: one node per round, the newest three kept.
  kvfold::ScheduledExportOptions export_options;
  export_options.bucket = bucket_name;
  export_options.every = period;
  export_options.keep = 3;
  export_options.log = [](const kvfold::LogLine& line) { std::cerr << line << "\n"; };
  auto exporter = kvfold::ScheduledExport::Make(**fold, **lease, **artifacts, export_options);
  if (!exporter.ok()) return std::cerr << exporter.status().ToString() << "\n", 1;

  // The mirror, on its own thread (see mirror_service.cc).
  std::stop_source stop;
  kvfold::WatchOptions options;
  options.stop = stop.get_token();
  kvfold::Status watched;
  std::thread watcher([&] { watched = kvfold::Watch(**bucket, **fold, options); });

  for (int round = 1; round <= rounds; ++round) {
    std::this_thread::sleep_for(period);
    // 1. Export while the watch keeps writing.
    const kvfold::ScheduledExport::Round r = (*exporter)->RunRound();
    std::cout << "round " << round << ": ";
    if (r.written) {
      std::cout << "wrote " << r.written->artifact_id << " (cursor " << r.written->cursor << ", "
                << r.written->entry_count << " entries)" << std::endl;
    } else {  // 3. "unchanged", "other_node" or "failed" (logged)
      std::cout << kvfold::ExportOutcomeName(r.outcome) << std::endl;
    }
  }
  stop.request_stop();
  watcher.join();
  if (!watched.ok()) return std::cerr << "watch: " << watched.ToString() << "\n", 1;
  return 0;
}
