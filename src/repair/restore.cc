// Restore: from the newest usable artifact, key by key.
//
// Nothing reaches the fold before the artifact's every chunk verified and
// its conditions held twice (before the download, and against fresh
// retention after it). Both sides are then walked in key order, chunk by
// chunk, each chunk committing under the old cursor; the cursor moves to
// the artifact's only in the final commit, so a crash mid-restore re-runs
// it, and re-running it changes nothing already done. The key listing is
// taken (and retention checked again after it) when the walk meets the
// first live fold key the artifact lacks, the only keys it decides.

#include <algorithm>
#include <vector>

#include "artifact/fold_digest.h"
#include "core/backoff.h"
#include "core/marker_window.h"
#include "core/mutation.h"
#include "core/repair_rules.h"
#include "kvfold/retention.h"
#include "kvfold/watch_metrics.h"
#include "repair/change_writer.h"
#include "repair/listed_keys.h"
#include "repair/repair_drivers.h"

namespace kvfold::repair {
namespace {

using std::chrono::milliseconds;

// The wait between looks for a usable artifact: a second at first, then
// longer, up to half a minute (capped by a quarter of the marker window).
constexpr milliseconds kRestoreWaitMin{1000};
constexpr milliseconds kRestoreWaitMax{30000};

// One attempt, pass by pass: check, verify the artifact, check again,
// merge chunk by chunk (listing once if a live fold key is missing from
// the artifact, and checking again), final commit. *retry says whether a
// failure may pass with time (no usable artifact yet) rather than being a
// fault of the fold.
class RestoreAttempt {
 public:
  RestoreAttempt(RepairContext& ctx, const RestoreRequest& req, const ArtifactManifest& m,
                 RestoreResult* out, bool* retry)
      : ctx_(ctx),
        req_(req),
        m_(m),
        out_(out),
        retry_(retry),
        listed_(ctx.listing_memory_keys, ctx.spill_dir) {}

  Status Run();

 private:
  // The artifact's conditions against fresh stream state; `when` names
  // the moment in the error.
  StatusOr<StreamState> Check(const char* when);
  // (e) The whole artifact verifies before the fold is touched.
  Status VerifyPass();
  // Keys only the fold holds are deleted only if the bucket does not list
  // them live; the listing is a proof only while nothing after the
  // artifact's cursor has been evicted, so retention is read again after
  // it. Taken once, when the merge meets the first such key: a fold the
  // artifact covers (the usual case) is walked once, and lists nothing.
  Status ListOnce();
  // Merges chunk by chunk, one commit each, under the old cursor.
  Status MergePass(ChangeWriter& writer, FoldWalker& walker);
  // Writes the merge of one key (the fold's entry, the artifact's).
  Status MergeKey(ChangeWriter& writer, const std::string& key, const std::optional<Entry>& fold,
                  const std::optional<Entry>& art);
  // Merges the fold keys before `bound` (all when nullptr): the fold's
  // alone.
  Status MergeFoldOnlyBefore(ChangeWriter& writer, FoldWalker& walker, const std::string* bound);
  Status Finish(ChangeWriter& writer);
  // The fold's faults are final: only the artifact side may pass with time.
  Status Final(Status s) {
    if (!s.ok()) *retry_ = false;
    return s;
  }

