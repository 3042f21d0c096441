// kvfold mirror: watch a bucket into a fold until stopped or caught up.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <iostream>
#include <optional>
#include <stop_token>
#include <thread>

#include "cli/audit_schedule.h"
#include "cli/commands.h"
#include "cli/connect_flags.h"
#include "cli/logger.h"
#include "cli/metrics_server.h"
#include "cli/service_notifier.h"
#include "core/marker_window.h"
#include "kvfold/artifact.h"
#include "kvfold/connection.h"
#include "kvfold/fold.h"
#include "kvfold/health.h"
#include "kvfold/lease.h"
#include "kvfold/metrics_text.h"
#include "kvfold/repair.h"
#include "kvfold/retention.h"
#include "kvfold/scheduled_export.h"
#include "kvfold/transport.h"
#include "kvfold/watch_metrics.h"
#include "kvfold/watcher.h"

namespace kvfold::cli {
namespace {

// On a bucket that evicts by volume and writes limit markers, an artifact
// with writes after it is usable only inside the marker window: exports
// further apart leave a follower that falls behind nothing to restore
// from. Said once at start; the stream read is best effort (the watch
// reports an unreachable server).
void WarnIfExportsOutrunTheMarkerWindow(BucketSource& source, std::chrono::milliseconds every) {
  auto state = source.ReadStream();
  if (!state.ok()) return;
  const auto window = core::MarkerWindowNs(*state);
  if (!window || !ClassifyRetention(*state, false).evicts_current_values) return;
  if (std::chrono::nanoseconds(*window) >= every) return;
  Log().Warn("--export-every " + std::to_string(every.count()) + " ms is longer than the marker " +
             "window of bucket " + source.bucket() + " (" + std::to_string(*window / 1000000) +
             " ms: limit markers live " + std::to_string(state->marker_ttl_ns / 1000000) +
             " ms, less a tenth), which evicts by volume: an artifact with writes after it is " +
             "restorable only inside that window, so a follower that falls behind may wait for " +
             "the next export or refuse; export more often");
}

struct MirrorFlags {
  ConnectOptions connect;
  TransportFlags transport;
  std::string bucket;
  std::string fold;
  std::vector<std::string> scope;
  bool until_caught_up = false;
  size_t batch = 1000;
  size_t sync_run_kib = 4096;
  uint64_t recount_backlog = 100000;
  bool no_sync = false;
  bool filters_in_cache = false;
  std::string metrics_addr;
  std::string ready_max_lag;  // default: HealthOptions::max_lag
  std::string export_to;
  std::string export_every;
  std::string lease_bucket = "kvfold-leases";
  std::string sign_key;
  size_t keep = 0;
  std::string repair = "auto";
  std::string artifacts;
  std::string repair_timeout = "10m";
  std::string reconcile_every;
  std::string audit_every;
  std::vector<std::string> trusted_keys;
  bool require_signature = false;
};

ScheduledExportOptions ExportOptionsOf(const MirrorFlags& f, std::chrono::milliseconds every,
                                       ExportMetrics* metrics) {
  ScheduledExportOptions options;
  options.bucket = f.bucket;
  options.every = every;
  options.sign_key_file = f.sign_key;
  options.trusted_key_files = f.trusted_keys;
  options.keep = f.keep;
  options.log = [](const LogLine& line) { Log().Log(line.level, line.text); };
  options.metrics = metrics;
  return options;
}

// What a scheduled export needs, opened before the fold: a bad lease
// bucket name, an unusable signing key or an unreachable location would
// otherwise only be logged every round while no export happens.
// InvalidArgument (exit 2) for bad flags, other errors exit 1.
struct ExportSetup {
  std::unique_ptr<ExportLease> lease;
  std::unique_ptr<Transport> to;
};
StatusOr<ExportSetup> OpenExportSetup(const MirrorFlags& f, const ScheduledExportOptions& options) {
  // The flags set every option but the key: only the key can fail here.
  KVFOLD_RETURN_IF_ERROR(ScheduledExport::Check(options).WithContext("--sign-key"));
  ExportSetup setup;
  auto lease = ExportLease::Open(
      f.connect, f.lease_bucket,
      LeaseOptions{.warn = [](const std::string& line) { Log().Log(LogLevel::kWarning, line); }});
  if (!lease.ok()) return lease.status().WithContext("--lease-bucket");
  setup.lease = std::move(lease).value();
  // Missing rights fail now, not at the first round.
  KVFOLD_RETURN_IF_ERROR(
      setup.lease->CheckAccess("export." + f.bucket).WithContext("--lease-bucket"));
  TransportOptions creating = f.transport.options;
  creating.create_if_missing = true;
  auto to = OpenTransport(f.export_to, f.connect, creating);
  if (!to.ok()) return to.status().WithContext("--export-to");
  setup.to = std::move(to).value();
  return setup;
}

// Turns SIGINT and SIGTERM into a stop request. The signals are blocked in
// every thread (set before nats.c starts its threads) and taken by one
// thread with sigtimedwait, so no handler runs in an arbitrary thread.
class SignalStopper {
 public:
  SignalStopper() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] {
      const timespec tick{0, 100 * 1000 * 1000};
      while (!done_.load()) {
        if (sigtimedwait(&set_, nullptr, &tick) > 0) {
          source_.request_stop();
          return;
        }
      }
    });
  }
  ~SignalStopper() {
    done_.store(true);
    thread_.join();
  }
  std::stop_token token() const { return source_.get_token(); }

 private:
  sigset_t set_;
  std::stop_source source_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// The mirror's flags, parsed and checked before anything is opened.
