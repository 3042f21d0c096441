#include "kvfold/metrics_text.h"

#include <cmath>
#include <cstdio>

namespace kvfold {
namespace {

// One metric family: a HELP and a TYPE line, then its samples.
class Family {
 public:
  Family(std::string* out, const char* name, const char* type, const char* help)
      : out_(out), name_(name) {
    *out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void Sample(double value, const std::string& labels = "", const char* suffix = "") {
    char num[64];
    if (std::isinf(value)) {
      std::snprintf(num, sizeof num, "%s", value > 0 ? "+Inf" : "-Inf");
    } else if (value == std::floor(value) && std::fabs(value) < 1e15) {
      std::snprintf(num, sizeof num, "%.0f", value);
    } else {
      std::snprintf(num, sizeof num, "%.6g", value);
    }
    *out_ += name_ + suffix + (labels.empty() ? "" : "{" + labels + "}") + " " + num + "\n";
  }

 private:
  std::string* out_;
  std::string name_;
};

std::string Label(const char* name, std::string_view value) {
  return std::string(name) + "=\"" + std::string(value) + "\"";
}

double D(uint64_t v) { return static_cast<double>(v); }

// The scheduled export's families (only when the mirror exports).
void ExportFamilies(const ExportStats& e, std::string* out) {
  Family f(out, "kvfold_exports_total", "counter",
           "Scheduled export rounds by outcome (other_node: another node held the lease; "
           "pointer_ahead: the latest artifact is ahead of this fold).");
  f.Sample(D(e.written), Label("outcome", "written"));
  f.Sample(D(e.unchanged), Label("outcome", "unchanged"));
  f.Sample(D(e.pointer_ahead), Label("outcome", "pointer_ahead"));
  f.Sample(D(e.other_node), Label("outcome", "other_node"));
  f.Sample(D(e.failed), Label("outcome", "failed"));
  if (e.last_age_seconds) {
    Family(out, "kvfold_last_export_age_seconds", "gauge",
           "Seconds since this node last wrote an artifact.")
        .Sample(*e.last_age_seconds);
    Family(out, "kvfold_last_export_cursor", "gauge",
           "The cursor of the last artifact this node wrote.")
        .Sample(D(*e.last_cursor));
  }
}

// The scheduled audit's families (only when the mirror audits).
void AuditFamilies(const AuditStats& a, std::string* out) {
  Family f(out, "kvfold_audits_total", "counter",
           "Audits of the fold against its bucket by outcome (failed: could not judge).");
  f.Sample(D(a.equal), Label("outcome", "equal"));
  f.Sample(D(a.divergent), Label("outcome", "divergent"));
  f.Sample(D(a.failed), Label("outcome", "failed"));
  if (a.divergent_keys) {
    Family(out, "kvfold_audit_divergent_keys", "gauge",
           "Keys the last audit that judged found different from the bucket.")
        .Sample(D(*a.divergent_keys));
  }
  if (a.last_success_unix_seconds) {
    Family(out, "kvfold_audit_last_success_timestamp_seconds", "gauge",
           "When the last audit that judged ended (Unix time).")
        .Sample(std::floor(*a.last_success_unix_seconds));  // whole seconds: %.6g would round
  }
}

}  // namespace

std::string PrometheusText(const WatchStats& w, const ExportStats* e, const AuditStats* a) {
  std::string out;
  {
    Family f(&out, "kvfold_changes_total", "counter",
             "Changes folded (each one the apply hook saw), by op and origin.");
    for (size_t op = 0; op < WatchStats::kOps; ++op) {
      for (size_t origin = 0; origin < WatchStats::kOrigins; ++origin) {
        f.Sample(D(w.changes[op][origin]),
                 Label("op", OpName(static_cast<Op>(op))) + "," +
                     Label("origin", ChangeOriginName(static_cast<ChangeOrigin>(origin))));
      }
    }
  }
  if (w.cursor) {
    Family(&out, "kvfold_cursor", "gauge", "The stream sequence the fold has committed through.")
        .Sample(D(*w.cursor));
  }
  Family(&out, "kvfold_stream_last_sequence", "gauge", "The stream's last sequence as last seen.")
      .Sample(D(w.stream_last_seq));
  Family(&out, "kvfold_lag_messages", "gauge",
         "Stream last sequence minus the cursor (0 when caught up).")
      .Sample(D(w.lag_messages));
  Family(&out, "kvfold_lag_seconds", "gauge",
         "Age of the oldest stream sequence the cursor has not passed (0 when caught up).")
      .Sample(w.lag_seconds);
  Family(&out, "kvfold_caught_up", "gauge",
         "1 once the fold reached the stream's head since the start (or the last repair), else 0.")
      .Sample(w.caught_up ? 1 : 0);
  Family(&out, "kvfold_repairing", "gauge", "1 while an expiry repair rewrites the fold, else 0.")
      .Sample(w.repairing ? 1 : 0);
  Family(&out, "kvfold_last_activity_age_seconds", "gauge",
         "Seconds since the watch loop last turned: read the stream, committed or waited to retry "
         "(stuck when it stays above 30).")
      .Sample(w.last_activity_age_seconds);
  Family(&out, "kvfold_last_stream_read_age_seconds", "gauge",
         "Seconds since a read of the stream's state last succeeded (cut off from the server when "
         "well above 1).")
      .Sample(w.last_read_age_seconds);
  Family(&out, "kvfold_commits_total", "counter", "Commits to the fold that succeeded.")
      .Sample(D(w.commits));
  Family(&out, "kvfold_commit_failures_total", "counter",
         "Commits to the fold that failed (the batch is kept and retried).")
      .Sample(D(w.commit_failures));
  {
    Family f(&out, "kvfold_commit_duration_seconds", "histogram",
             "How long each commit to the fold took.");
    uint64_t cumulative = 0;
    for (size_t i = 0; i < WatchStats::kLatencyBounds.size(); ++i) {
      cumulative += w.commit_latency[i];
      char le[32];
      std::snprintf(le, sizeof le, "%g", WatchStats::kLatencyBounds[i]);
      f.Sample(D(cumulative), Label("le", le), "_bucket");
    }
    cumulative += w.commit_latency.back();
    f.Sample(D(cumulative), Label("le", "+Inf"), "_bucket");
    f.Sample(w.commit_latency_sum, "", "_sum");
    f.Sample(D(cumulative), "", "_count");
  }
  {
    Family f(&out, "kvfold_repairs_total", "counter",
             "Expiry repairs by what they did and how they ended.");
    for (size_t k = 0; k < WatchStats::kRepairKinds; ++k) {
      for (size_t o = 0; o < WatchStats::kRepairOutcomes; ++o) {
        f.Sample(D(w.repairs[k][o]),
                 Label("action", RepairKindName(static_cast<RepairKind>(k))) + "," +
                     Label("outcome", RepairOutcomeName(static_cast<RepairOutcome>(o))));
      }
    }
  }
  Family(&out, "kvfold_restore_chunks_done", "gauge",
         "Artifact chunks the running (or last) restore has committed.")
      .Sample(D(w.restore_chunks_done));
  Family(&out, "kvfold_restore_chunks", "gauge",
         "Artifact chunks the running (or last) restore reads in all.")
      .Sample(D(w.restore_chunks_total));
  Family(&out, "kvfold_restore_retries_total", "counter",
         "Restore attempts that found no usable artifact and will retry until the timeout.")
      .Sample(D(w.restore_retries));
  Family(&out, "kvfold_floor_guard_trips_total", "counter",
         "Times retention passed the frontier mid-watch.")
      .Sample(D(w.floor_guard_trips));
  {
    Family f(&out, "kvfold_delivery_resets_total", "counter", "Deliveries that broke, by cause.");
    for (size_t c = 0; c < WatchStats::kResetCauses; ++c) {
      f.Sample(D(w.resets[c]), Label("cause", ResetCauseName(static_cast<ResetCause>(c))));
    }
  }
  Family(&out, "kvfold_reconnects_total", "counter",
         "Deliveries opened after the first (after a reset, an outage or a repair).")
      .Sample(D(w.reconnects));
  if (e != nullptr) ExportFamilies(*e, &out);
  if (a != nullptr) AuditFamilies(*a, &out);
  return out;
}

}  // namespace kvfold
