// Tutorial 1: a service that keeps a routing table in memory, mirrored from
// a NATS KV bucket, and answers lookups while it follows the bucket.
//
//   mirror_service URL BUCKET FOLD_DIR
//
// Type one key per line to look it up; end the input (Ctrl-D) to stop.
//
// Three things to copy from here:
//  1. Rebuild your in-memory state from the fold when you start. The fold is
//     durable and a restart replays only what changed since its cursor, so
//     the apply hook alone never shows you the keys that did not change.
//  2. Keep the state current in the apply hook. It sees every change in
//     stream order, before the change commits; return an error to stop.
//  3. Run Watch on a thread of its own and stop it with a stop_token: it
//     flushes what it received and returns OK.
#include <iostream>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stop_token>
#include <string>
#include <thread>
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
  std::stop_source stop;
  kvfold::WatchOptions options;
  options.stop = stop.get_token();
  options.apply = [&table](const kvfold::Change& c) {
    if (c.op == kvfold::Op::kPut) {
      table.Set(c.key, c.value);
    } else {
      table.Erase(c.key);  // a delete or a purge
    }
    return kvfold::Status::OK();
  };
  options.log = [](const kvfold::LogLine& line) {
    if (line.level >= kvfold::LogLevel::kWarning) std::cerr << "kvfold: " << line.text << "\n";
  };
  kvfold::WatchMetrics metrics;  // publish these through your own registry
  options.metrics = &metrics;

  // 3. The watch on its own thread.
  kvfold::Status result;
  std::thread watcher([&] { result = kvfold::Watch(**bucket, **fold, options); });

  // Serve reads: here from stdin; in your service, from its request handlers.
  for (std::string key; std::getline(std::cin, key);) {
    const auto route = table.Lookup(key);
    std::cout << key << " -> " << (route ? *route : "(no route)") << std::endl;
  }

  stop.request_stop();
  watcher.join();
  const kvfold::WatchStats stats = metrics.Snapshot();
  std::cerr << "stopped: " << table.size() << " routes, cursor "
            << (stats.cursor ? std::to_string(*stats.cursor) : "none") << ", watch "
            << result.ToString() << "\n";
  return result.ok() ? 0 : 1;
}
