#include "core/change_report.h"

namespace kvfold::core {

Status ReportChange(const ApplyHook* hook, WatchMetrics* metrics, ChangeOrigin origin,
                    const std::string& key, Op op, const Entry& next,
                    const std::optional<Entry>& previous) {
  if (hook != nullptr && *hook) {
    Change c;
    c.key = key;
    c.op = op;
    c.value = next.value;
    c.revision = next.revision;
    c.expires_ns = next.expires_ns;
    c.previous_revision = previous ? previous->revision : 0;
    c.origin = origin;
    KVFOLD_RETURN_IF_ERROR((*hook)(c));
  }
  if (metrics != nullptr) metrics->RecordChange(op, origin);
  return Status::OK();
}

}  // namespace kvfold::core
