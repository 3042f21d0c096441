#include "cli/audit_schedule.h"

#include <condition_variable>

#include "cli/logger.h"

namespace kvfold::cli {

void ScheduledAudit::Run(std::stop_token stop) {
  std::mutex wait_mu;
  std::condition_variable_any woken;
  while (true) {
    {
      std::unique_lock lock(wait_mu);
      if (woken.wait_for(lock, stop, every_, [] { return false; }) || stop.stop_requested()) {
        return;
      }
    }
    AuditOptions options = options_;
    options.stop = stop;
    auto report = Audit(source_, fold_, options);
    if (report.status().IsCancelled()) return;  // the mirror stops
    metrics_.Record(report);
  }
}

void AuditMetrics::Record(const StatusOr<AuditReport>& report) {
  std::lock_guard lock(mu_);
  if (!report.ok()) {
    ++stats_.failed;
    Log().Warn("audit: could not judge the fold: " + report.status().ToString());
    return;
  }
  stats_.divergent_keys = report->divergent();
  stats_.last_success_unix_seconds =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string counts = std::to_string(report->judged) + " keys judged at cursor " +
                             std::to_string(report->cursor) + ", " +
                             std::to_string(report->in_flight) + " in flight, " +
                             std::to_string(report->kept) + " kept";
  if (report->divergent() == 0) {
    ++stats_.equal;
    Log().Info("audit: equal: " + counts);
    return;
  }
  ++stats_.divergent;
  std::string first;
  for (const auto& n : report->named) {
    first += (first.empty() ? "" : ", ") + std::string(AuditFindingName(n.finding)) + " " + n.key;
  }
  Log().Error("audit: the fold DIFFERS from its bucket: " + std::to_string(report->divergent()) +
              " keys (missing " + std::to_string(report->missing) + ", stale " +
              std::to_string(report->stale) + ", phantom " + std::to_string(report->phantom) +
              ") of " + counts + "; first: " + first +
              ". `kvfold audit` names them; re-seed the fold or report a bug");
}

AuditStats AuditMetrics::Snapshot() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace kvfold::cli