struct MirrorPlan {
  Scope scope;
  std::optional<std::chrono::milliseconds> every;  // the export period
  ExpiryRepair repair = ExpiryRepair::kAuto;
  std::chrono::milliseconds repair_timeout{0};
  std::chrono::milliseconds reconcile_every{0};
  std::optional<std::chrono::milliseconds> audit_every;
  HealthOptions health;  // /healthz and /readyz
  std::chrono::milliseconds quiet_read_every = WatchOptions().quiet_read_every;
};

// The shortest /readyz bound under which a quiet mirror may count the
// server's heartbeat (every 5 s) as a stream read.
constexpr std::chrono::milliseconds kQuietReadyLag{7000};

// InvalidArgument (exit 2) naming the flag at fault. `notifying`: systemd
// is told of readiness (NOTIFY_SOCKET).
StatusOr<MirrorPlan> CheckMirrorFlags(MirrorFlags& f, bool notifying) {
  MirrorPlan plan;
  if (f.bucket.empty()) return Status::InvalidArgument("--bucket (or KVFOLD_BUCKET) is required");
  auto scope = Scope::Make(f.scope);
  if (!scope.ok()) return scope.status();
  plan.scope = *scope;
  if (f.batch == 0) return Status::InvalidArgument("--batch must be > 0");
  if (f.sync_run_kib == 0 || f.sync_run_kib > (size_t{1} << 30)) {
    return Status::InvalidArgument("--sync-run-kib must be between 1 and 1073741824");
  }
  KVFOLD_RETURN_IF_ERROR(ResolveConnectFlags(&f.connect, true));
  KVFOLD_RETURN_IF_ERROR(ResolveTransportFlags(&f.transport));
  if (f.export_to.empty() != f.export_every.empty()) {
    return Status::InvalidArgument("--export-to and --export-every go together");
  }
  if (!f.export_every.empty()) {
    auto d = ParseDuration(f.export_every);
    if (!d.ok()) return d.status().WithContext("--export-every");
    plan.every = *d;
  }
  auto repair = ParseExpiryRepair(f.repair);
  if (!repair.ok()) return repair.status().WithContext("--repair");
  plan.repair = *repair;
  auto repair_timeout = ParseDuration(f.repair_timeout);
  if (!repair_timeout.ok()) return repair_timeout.status().WithContext("--repair-timeout");
  plan.repair_timeout = *repair_timeout;
  if (!f.reconcile_every.empty()) {
    auto d = ParseDuration(f.reconcile_every);
    if (!d.ok()) return d.status().WithContext("--reconcile-every");
    plan.reconcile_every = *d;
  }
  if (!f.audit_every.empty()) {
    auto d = ParseDuration(f.audit_every);
    if (!d.ok()) return d.status().WithContext("--audit-every");
    plan.audit_every = *d;
  }
  if (f.require_signature && f.trusted_keys.empty()) {
    return Status::InvalidArgument("--require-signature needs --trusted-key");
  }
  if (!f.ready_max_lag.empty()) {
    if (f.metrics_addr.empty() && !notifying) {
      return Status::InvalidArgument(
          "--ready-max-lag needs --metrics-addr (it serves /readyz) or a systemd notify socket");
    }
    auto ready_lag = ParseDuration(f.ready_max_lag);
    if (!ready_lag.ok()) return ready_lag.status().WithContext("--ready-max-lag");
    // A quiet mirror reads the stream about every second (idle_probe), or
    // hears the server's heartbeat every 5 s (below): a bound closer to the
    // second would flap /readyz between healthy reads.
    constexpr std::chrono::milliseconds kShortestReadyLag{2000};
    if (*ready_lag < kShortestReadyLag) {
      return Status::InvalidArgument("--ready-max-lag " + f.ready_max_lag +
                                     " is below 2s: a quiet mirror reads the stream about every "
                                     "second, and /readyz would turn 503 between healthy reads");
    }
    plan.health.max_lag = *ready_lag;
  }
  // A quiet whole-bucket mirror counts the server's heartbeat (every 5 s)
  // as a stream read: a shorter bound would flap /readyz between them, so
  // it keeps its read every second instead.
  if (plan.health.max_lag < kQuietReadyLag) plan.quiet_read_every = std::chrono::milliseconds(0);
  return plan;
}

