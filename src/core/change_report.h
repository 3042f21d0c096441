// The one place a fold change becomes a Change: built, shown to the apply
// hook, then counted. The watch loop and every repair call it, so a hook
// and the metrics see every origin's changes alike.

#ifndef KVFOLD_CORE_CHANGE_REPORT_H_
#define KVFOLD_CORE_CHANGE_REPORT_H_

#include <optional>
#include <string>

#include "kvfold/change.h"
#include "kvfold/fold.h"
#include "kvfold/watch_metrics.h"

namespace kvfold::core {

// `next` is the key's new entry, `previous` its entry before (none: the
// fold did not hold it). The hook's error is returned and nothing is
// counted: the caller must not commit past a change the hook refused.
// `hook` and `metrics` may be null.
Status ReportChange(const ApplyHook* hook, WatchMetrics* metrics, ChangeOrigin origin,
                    const std::string& key, Op op, const Entry& next,
                    const std::optional<Entry>& previous);

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_CHANGE_REPORT_H_
