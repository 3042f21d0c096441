// `kvfold mirror --audit-every D`: the audit (kvfold/audit.h) run in the
// mirror's process, once per period, beside the watch, with what it found
// counted for /metrics.

#ifndef KVFOLD_CLI_AUDIT_SCHEDULE_H_
#define KVFOLD_CLI_AUDIT_SCHEDULE_H_

#include <chrono>
#include <mutex>
#include <stop_token>

#include "kvfold/audit.h"
#include "kvfold/bucket.h"
#include "kvfold/fold.h"

namespace kvfold::cli {

// What the audits found, read by /metrics from another thread.
class AuditMetrics {
 public:
  void Record(const StatusOr<AuditReport>& report);
  AuditStats Snapshot() const;

 private:
  mutable std::mutex mu_;
  AuditStats stats_;
};

class ScheduledAudit {
 public:
  // `source` is the audit's own (a source serves one thread at a time).
  ScheduledAudit(BucketSource& source, Fold& fold, std::chrono::milliseconds every,
                 AuditOptions options, AuditMetrics& metrics)
      : source_(source), fold_(fold), every_(every), options_(options), metrics_(metrics) {}

  // Audits every `every` (the first after one period: a starting mirror
  // is still catching up) until `stop`, logging each verdict.
  void Run(std::stop_token stop);

 private:
  BucketSource& source_;
  Fold& fold_;
  const std::chrono::milliseconds every_;
  const AuditOptions options_;
  AuditMetrics& metrics_;
};

}  // namespace kvfold::cli

#endif  // KVFOLD_CLI_AUDIT_SCHEDULE_H_