// /metrics (Prometheus text), /healthz and /readyz (200, or 503 with the
// reason: a probe's status codes).
Pages HealthAndMetricsPages(const MirrorPlan& plan, const WatchMetrics& metrics,
                            const ExportMetrics& exports, const AuditMetrics* audits) {
  const bool exporting = plan.every.has_value();
  auto verdict = [](const HealthVerdict& v) {
    return Page{.status = v.ok ? 200 : 503, .body = v.reason + "\n"};
  };
  return Pages{
      {"/metrics",
       [&metrics, &exports, exporting, audits] {
         const ExportStats e = exports.Snapshot();
         const std::optional<AuditStats> a =
             audits ? std::optional(audits->Snapshot()) : std::nullopt;
         return Page{.body = PrometheusText(metrics.Snapshot(), exporting ? &e : nullptr,
                                            a ? &*a : nullptr),
                     .content_type = "text/plain; version=0.0.4; charset=utf-8"};
       }},
      {"/healthz",
       [&metrics, verdict, o = plan.health] { return verdict(JudgeAlive(metrics.Snapshot(), o)); }},
      {"/readyz",
       [&metrics, verdict, o = plan.health] { return verdict(JudgeReady(metrics.Snapshot(), o)); }},
  };
}

WatchOptions WatchOptionsOf(const MirrorFlags& f, const MirrorPlan& plan, std::stop_token stop,
                            ArtifactSource* artifacts) {
  WatchOptions options;
  options.scope = plan.scope;
  options.batch_size = f.batch;
  options.sync_run_bytes = f.sync_run_kib << 10;
  options.recount_backlog = f.recount_backlog;
  options.until_caught_up = f.until_caught_up;
  options.stop = std::move(stop);
  options.repair = plan.repair;
  options.artifacts = artifacts;
  options.repair_timeout = plan.repair_timeout;
  options.reconcile_every = plan.reconcile_every;
  options.quiet_read_every = plan.quiet_read_every;
  options.log = [](const LogLine& line) { Log().Log(line.level, line.text); };
  if (Log().Enabled(LogLevel::kDebug)) {
    options.on_applied = [](uint64_t cursor) {
      Log().Log(LogLevel::kDebug, std::string("committed through ") + std::to_string(cursor));
    };
  }
  return options;
}

// What a systemd unit's environment file may set (deploy/mirror.env).
constexpr EnvFlag kMirrorEnvFlags[] = {
    {"--bucket", "KVFOLD_BUCKET"},
    {"--scope", "KVFOLD_SCOPE"},
    {"--repair", "KVFOLD_REPAIR"},
    {"--artifacts", "KVFOLD_ARTIFACTS"},
    {"--repair-timeout", "KVFOLD_REPAIR_TIMEOUT"},
    {"--reconcile-every", "KVFOLD_RECONCILE_EVERY"},
    {"--audit-every", "KVFOLD_AUDIT_EVERY"},
    {"--metrics-addr", "KVFOLD_METRICS_ADDR"},
    {"--ready-max-lag", "KVFOLD_READY_MAX_LAG"},
    {"--export-to", "KVFOLD_EXPORT_TO"},
    {"--export-every", "KVFOLD_EXPORT_EVERY"},
    {"--keep", "KVFOLD_KEEP"},
    {"--sign-key", "KVFOLD_SIGN_KEY"},
    {"--s3-endpoint", "KVFOLD_S3_ENDPOINT"},
    {"--s3-region", "KVFOLD_S3_REGION"},
    {"--s3-addressing", "KVFOLD_S3_ADDRESSING"},
    {"--s3-profile", "KVFOLD_S3_PROFILE"},
    {"--s3-allow-unconditional-pointer", "KVFOLD_S3_ALLOW_UNCONDITIONAL_POINTER"},
};

