// The Prometheus text exposition (format 0.0.4) of a mirror's metrics: the
// series `kvfold mirror --metrics-addr` serves at /metrics, which the
// shipped dashboard (deploy/grafana/) and alert rules (deploy/prometheus/)
// expect. A service that serves its own /metrics endpoint renders the same
// text and appends its own families:
//
//   kvfold::WatchStats w = mirror->metrics().Snapshot();
//   std::string body = kvfold::PrometheusText(w);  // + the service's own
//   // Content-Type: text/plain; version=0.0.4; charset=utf-8
//
// Thread safety: PrometheusText is a pure function of its arguments.

#ifndef KVFOLD_METRICS_TEXT_H_
#define KVFOLD_METRICS_TEXT_H_

#include <string>

#include "kvfold/audit.h"
#include "kvfold/scheduled_export.h"
#include "kvfold/watch_metrics.h"

namespace kvfold {

// Renders the watch's families (kvfold_changes_total, kvfold_cursor, ...,
// kvfold_reconnects_total), then the scheduled export's when `exports` is
// set (kvfold_exports_total, ...) and the audits' when `audits` is
// (kvfold_audits_total, ...): each family a HELP and a TYPE line, then its
// samples. A family whose value is unknown (no cursor yet, no artifact or
// audit verdict yet) is left out rather than rendered as 0. The caller
// owns the pointers; they are read during the call only.
std::string PrometheusText(const WatchStats& watch, const ExportStats* exports = nullptr,
                           const AuditStats* audits = nullptr);

}  // namespace kvfold

#endif  // KVFOLD_METRICS_TEXT_H_
