// The Prometheus text exposition (format 0.0.4) of a mirror's metrics: the
// watch's (WatchStats) and the scheduled export's (ExportStats).

#ifndef KVFOLD_CLI_METRICS_TEXT_H_
#define KVFOLD_CLI_METRICS_TEXT_H_

#include <string>

#include "kvfold/scheduled_export.h"
#include "kvfold/watch_metrics.h"

namespace kvfold::cli {

// Renders the watch's stats, and the export's when `exports` is set.
std::string MetricsText(const WatchStats& watch, const ExportStats* exports);

}  // namespace kvfold::cli

#endif  // KVFOLD_CLI_METRICS_TEXT_H_