int RunMirror(CLI::App* cmd, MirrorFlags& f) {
  KVFOLD_RETURN_IF_ERROR_EXIT("mirror", FillFlagsFromEnvironment(cmd, kMirrorEnvFlags));
  auto notifier = ServiceNotifier::FromEnvironment();
  if (!notifier.ok()) return Report("mirror", notifier.status());
  auto checked = CheckMirrorFlags(f, *notifier != nullptr);
  if (!checked.ok()) return Report("mirror", checked.status());
  const MirrorPlan& plan = *checked;
  const std::optional<std::chrono::milliseconds>& every = plan.every;
  if (plan.repair == ExpiryRepair::kNone) {
    Log().Warn(
        "--repair none: after a gap, keys deleted or aged out meanwhile may persist in "
        "the fold");
  }
  // First, so that every thread started after it has the signals blocked.
  SignalStopper stopper;
  // Before anything is opened: a bad address touches nothing.
  WatchMetrics metrics;
  ExportMetrics export_metrics;
  AuditMetrics audit_metrics;
  std::unique_ptr<MetricsServer> metrics_server;
  if (!f.metrics_addr.empty()) {
    auto started = MetricsServer::Start(
        f.metrics_addr, HealthAndMetricsPages(plan, metrics, export_metrics,
                                              plan.audit_every ? &audit_metrics : nullptr));
    if (!started.ok()) return Report("mirror", started.status().WithContext("--metrics-addr"));
    metrics_server = std::move(started).value();
    const std::string& host = metrics_server->host();
    const std::string base = "http://" +
                             (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                             std::to_string(metrics_server->port());
    Log().Info("serving metrics on " + base + "/metrics, probes on " + base + "/healthz and " +
               base + "/readyz");
  }
  std::optional<ScheduledExportOptions> export_options;
  ExportSetup export_setup;
  if (every) {
    export_options = ExportOptionsOf(f, *every, &export_metrics);
    auto setup = OpenExportSetup(f, *export_options);
    if (!setup.ok()) return Report("mirror", setup.status());
    export_setup = std::move(setup).value();
  }
  std::unique_ptr<ArtifactSource> artifact_source;
  if (!f.artifacts.empty()) {
    VerifyOptions verify{.trusted_key_files = f.trusted_keys,
                         .require_signature = f.require_signature};
    // A mirror that signs what it exports restores only what is signed:
    // by its own key, or a --trusted-key. Otherwise anyone who can write
    // the location could hand it an unsigned artifact.
    if (!f.sign_key.empty()) verify.trusted_key_files.push_back(f.sign_key);
    auto opened = OpenArtifactSourceWhenNeeded(f.artifacts, f.connect, verify, f.transport.options);
    if (!opened.ok()) return Report("mirror", opened.status().WithContext("--artifacts"));
    artifact_source = std::move(opened).value();
  }
  auto source = OpenNatsBucket(f.connect, f.bucket);
  if (!source.ok()) return Report("mirror", source.status());
  FoldOptions fold_options;
  fold_options.sync = !f.no_sync;
  fold_options.keep_table_filters_in_memory = !f.filters_in_cache;
  auto fold = OpenRocksFold(f.fold, fold_options);
  if (!fold.ok()) return Report("mirror", fold.status());

  WatchOptions options = WatchOptionsOf(f, plan, stopper.token(), artifact_source.get());
  // Counted only when served or reported: a plain mirror pays nothing.
  if (metrics_server || *notifier) options.metrics = &metrics;
  std::unique_ptr<ScheduledExport> exporter;
  std::unique_ptr<BucketSource> export_source;
  if (export_options) {
    // Its own connection: a bucket source serves one thread at a time, and
    // the watch's is busy. The rounds read the stream's head with it, so a
    // pointer beyond it (a stream restored from a backup) is replaced.
    auto opened = OpenNatsBucket(f.connect, f.bucket);
    if (!opened.ok()) return Report("mirror", opened.status());
    export_source = std::move(opened).value();
    WarnIfExportsOutrunTheMarkerWindow(*export_source, *every);
    export_options->stream_last_seq = [s = export_source.get()]() -> StatusOr<uint64_t> {
      auto state = s->ReadStream();
      if (!state.ok()) return state.status();
      return state->last_seq;
    };
    auto made =
        ScheduledExport::Make(**fold, *export_setup.lease, *export_setup.to, *export_options);
    if (!made.ok()) return Report("mirror", made.status());
    exporter = std::move(made).value();
  }
  std::unique_ptr<BucketSource> audit_source;
  std::unique_ptr<ScheduledAudit> auditor;
  if (plan.audit_every) {
    auto opened = OpenNatsBucket(f.connect, f.bucket);  // its own, as the export's
    if (!opened.ok()) return Report("mirror", opened.status());
    audit_source = std::move(opened).value();
    AuditOptions audit_options;
    audit_options.max_reads_per_second = 100;
    auditor = std::make_unique<ScheduledAudit>(*audit_source, **fold, *plan.audit_every,
                                               audit_options, audit_metrics);
  }
  Status s;
  {
    // Exports and audits run beside the watch: the fold's read API is safe
    // while it commits.
    std::stop_source exports_stop;
    std::optional<std::jthread> exports;
    if (exporter) {
      exports.emplace([&exporter, stop = exports_stop.get_token()] { exporter->Run(stop); });
    }
    std::optional<std::jthread> audits;
    if (auditor) {
      audits.emplace([&auditor, stop = exports_stop.get_token()] { auditor->Run(stop); });
    }
    // systemd hears of readiness, then of the stop as soon as it is asked.
    std::optional<std::jthread> service_reports;
    std::optional<std::stop_callback<std::function<void()>>> stop_reports;
    if (*notifier) {
      service_reports.emplace([&notifier, &metrics, &plan](std::stop_token stop) {
        ReportServiceState(**notifier, metrics, plan.health, stop);
      });
      stop_reports.emplace(stopper.token(),
                           [&service_reports] { service_reports->request_stop(); });
    }
    s = Watch(**source, **fold, options);
    exports_stop.request_stop();
    if (service_reports) service_reports->request_stop();
  }
  if (!s.ok()) return Report("mirror", s);
  auto meta = (*fold)->ReadMeta();
  if (!meta.ok()) return Report("mirror", meta.status());
  // Stale counts (a stop mid catch-up) are not worth a scan of the fold here.
  Log().Info("bucket " + f.bucket + " folded through sequence " +
             (meta->cursor ? std::to_string(*meta->cursor) : "<none>") + ", " +
             (meta->counts_stale ? std::string("keys not counted yet (the next start recounts)")
                                 : std::to_string(meta->live_keys) + " live keys") +
             " in " + f.fold);
  return kExitOk;
}

}  // namespace

