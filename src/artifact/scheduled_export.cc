#include "kvfold/scheduled_export.h"

#include "artifact/signer.h"
#include "core/mutation.h"

namespace kvfold {

std::string_view ExportOutcomeName(ExportOutcome outcome) {
  switch (outcome) {
    case ExportOutcome::kWritten:
      return "written";
    case ExportOutcome::kUnchanged:
      return "unchanged";
    case ExportOutcome::kPointerAhead:
      return "pointer_ahead";
    case ExportOutcome::kOtherNode:
      return "other_node";
    case ExportOutcome::kFailed:
      return "failed";
  }
  return "unknown";
}

void ExportMetrics::Record(ExportOutcome outcome, uint64_t cursor) {
  std::lock_guard lock(mu_);
  switch (outcome) {
    case ExportOutcome::kWritten:
      ++counts_.written;
      counts_.last_cursor = cursor;
      last_written_ = std::chrono::steady_clock::now();
      break;
    case ExportOutcome::kUnchanged:
      ++counts_.unchanged;
      break;
    case ExportOutcome::kPointerAhead:
      ++counts_.pointer_ahead;
      break;
    case ExportOutcome::kOtherNode:
      ++counts_.other_node;
      break;
    case ExportOutcome::kFailed:
      ++counts_.failed;
      break;
  }
}

ExportStats ExportMetrics::Snapshot() const {
  std::lock_guard lock(mu_);
  ExportStats s = counts_;
  if (last_written_) {
    s.last_age_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - *last_written_).count();
  }
  return s;
}

Status ScheduledExport::Check(const ScheduledExportOptions& options) {
  if (options.bucket.empty()) {
    return Status::InvalidArgument("a scheduled export needs the bucket its lease is named after");
  }
  if (options.every <= std::chrono::milliseconds(0)) {
    return Status::InvalidArgument("a scheduled export's period must be > 0");
  }
  if (!options.sign_key_file.empty()) {
    KVFOLD_RETURN_IF_ERROR(artifact::SigningKey::Load(options.sign_key_file).status());
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<ScheduledExport>> ScheduledExport::Make(Fold& fold, ExportLease& lease,
                                                                 Transport& to,
                                                                 ScheduledExportOptions options) {
  KVFOLD_RETURN_IF_ERROR(Check(options));
  if (options.exporter_id.empty()) options.exporter_id = DefaultExporterId();
  if (options.clock == nullptr) options.clock = RealClock();
  return std::unique_ptr<ScheduledExport>(new ScheduledExport(fold, lease, to, std::move(options)));
}

void ScheduledExport::Log(LogLevel level, const std::string& line) const {
  if (opt_.log) opt_.log(LogLine(level, line));
}

ScheduledExport::Round ScheduledExport::RunRound() {
  Round round = Attempt();
  if (opt_.metrics) {
    opt_.metrics->Record(round.outcome, round.written ? round.written->cursor : 0);
  }
  if (round.outcome == ExportOutcome::kFailed) {
    Log(LogLevel::kWarning, "export: " + round.status.ToString());
  }
  // Once per streak: a pointer ahead of this fold is a lag here or an
  // exporter elsewhere, and says so until this fold passes it.
  if (round.outcome == ExportOutcome::kPointerAhead && !pointer_ahead_) {
    Log(LogLevel::kWarning, "export: " + round.status.message());
  }
  pointer_ahead_ = round.outcome == ExportOutcome::kPointerAhead;
  return round;
}

namespace {

ScheduledExport::Round RoundOf(ExportOutcome outcome, Status status = Status::OK(),
                               std::optional<ArtifactManifest> written = std::nullopt) {
  ScheduledExport::Round round;
  round.outcome = outcome;
  round.status = std::move(status);
  round.written = std::move(written);
  return round;
}

ScheduledExport::Round Failed(Status why) {
  return RoundOf(ExportOutcome::kFailed, std::move(why));
}

}  // namespace

ScheduledExport::Round ScheduledExport::Attempt() {
  auto won = lease_.TryAcquire("export." + opt_.bucket, opt_.exporter_id, opt_.every);
  if (!won.ok()) return Failed(won.status().WithContext("lease"));
  if (!*won) return RoundOf(ExportOutcome::kOtherNode);

  ExportOptions options;
  options.exporter_id = opt_.exporter_id;
  if (!KVFOLD_MUTANT("export-round-unsigned")) options.sign_key_file = opt_.sign_key_file;
  options.stream_last_seq = opt_.stream_last_seq;
  options.trusted_key_files = opt_.trusted_key_files;
  options.replaced_pointer = [this](const std::string& why) {
    Log(LogLevel::kWarning, "export: replaced the latest pointer: " + why);
  };
  uint64_t skipped = 0;
  options.skipped_key = [&](std::string_view key, const Status& why) {
    if (skipped++ == 0) {
      Log(LogLevel::kWarning, "export: left out key " + std::string(key) + ": " + why.message());
    }
  };
  auto m = ExportArtifact(fold_, to_, options);
  if (skipped > 1) {
    Log(LogLevel::kWarning, "export: left out " + std::to_string(skipped) + " keys in all");
  }
  if (m.status().IsAlreadyExists()) {
    // The export found the pointer valid and at or past the fold's cursor.
    auto meta = fold_.ReadMeta();
    auto pointer = to_.ReadPointer();
    if (meta.ok() && meta->cursor && pointer.ok() && *pointer &&
        (**pointer).cursor > *meta->cursor) {
      return RoundOf(
          ExportOutcome::kPointerAhead,
          Status::AlreadyExists("the latest pointer at " + to_.location() + " names artifact " +
                                (**pointer).artifact_id + " at cursor " +
                                std::to_string((**pointer).cursor) +
                                ", ahead of this fold's cursor " + std::to_string(*meta->cursor) +
                                ": exports wait until this fold passes it (another node exported "
                                "further, or this fold lags)"));
    }
    return RoundOf(ExportOutcome::kUnchanged);
  }
  if (!m.ok()) return Failed(m.status());
  if (m->attests.empty()) {
    Log(LogLevel::kInfo, "export: wrote artifact " + m->artifact_id + " (cursor " +
                             std::to_string(m->cursor) + ", " + std::to_string(m->entry_count) +
                             " entries) to " + to_.location());
  } else {
    Log(LogLevel::kInfo, "export: re-attested artifact " + m->attests + " as " + m->artifact_id +
                             " (cursor " + std::to_string(m->cursor) +
                             ", no record changed since) at " + to_.location());
  }
  if (opt_.keep > 0) {
    // A prune that fails leaves extra artifacts, never a missing one.
    Status pruned = PruneArtifacts(
        to_,
        PruneOptions{.keep = opt_.keep,
                     .min_age = opt_.keep_younger_than,
                     .verify = PruneTrustOfExporter(opt_.trusted_key_files, opt_.sign_key_file)},
        nullptr);
    if (!pruned.ok()) Log(LogLevel::kWarning, "export: prune: " + pruned.ToString());
  }
  return RoundOf(ExportOutcome::kWritten, Status::OK(), std::move(m).value());
}

void ScheduledExport::Run(std::stop_token stop) {
  while (true) {
    opt_.clock->SleepFor(opt_.every, stop);
    if (stop.stop_requested()) return;
    RunRound();
  }
}

}  // namespace kvfold
