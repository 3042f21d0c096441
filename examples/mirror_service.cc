// Tutorial 1: a service that keeps a routing table in memory, mirrored from
// a NATS KV bucket, and answers lookups while it follows the bucket.
//
//   mirror_service URL BUCKET FOLD_DIR
//
// Type one key per line to look it up, or /metrics for the Prometheus text
// a /metrics endpoint would serve; end the input (Ctrl-D) to stop.
//
// Three things to copy from here:
//  1. Rebuild your in-memory state from the fold when you start. The fold is
//     durable and a restart replays only what changed since its cursor, so
//     the apply hook alone never shows you the keys that did not change.
//  2. Keep the state current in the apply hook. It sees every change in
//     stream order, before the change commits; return an error to stop.
//  3. Hold the watch as a kvfold::Mirror: it runs on a thread of its own,
//     WaitReady and WaitForRevision (read-your-writes) block a handler until
//     the fold is current, and Stop() flushes what it received. Its
//     metrics render as the Prometheus text `kvfold mirror` serves.
#include <chrono>
#include <iostream>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "kvfold/kvfold.h"

// The domain state: key -> route. Many readers, one writer (the hook).
class RoutingTable {
 public:
  void Set(std::string_view key, std::string_view route) {
    std::unique_lock lock(mu_);
    routes_[std::string(key)] = std::string(route);
  }
  void Erase(std::string_view key) {
    std::unique_lock lock(mu_);
    routes_.erase(std::string(key));
  }
  std::optional<std::string> Lookup(const std::string& key) const {
    std::shared_lock lock(mu_);
    auto it = routes_.find(key);
    if (it == routes_.end()) return std::nullopt;
    return it->second;
  }
  size_t size() const {
    std::shared_lock lock(mu_);
    return routes_.size();
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::string> routes_;
};

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: mirror_service URL BUCKET FOLD_DIR\n";
    return 2;
  }
  // A fold keeps every table file open: raise the soft descriptor limit
  // before opening one (a limit that cannot be raised only warns).
  if (auto limit = kvfold::RaiseOpenFileLimit(); !limit.ok()) {
    std::cerr << "warning: " << limit.status().ToString() << "\n";
  }
  kvfold::ConnectOptions connect;
  connect.url = argv[1];  // a comma-separated list for a cluster
  auto bucket = kvfold::OpenNatsBucket(connect, argv[2]);
  if (!bucket.ok()) return std::cerr << bucket.status().ToString() << "\n", 1;
  auto fold = kvfold::OpenRocksFold(argv[3]);  // created when missing
  if (!fold.ok()) return std::cerr << fold.status().ToString() << "\n", 1;

  // 1. Start from what the fold already holds (live entries only).
  RoutingTable table;
  kvfold::Status loaded = (*fold)->Scan("", /*include_tombstones=*/false,
                                        [&table](std::string_view key, const kvfold::Entry& e) {
                                          table.Set(key, e.value);
                                          return true;  // keep scanning
                                        });
  if (!loaded.ok()) return std::cerr << loaded.ToString() << "\n", 1;
  std::cerr << "loaded " << table.size() << " routes from the fold\n";

  // 2. Follow the bucket; the hook keeps the table current.
  kvfold::MirrorOptions options;
  options.watch.apply = [&table](const kvfold::Change& c) {
    if (c.op == kvfold::Op::kPut) {
      table.Set(c.key, c.value);
    } else {
      table.Erase(c.key);  // a delete or a purge
    }
    return kvfold::Status::OK();
  };
  options.watch.log = [](const kvfold::LogLine& line) {
    if (line.level >= kvfold::LogLevel::kWarning) std::cerr << "kvfold: " << line.text << "\n";
  };

  // 3. The watch as a handle: its own thread, its metrics, its waits.
  auto mirror = kvfold::Mirror::Start(**bucket, **fold, options);
  if (!mirror.ok()) return std::cerr << mirror.status().ToString() << "\n", 1;
  kvfold::Status ready = (*mirror)->WaitReady(std::chrono::seconds(30));
  std::cerr << (ready.ok() ? "ready" : ready.ToString()) << "\n";

  // Serve reads: here from stdin; in your service, from its request handlers
  // (after a write of your own, WaitForRevision(revision, timeout) first).
  for (std::string key; std::getline(std::cin, key);) {
    if (key == "/metrics") {  // the body of your /metrics endpoint
      std::cout << kvfold::PrometheusText((*mirror)->metrics().Snapshot());
      continue;
    }
    const auto route = table.Lookup(key);
    std::cout << key << " -> " << (route ? *route : "(no route)") << std::endl;
  }

  const kvfold::Status result = (*mirror)->Stop();
  const kvfold::WatchStats stats = (*mirror)->metrics().Snapshot();
  std::cerr << "stopped: " << table.size() << " routes, cursor "
            << (stats.cursor ? std::to_string(*stats.cursor) : "none") << ", watch "
            << result.ToString() << "\n";
  return result.ok() ? 0 : 1;
}
