// A scheduled export: every period, the node of a fleet that wins the
// lease exports one consistent snapshot of the fold it mirrors, moves the
// latest pointer forward and prunes old artifacts. `kvfold mirror
// --export-every` runs one beside its watch; a service embeds it the same
// way, on a thread of its own:
//
//   kvfold::ScheduledExportOptions options;
//   options.bucket = "routes";                   // names the lease
//   options.every = std::chrono::minutes(5);     // the period and the lease's TTL
//   options.keep = 3;
//   auto exporter = kvfold::ScheduledExport::Make(*fold, *lease, *artifacts, options);
//   std::thread t([&] { (*exporter)->Run(stop.get_token()); });
//
// A failed round is a warning (logged and counted), never the end of the
// schedule: the next round tries again.

#ifndef KVFOLD_SCHEDULED_EXPORT_H_
#define KVFOLD_SCHEDULED_EXPORT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "kvfold/artifact.h"
#include "kvfold/clock.h"
#include "kvfold/fold.h"
#include "kvfold/lease.h"
#include "kvfold/log_line.h"
#include "kvfold/status.h"
#include "kvfold/transport.h"

namespace kvfold {

// What one round did.
enum class ExportOutcome {
  kWritten,       // this node won the lease and published an artifact
  kUnchanged,     // this node won the lease; the latest artifact is this fold's state
  kPointerAhead,  // this node won the lease; the latest pointer names a valid
                  // artifact ahead of this fold (another node's, or this fold lags)
  kOtherNode,     // another node holds the lease this round
  kFailed,        // the lease, the export or its publication failed
};
std::string_view ExportOutcomeName(ExportOutcome outcome);  // "written", ...

// The schedule's counters, as ExportMetrics::Snapshot reads them.
struct ExportStats {
  uint64_t written = 0, unchanged = 0, pointer_ahead = 0, other_node = 0, failed = 0;
  // The last artifact this node wrote: its cursor, and how long ago.
  std::optional<uint64_t> last_cursor;
  std::optional<double> last_age_seconds;
};

// Counts rounds for a metrics registry, as WatchMetrics does for a watch.
// Every method may be called from any thread.
class ExportMetrics {
 public:
  void Record(ExportOutcome outcome, uint64_t cursor = 0);
  ExportStats Snapshot() const;

 private:
  mutable std::mutex mu_;
  ExportStats counts_;
  std::optional<std::chrono::steady_clock::time_point> last_written_;
};

struct ScheduledExportOptions {
  // The mirrored bucket. The lease is its key "export.<bucket>", shared by
  // every node that mirrors it. REQUIRES: not empty.
  std::string bucket;
  // The period between rounds, and the lease's time to live: a node that
  // dies frees the next round. REQUIRES: > 0.
  std::chrono::milliseconds every{0};
  // Who holds the lease and exports. Default: DefaultExporterId().
  std::string exporter_id;
  // PEM Ed25519 private key to sign each manifest. Default: none.
  std::string sign_key_file;
  // After each artifact written, prune to the newest `keep`, but never one
  // younger than `keep_younger_than` (see PruneOptions). Default: 0, no prune.
  size_t keep = 0;
  std::chrono::milliseconds keep_younger_than = PruneOptions().min_age;
  // PEM Ed25519 public keys trusted besides sign_key_file's own: when
  // either is set, an unsigned or foreign-signed manifest never makes a
  // round remove anything (PruneTrustOfExporter), and a latest pointer
  // naming one is replaced (ExportOptions::trusted_key_files). Default: none.
  std::vector<std::string> trusted_key_files;
  // Warnings (a failed round, left-out keys) and one line per artifact.
  std::function<void(const LogLine&)> log;
  // Counted when set (not owned).
  ExportMetrics* metrics = nullptr;
  // Time between rounds. Default: RealClock().
  Clock* clock = nullptr;
  // Reads the stream's last sequence (ExportOptions::stream_last_seq): a
  // round then replaces a latest pointer beyond the stream's head. Called
  // on the export's thread. Default: none.
  std::function<StatusOr<uint64_t>()> stream_last_seq;
};

class ScheduledExport {
 public:
  // InvalidArgument for a bad option; the signing key's own error when it
  // does not load. Make checks the same; a caller may check before it
  // opens the fold.
  static Status Check(const ScheduledExportOptions& options);
  // `fold`, `lease` and `to` are not owned and must outlive the result.
  // Fails as Check does: a bad setup fails here, not every round.
  static StatusOr<std::unique_ptr<ScheduledExport>> Make(Fold& fold, ExportLease& lease,
                                                         Transport& to,
                                                         ScheduledExportOptions options);

  struct Round {
    ExportOutcome outcome = ExportOutcome::kFailed;
    Status status;                            // why, when kFailed or kPointerAhead
    std::optional<ArtifactManifest> written;  // when kWritten
  };
  // One round now: the lease, the export, the prune (a failed prune is a
  // warning; the round still counts as written).
  Round RunRound();
  // A round every `every`, the first one period from now, until `stop`.
  // Thread safety: one Run or RunRound at a time.
  void Run(std::stop_token stop);

 private:
  ScheduledExport(Fold& fold, ExportLease& lease, Transport& to, ScheduledExportOptions options)
      : fold_(fold), lease_(lease), to_(to), opt_(std::move(options)) {}
  Round Attempt();
  void Log(LogLevel level, const std::string& line) const;

  Fold& fold_;
  ExportLease& lease_;
  Transport& to_;
  const ScheduledExportOptions opt_;
  bool pointer_ahead_ = false;  // the last round's outcome was kPointerAhead
};

}  // namespace kvfold

#endif  // KVFOLD_SCHEDULED_EXPORT_H_
