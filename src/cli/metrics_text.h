// The Prometheus text exposition (format 0.0.4) of a mirror's metrics: the
// watch's (WatchStats) and the scheduled export's (ExportStats).

#ifndef KVFOLD_CLI_METRICS_TEXT_H_
#define KVFOLD_CLI_METRICS_TEXT_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "kvfold/watch_metrics.h"

namespace kvfold::cli {

// What the scheduled export did, updated by its thread.
class ExportStats {
 public:
  enum class Outcome { kWritten, kUnchanged, kOtherNode, kFailed };
  void Record(Outcome outcome, uint64_t cursor = 0);

  struct Snapshot {
    uint64_t written = 0, unchanged = 0, other_node = 0, failed = 0;
    // The last artifact this node wrote: its cursor, and its age.
    std::optional<uint64_t> last_cursor;
    std::optional<double> last_age_seconds;
  };
  Snapshot Take() const;

 private:
  mutable std::mutex mu_;
  Snapshot counts_;
  std::optional<std::chrono::steady_clock::time_point> last_written_;
};

// Renders the watch's stats, and the export's when `exports` is set.
std::string MetricsText(const WatchStats& watch, const ExportStats::Snapshot* exports);

}  // namespace kvfold::cli

#endif  // KVFOLD_CLI_METRICS_TEXT_H_
