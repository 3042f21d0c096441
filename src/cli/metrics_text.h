// The Prometheus text exposition (format 0.0.4) of a mirror's metrics: the
// watch's (WatchStats), the scheduled export's (ExportStats) and the
// scheduled audit's (AuditStats).

#ifndef KVFOLD_CLI_METRICS_TEXT_H_
#define KVFOLD_CLI_METRICS_TEXT_H_

#include <string>

#include "cli/audit_schedule.h"
#include "kvfold/scheduled_export.h"
#include "kvfold/watch_metrics.h"

namespace kvfold::cli {

// Renders the watch's stats, the export's when `exports` is set and the
// audits' when `audits` is.
std::string MetricsText(const WatchStats& watch, const ExportStats* exports,
                        const AuditStats* audits = nullptr);

}  // namespace kvfold::cli

#endif  // KVFOLD_CLI_METRICS_TEXT_H_