Runner AddMirrorCommand(CLI::App& app) {
  auto flags = std::make_shared<MirrorFlags>();
  CLI::App* cmd =
      app.add_subcommand("mirror",
                         "Mirror a KV bucket into a fold; runs until SIGINT/SIGTERM (then "
                         "flushes and exits 0) or, with --until-caught-up, until the fold has "
                         "reached the stream's last sequence as read at start. When retention "
                         "evicted history the fold needs, repairs by --repair. Exit codes: 0 ok, "
                         "2 usage, 3 cursor expired and the repair refused or found no usable "
                         "artifact (cursor untouched), 1 other errors.");
  AddConnectFlags(cmd, &flags->connect);
  AddTransportFlags(cmd, &flags->transport);
  cmd->add_option("--bucket", flags->bucket, "KV bucket name (required)");
  cmd->add_option("--fold", flags->fold, "fold directory (created when missing)")->required();
  cmd->add_option("--scope", flags->scope,
                  "key prefix to mirror; repeat, or separate by commas, for several (default: "
                  "whole bucket)")
      ->delimiter(',');
  cmd->add_flag("--until-caught-up", flags->until_caught_up,
                "exit 0 once the fold reached the stream's last sequence at start");
  cmd->add_option("--batch", flags->batch, "changes per commit (default 1000)")->check(kCount);
  cmd->add_option("--sync-run-kib", flags->sync_run_kib,
                  "KiB of keys and values per run of a first sync into an empty fold, each "
                  "linked in as one table file (default 4096)")
      ->check(kCount);
  cmd->add_option("--recount-backlog", flags->recount_backlog,
                  "a catch-up of at least N messages and half the fold's entries skips the "
                  "per-key count reads and recounts the fold once caught up; 0: never "
                  "(default 100000)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 48));
  cmd->add_option("--export-to", flags->export_to,
                  "export artifacts on a schedule to dir:PATH, obj:BUCKET or s3://BUCKET/PREFIX")
      ->check(kArtifactLocation);
  cmd->add_option("--export-every", flags->export_every,
                  "export period, e.g. 30s, 5m, 1h (one node per round, by lease)");
  cmd->add_option("--lease-bucket", flags->lease_bucket,
                  "KV bucket holding the export lease (default kvfold-leases)");
  cmd->add_option("--sign-key", flags->sign_key, "PEM Ed25519 key to sign exported manifests")
      ->check(CLI::ExistingFile);
  cmd->add_option("--keep", flags->keep, "after each export, prune to the newest K artifacts")
      ->check(kCount);
  cmd->add_option("--repair", flags->repair,
                  "expiry repair: auto (default; relist where the key listing is the truth, "
                  "else restore; never lossy), relist, restore, none (warns: deleted or "
                  "aged-out keys may persist)")
      ->check([](const std::string& name) {
        auto policy = ParseExpiryRepair(name);
        return policy.ok() ? std::string() : policy.status().message();
      });
  cmd->add_option("--artifacts", flags->artifacts,
                  "where restore finds artifacts: dir:PATH, obj:BUCKET or s3://BUCKET/PREFIX")
      ->check(kArtifactLocation);
  cmd->add_option("--repair-timeout", flags->repair_timeout,
                  "how long a restore waits for a usable artifact before exit 3 (default 10m)");
  cmd->add_option("--reconcile-every", flags->reconcile_every,
                  "run a key-set diff this often to drop keys whose delete markers were "
                  "purged (buckets whose key listing is the truth), e.g. 1h");
  cmd->add_option("--audit-every", flags->audit_every,
                  "check the fold against its bucket this often, beside the watch (as `kvfold "
                  "audit` does; the verdict is logged and served in /metrics), e.g. 1h");
  cmd->add_option("--trusted-key", flags->trusted_keys,
                  "PEM Ed25519 public key restores accept signatures of, and the only ones "
                  "(with --sign-key's) whose artifacts --keep prunes; repeatable");
  cmd->add_flag("--require-signature", flags->require_signature,
                "restore only from artifacts signed by a --trusted-key");
  cmd->add_flag("--no-sync", flags->no_sync,
                "do not fsync each commit (faster; a machine crash may lose "
                "the newest commits, never tear one)");
  cmd->add_flag("--filters-in-cache", flags->filters_in_cache,
                "read the fold's table filters and indexes through an 8 MiB cache instead of "
                "holding them in memory (about 2 bytes a key): memory stays flat as the fold "
                "grows, point reads of a large fold get slower (about 3x at 10M keys)");
  cmd->add_option("--metrics-addr", flags->metrics_addr,
                  "serve Prometheus metrics at http://HOST:PORT/metrics, and probes at /healthz "
                  "(the watch turns) and /readyz (caught up, not repairing): 200 or 503 (port 0: "
                  "any free one, logged at start). GET and HEAD only, one request per connection, "
                  "sent within 2s");
  cmd->add_option("--ready-max-lag", flags->ready_max_lag,
                  "/readyz answers 503 once the oldest change not folded is older than this, "
                  "or no stream read has succeeded for this long (default 10s, at least 2s)");
  for (const EnvFlag& e : kMirrorEnvFlags) {
    CLI::Option* option = cmd->get_option(e.flag);
    option->description(option->get_description() + " [env " + e.env + "]");
  }
  return [cmd, flags] { return RunMirror(cmd, *flags); };
}

}  // namespace kvfold::cli