  RepairContext& ctx_;
  const RestoreRequest& req_;
  const ArtifactManifest& m_;
  RestoreResult* out_;
  bool* retry_;
  int64_t marker_ttl_ns_ = 0;  // as the last check measured it
  bool listed_once_ = false;
  ListedKeys listed_;
  uint64_t listing_revision_ = 0;
  StreamState checked_;  // the last check's stream state
};

Status RestoreAttempt::Run() {
  *retry_ = true;
  KVFOLD_RETURN_IF_ERROR(Check("before the download").status());
  KVFOLD_RETURN_IF_ERROR(VerifyPass());
  if (out_->stopped) return Status::OK();
  KVFOLD_RETURN_IF_ERROR(Check("after the download").status());
  // From here on the fold changes: only its own faults are final.
  // One commit per artifact chunk (chunks bound its size): a restore of a
  // million keys is a few dozen fsyncs, not a thousand.
  ChangeWriter writer(ctx_, ChangeOrigin::kRestore,
                      std::max<size_t>(ctx_.batch_size, size_t{1} << 16));
  // Each chunk in one table file, not through the log and memtables.
  writer.set_bulk(true);
  // The fold's values only where a rule keeps one (a rebase rewrites a
  // surviving entry at revision 0): otherwise an artifact entry replaces a
  // fold entry of a lower revision, whose value cannot make them equal.
  FoldWalker walker(ctx_.fold, req_.scope, /*values=*/req_.rebase);
  KVFOLD_RETURN_IF_ERROR(MergePass(writer, walker));
  if (out_->stopped) return Status::OK();
  KVFOLD_RETURN_IF_ERROR(MergeFoldOnlyBefore(writer, walker, nullptr));
  return Finish(writer);
}

StatusOr<StreamState> RestoreAttempt::Check(const char* when) {
  auto state = ctx_.source.ReadStream();
  if (!state.ok()) return state.status();
  // The smallest TTL a marker after the artifact's anchor can carry: the
  // bucket's, the watch's, and the exporter's (markers written before a
  // raise keep the old one).
  StreamState measured = *state;
  for (int64_t ttl : {req_.marker_ttl_ns, m_.marker_ttl_ns}) {
    if (ttl > 0 && (measured.marker_ttl_ns <= 0 || ttl < measured.marker_ttl_ns)) {
      measured.marker_ttl_ns = ttl;
    }
  }
  marker_ttl_ns_ = measured.marker_ttl_ns;
  out_->marker_window_ns = core::MarkerWindowNs(measured).value_or(0);
  core::RestoreTarget target{ctx_.source.bucket(),
                             state->created,
                             req_.scope,
                             req_.rebase ? std::nullopt : req_.fold_cursor,
                             state->first_seq,
                             measured.marker_ttl_ns,
                             state->server_time_ns,
                             state->last_seq};
  Status s = core::CheckRestore(m_, target);
  if (!s.ok()) return s.WithContext(when);
  checked_ = *state;
  return state;
}

Status RestoreAttempt::VerifyPass() {
  std::string previous;
  uint64_t entries = 0;
  artifact::FoldDigest digest;
  if (KVFOLD_MUTANT("restore-skip-verify-pass")) return Status::OK();
  for (size_t i = 0; i < m_.chunks.size(); ++i) {
    if (KVFOLD_MUTANT("restore-verify-order-per-chunk")) previous.clear();
    KVFOLD_RETURN_IF_ERROR(ctx_.artifacts->ReadChunk(
        m_, i, &previous, [&](std::string_view key, uint64_t rev, std::string_view, int64_t) {
          ++entries;
          digest.Add(key, rev);
          return Status::OK();
        }));
    if (ctx_.stop.stop_requested()) {
      out_->stopped = true;
      return Status::OK();
    }
  }
  if (entries != m_.entry_count) {
    return Status::Corruption("artifact " + m_.artifact_id + " lists " +
                              std::to_string(m_.entry_count) + " entries but its chunks hold " +
                              std::to_string(entries));
  }
  return artifact::CheckFoldDigest(m_.fold_digest, digest.Value(),
                                   "the records of artifact " + m_.artifact_id);
}

Status RestoreAttempt::ListOnce() {
  if (listed_once_ || KVFOLD_MUTANT("restore-skip-listing")) return Status::OK();
  KVFOLD_RETURN_IF_ERROR(ctx_.source.ListKeys(
      req_.scope, [this](std::string_view key, uint64_t) { return listed_.Add(key); },
      &listing_revision_));
  if (!KVFOLD_MUTANT("restore-skip-check-after-listing")) {
    KVFOLD_RETURN_IF_ERROR(Check("after the key listing").status());
  }
  listed_once_ = true;
  out_->listed = listed_.size();
  return Status::OK();
}

Status RestoreAttempt::MergeKey(ChangeWriter& writer, const std::string& key,
                                const std::optional<Entry>& fold, const std::optional<Entry>& art) {
  bool live = false;
  uint64_t delete_revision = 0;  // read only for a live key the artifact lacks
  if (fold && !art && !fold->deleted) {
    // Not final: the bucket's side may pass with time.
    KVFOLD_RETURN_IF_ERROR(ListOnce());
    auto c =
        LiveInBucket(ctx_.source, listed_, key, listing_revision_, &delete_revision, m_.cursor + 1);
    if (!c.ok()) return c.status();
    live = *c;
  }
  auto change = core::RestoreKey(fold, art, live, delete_revision, req_.rebase);
  if (!change) return Status::OK();
  if (art && change->entry == *art) ++out_->taken;
  // A hook or store failure is final: only the artifact side may pass
  // with time.
  return Final(writer.Add(key, fold, change->entry, change->hook));
}

Status RestoreAttempt::MergeFoldOnlyBefore(ChangeWriter& writer, FoldWalker& walker,
                                           const std::string* bound) {
  while (true) {
    auto f = walker.Peek();
    if (!f.ok()) return Final(f.status());
    if (*f == nullptr || (bound != nullptr && (*f)->first >= *bound)) return Status::OK();
    KVFOLD_RETURN_IF_ERROR(MergeKey(writer, (*f)->first, (*f)->second, std::nullopt));
    walker.Pop();
  }
}

Status RestoreAttempt::MergePass(ChangeWriter& writer, FoldWalker& walker) {
  std::string previous;
  if (ctx_.metrics) ctx_.metrics->RecordRestoreProgress(0, m_.chunks.size());
  std::vector<std::pair<std::string, Entry>> chunk;
  for (size_t i = 0; i < m_.chunks.size(); ++i) {
    chunk.clear();
    // Re-read and re-checked: it may have been pruned or replaced since.
    KVFOLD_RETURN_IF_ERROR(ctx_.artifacts->ReadChunk(
        m_, i, &previous,
        [&](std::string_view key, uint64_t rev, std::string_view value, int64_t expires_ns) {
          if (req_.scope.Contains(key) || KVFOLD_MUTANT("restore-ignore-artifact-scope")) {
            chunk.emplace_back(std::string(key), Entry{rev, false, std::string(value), expires_ns});
          }
          return Status::OK();
        }));
    for (const auto& [key, art] : chunk) {
      KVFOLD_RETURN_IF_ERROR(MergeFoldOnlyBefore(writer, walker, &key));
      auto f = walker.Peek();
      if (!f.ok()) return Final(f.status());
      std::optional<Entry> fold;
      if (*f != nullptr && (*f)->first == key) {
        fold = (*f)->second;
        walker.Pop();
      }
      KVFOLD_RETURN_IF_ERROR(MergeKey(writer, key, fold, art));
    }
    // The store's fault, not the artifact's.
    KVFOLD_RETURN_IF_ERROR(Final(writer.Flush()));
    if (ctx_.metrics) ctx_.metrics->RecordRestoreProgress(i + 1, m_.chunks.size());
    // Shutdown is observed between chunks; what was committed stays under
    // the old cursor and a later run finishes the restore.
    if (ctx_.stop.stop_requested()) {
      out_->stopped = true;
      return Status::OK();
    }
    if (KVFOLD_MUTANT("restore-cursor-every-chunk")) {
      FoldCommit early;
      early.cursor = m_.cursor;
      *retry_ = false;
      KVFOLD_RETURN_IF_ERROR(writer.Finish(early));
    }
  }
  return Status::OK();
}

Status RestoreAttempt::Finish(ChangeWriter& writer) {
  // The memo the repair runs under (the context drops it only on a rebase
  // onto a stream of another identity), the artifact's and the stream's own.
  const Retention now = ClassifyRetention(checked_, false);
  const bool evicted = m_.eviction_observed || ctx_.eviction_observed || now.has_evicted;
  FoldCommit final_meta;
  final_meta.cursor = m_.cursor;
  final_meta.cursor_time_ns = m_.cursor_time_ns;
  // The last check saw nothing stored after the cursor: current as of then.
  if (checked_.last_seq == m_.cursor && checked_.server_time_ns > m_.cursor_time_ns) {
    final_meta.cursor_time_ns = checked_.server_time_ns;
  }
  if (marker_ttl_ns_ > 0) final_meta.marker_ttl_ns = marker_ttl_ns_;
  final_meta.stream_created = checked_.created;
  final_meta.rebase = req_.rebase;
  if (evicted || req_.rebase) final_meta.eviction_observed = evicted;
  // The first cause seen: the fold's own, the exporter's, the stream's.
  if (evicted) {
    final_meta.eviction_cause = ctx_.eviction_observed ? ctx_.eviction_cause
                                : m_.eviction_observed ? m_.eviction_cause
                                                       : now.eviction_cause;
  }
  *retry_ = false;
  out_->deleted = writer.deletes();
  out_->artifact_id = m_.artifact_id;
  out_->cursor = m_.cursor;
  final_meta.last_repair =
      "restore from artifact " + m_.artifact_id + " at " + ctx_.artifacts->location() +
      ": cursor " + (req_.fold_cursor ? std::to_string(*req_.fold_cursor) : "<none>") + " -> " +
      std::to_string(m_.cursor) + ", " + std::to_string(out_->taken) + " taken, " +
      std::to_string(out_->deleted) + " deleted, " + std::to_string(out_->listed) + " listed";
  return writer.Finish(std::move(final_meta));
}

// One attempt on the newest artifact.
Status TryRestore(RepairContext& ctx, const RestoreRequest& req, RestoreResult* out, bool* retry) {
  *retry = true;
  auto manifest = ctx.artifacts->Newest();
  if (!manifest.ok()) return manifest.status();
  return RestoreAttempt(ctx, req, *manifest, out, retry).Run();
}

}  // namespace

Status RunRestore(RepairContext& ctx, const RestoreRequest& req, RestoreResult* out) {
  if (ctx.artifacts == nullptr) {
    return Status::CursorExpired(
        "a restore is needed but no artifact location is configured (--artifacts); start one "
        "node with --repair none, export from it (--export-to), then start the rest with "
        "--artifacts pointing there");
  }
  const auto deadline = ctx.clock.Now() + ctx.repair_timeout;
  core::Backoff backoff(kRestoreWaitMin, kRestoreWaitMax);
  while (true) {
    const int attempts = out->attempts + 1;
    *out = RestoreResult();
    out->attempts = attempts;

    bool retry = true;
    Status s = TryRestore(ctx, req, out, &retry);
    if (s.ok() || out->stopped) return Status::OK();
    // A refused right is no artifact still on its way.
    if (!retry || s.IsPermissionDenied()) return s;
    const std::string reason = s.ToString();
    // Waiting for an artifact fresh enough for the marker window: look
    // often enough to catch one inside it, but never more than once a
    // second (each look is a stream read and a listing of the location).
    milliseconds wait = out->marker_window_ns > 0
                            ? backoff.Next(std::max(core::QuarterWindow(out->marker_window_ns),
                                                    milliseconds(kRestoreWaitMin)))
                            : backoff.Next();
    if (KVFOLD_MUTANT("restore-wait-unpaced")) wait = milliseconds(10);
    const auto now = ctx.clock.Now();
    // The last look is at the deadline itself.
    if (now + wait > deadline && now < deadline) {
      wait = std::max(std::chrono::duration_cast<milliseconds>(deadline - now), milliseconds(1));
    }
    if (now >= deadline) {
      return Status::CursorExpired(
          "no usable artifact at " + ctx.artifacts->location() + " within the repair timeout (" +
          std::to_string(out->attempts) + " attempts; last: " + reason +
          "). Export a fresh artifact from a node that is up to date (kvfold export or mirror "
          "--export-to), or, knowing that deleted or aged-out keys may persist, run with "
          "--repair none");
    }
    if (ctx.metrics) ctx.metrics->RecordRestoreRetry();
    const auto give_up =
        std::chrono::system_clock::now() +
        std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline - ctx.clock.Now());
    std::string line = "restore attempt " + std::to_string(out->attempts) +
                       ": waiting for an artifact of bucket " + ctx.source.bucket() + " at " +
                       ctx.artifacts->location() +
                       " that covers the scope, is ahead of the fold's cursor";
    if (req.fold_cursor && !req.rebase) line += ' ' + std::to_string(*req.fold_cursor);
    line += " and is current (last look: " + reason + "); next look in " +
            std::to_string(wait.count()) + " ms, giving up at " +
            core::FormatTimeNs(
                std::chrono::duration_cast<std::chrono::nanoseconds>(give_up.time_since_epoch())
                    .count()) +
            " (repair timeout)";
    ctx.Log(LogLevel::kWarning, line);
    ctx.clock.SleepFor(wait, ctx.stop);
    if (ctx.stop.stop_requested()) {
      out->stopped = true;
      return Status::OK();
    }
  }
}

}  // namespace kvfold::repair
