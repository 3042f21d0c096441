// Restore: from the newest usable artifact, key by key (SPEC §5).
//
// Nothing reaches the fold before the artifact's every chunk verified and
// its conditions held twice (before the download, and against fresh
// retention after it and after the listing). Both sides are then walked in
// key order, chunk by chunk, each chunk committing under the old cursor;
// the cursor moves to the artifact's only in the final commit, so a crash
// mid-restore re-runs it, and re-running it changes nothing already done.

#include <algorithm>
#include <vector>

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

// One attempt. *retry says whether a failure may pass with time (no usable
// artifact yet) rather than being a fault of the fold.
Status TryRestore(RepairContext& ctx, const RestoreRequest& req, RestoreResult* out, bool* retry) {
  *retry = true;
  ArtifactSource& artifacts = *ctx.artifacts;
  auto manifest = artifacts.Newest();
  if (!manifest.ok()) return manifest.status();
  const ArtifactManifest& m = *manifest;

  int64_t marker_ttl_ns = 0;  // as the last check measured it
  auto check = [&](const char* when) -> StatusOr<StreamState> {
    auto state = ctx.source.ReadStream();
    if (!state.ok()) return state.status();
    // The smallest TTL a marker after the artifact's anchor can carry: the
    // bucket's, the watch's, and the exporter's (markers written before a
    // raise keep the old one).
    StreamState measured = *state;
    for (int64_t ttl : {req.marker_ttl_ns, m.marker_ttl_ns}) {
      if (ttl > 0 && (measured.marker_ttl_ns <= 0 || ttl < measured.marker_ttl_ns)) {
        measured.marker_ttl_ns = ttl;
      }
    }
    marker_ttl_ns = measured.marker_ttl_ns;
    out->marker_window_ns = core::MarkerWindowNs(measured).value_or(0);
    core::RestoreTarget target{ctx.source.bucket(),
                               state->created,
                               req.scope,
                               req.rebase ? std::nullopt : req.fold_cursor,
                               state->first_seq,
                               measured.marker_ttl_ns,
                               state->server_time_ns};
    Status s = core::CheckRestore(m, target);
    if (!s.ok()) return s.WithContext(when);
    return state;
  };
  auto before = check("before the download");
  if (!before.ok()) return before.status();

  // (e) The whole artifact verifies before the fold is touched. The same
  // pass walks the fold beside it: only a live key the artifact lacks
  // needs the key listing (the fold does not change until this repair
  // writes, so what this finds holds for the pass that writes).
  bool fold_only_live = false;
  {
    std::string previous;
    uint64_t entries = 0;
    FoldWalker walker(ctx.fold, req.scope, /*values=*/false);
    Status fold_error;
    // Fold keys before `bound` (all when nullptr) are the fold's alone.
    auto fold_only_before = [&](const std::string_view* bound) -> Status {
      while (!fold_only_live) {
        auto f = walker.Peek();
        if (!f.ok()) return fold_error = f.status();
        if (*f == nullptr) return Status::OK();
        if (bound != nullptr && (*f)->first >= *bound) {
          if ((*f)->first == *bound) walker.Pop();
          return Status::OK();
        }
        if (!(*f)->second.deleted) fold_only_live = true;
        walker.Pop();
      }
      return Status::OK();
    };
    if (KVFOLD_MUTANT("restore-skip-verify-pass")) {
      fold_only_live = true;  // list, as if the fold had a key of its own
      entries = m.entry_count;
    }
    for (size_t i = 0; i < m.chunks.size() && !KVFOLD_MUTANT("restore-skip-verify-pass"); ++i) {
      Status read = artifacts.ReadChunk(
          m, i, &previous, [&](std::string_view key, uint64_t, std::string_view) {
            ++entries;
            return fold_only_before(&key);
          });
      if (!fold_error.ok()) {
        *retry = false;
        return fold_error;
      }
      KVFOLD_RETURN_IF_ERROR(read);
      if (ctx.stop.stop_requested()) {
        out->stopped = true;
        return Status::OK();
      }
    }
    Status rest = fold_only_before(nullptr);
    if (!rest.ok()) {
      *retry = false;
      return rest;
    }
    if (entries != m.entry_count) {
      return Status::Corruption("artifact " + m.artifact_id + " lists " +
                                std::to_string(m.entry_count) + " entries but its chunks hold " +
                                std::to_string(entries));
    }
  }
  auto after_download = check("after the download");
  if (!after_download.ok()) return after_download.status();

  // Keys only the fold holds are deleted only if the bucket does not list
  // them live; the listing is a proof only while nothing after the
  // artifact's cursor has been evicted, so retention is read again after it.
  ListedKeys listed(ctx.listing_memory_keys, ctx.spill_dir);
  uint64_t listing_revision = 0;
  StatusOr<StreamState> after_listing = after_download;
  const bool list = fold_only_live;
  if (list) {
    KVFOLD_RETURN_IF_ERROR(ctx.source.ListKeys(
        req.scope, [&listed](std::string_view key, uint64_t) { return listed.Add(key); },
        &listing_revision));
    after_listing = check("after the key listing");
    if (!after_listing.ok()) return after_listing.status();
  }
  out->listed = listed.size();
  // On a rebase the old stream's memo goes; the artifact's and the new
  // stream's own count.
  const bool evicted = m.eviction_observed || (ctx.eviction_observed && !req.rebase) ||
                       ClassifyRetention(*after_listing, false).has_evicted;

  // From here on the fold changes: only its own faults are final.
  // One commit per artifact chunk (chunks bound its size): a restore of a
  // million keys is a few dozen fsyncs, not a thousand.
  ChangeWriter writer(ctx, ChangeOrigin::kRestore,
                      std::max<size_t>(ctx.batch_size, size_t{1} << 16));
  FoldWalker walker(ctx.fold, req.scope);
  auto apply = [&](const std::string& key, const std::optional<Entry>& fold,
                   const std::optional<Entry>& art) -> Status {
    bool live = false;
    uint64_t delete_revision = listing_revision;
    if (fold && !art && !fold->deleted) {
      if (!list) {
        *retry = false;
        return Status::Internal("restore: fold key " + key +
                                " is not in the artifact, but the verification pass found none");
      }
      auto c =
          LiveInBucket(ctx.source, listed, key, listing_revision, &delete_revision, m.cursor + 1);
      if (!c.ok()) return c.status();
      live = *c;
    }
    auto change = core::RestoreKey(fold, art, live, delete_revision, req.rebase);
    if (!change) return Status::OK();
    if (art && change->entry == *art) ++out->taken;
    // A hook or store failure is final: only the artifact side may pass
    // with time.
    Status s = writer.Add(key, fold, change->entry, change->hook);
    if (!s.ok()) *retry = false;
    return s;
  };
  // Fold keys before `bound` (all when nullptr) are the fold's alone.
  auto fold_only_before = [&](const std::string* bound) -> Status {
    while (true) {
      auto f = walker.Peek();
      if (!f.ok()) {
        *retry = false;
        return f.status();
      }
      if (*f == nullptr || (bound != nullptr && (*f)->first >= *bound)) return Status::OK();
      KVFOLD_RETURN_IF_ERROR(apply((*f)->first, (*f)->second, std::nullopt));
      walker.Pop();
    }
  };

  std::string previous;
  if (ctx.metrics) ctx.metrics->RecordRestoreProgress(0, m.chunks.size());
  std::vector<std::pair<std::string, Entry>> chunk;
  for (size_t i = 0; i < m.chunks.size(); ++i) {
    chunk.clear();
    // Re-read and re-checked: it may have been pruned or replaced since.
    KVFOLD_RETURN_IF_ERROR(artifacts.ReadChunk(
        m, i, &previous, [&](std::string_view key, uint64_t rev, std::string_view value) {
          if (req.scope.Contains(key) || KVFOLD_MUTANT("restore-ignore-artifact-scope")) {
            chunk.emplace_back(std::string(key), Entry{rev, false, std::string(value)});
          }
          return Status::OK();
        }));
    for (const auto& [key, art] : chunk) {
      KVFOLD_RETURN_IF_ERROR(fold_only_before(&key));
      auto f = walker.Peek();
      if (!f.ok()) {
        *retry = false;
        return f.status();
      }
      std::optional<Entry> fold;
      if (*f != nullptr && (*f)->first == key) {
        fold = (*f)->second;
        walker.Pop();
      }
      KVFOLD_RETURN_IF_ERROR(apply(key, fold, art));
    }
    if (Status flushed = writer.Flush(); !flushed.ok()) {
      *retry = false;  // the store's fault, not the artifact's
      return flushed;
    }
    if (ctx.metrics) ctx.metrics->RecordRestoreProgress(i + 1, m.chunks.size());
    // Shutdown is observed between chunks; what was committed stays under
    // the old cursor and a later run finishes the restore.
    if (ctx.stop.stop_requested()) {
      out->stopped = true;
      return Status::OK();
    }
    if (KVFOLD_MUTANT("restore-cursor-every-chunk")) {
      FoldCommit early;
      early.cursor = m.cursor;
      *retry = false;
      KVFOLD_RETURN_IF_ERROR(writer.Finish(early));
    }
  }
  KVFOLD_RETURN_IF_ERROR(fold_only_before(nullptr));

  FoldCommit final_meta;
  final_meta.cursor = m.cursor;
  final_meta.cursor_time_ns = m.cursor_time_ns;
  if (marker_ttl_ns > 0) final_meta.marker_ttl_ns = marker_ttl_ns;
  final_meta.stream_created = after_listing->created;
  final_meta.rebase = req.rebase;
  if (evicted || req.rebase) final_meta.eviction_observed = evicted;
  *retry = false;
  out->deleted = writer.deletes();
  out->artifact_id = m.artifact_id;
  out->cursor = m.cursor;
  final_meta.last_repair = "restore from artifact " + m.artifact_id + " at " +
                           artifacts.location() + ": cursor " +
                           (req.fold_cursor ? std::to_string(*req.fold_cursor) : "<none>") +
                           " -> " + std::to_string(m.cursor) + ", " + std::to_string(out->taken) +
                           " taken, " + std::to_string(out->deleted) + " deleted, " +
                           std::to_string(out->listed) + " listed";
  return writer.Finish(std::move(final_meta));
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
  milliseconds backoff = ctx.backoff_min;
  while (true) {
    const int attempts = out->attempts + 1;
    *out = RestoreResult();
    out->attempts = attempts;

    bool retry = true;
    Status s = TryRestore(ctx, req, out, &retry);
    if (s.ok() || out->stopped) return Status::OK();
    if (!retry) return s;
    const std::string reason = s.ToString();
    milliseconds longest = ctx.backoff_max;
    if (out->marker_window_ns > 0) {
      longest = std::min(core::QuarterWindow(out->marker_window_ns), longest);
    }
    backoff = std::min(backoff, longest);
    if (ctx.clock.Now() + backoff > deadline) {
      return Status::CursorExpired(
          "no usable artifact at " + ctx.artifacts->location() + " within the repair timeout (" +
          std::to_string(out->attempts) + " attempts; last: " + reason +
          "). Export a fresh artifact from a node that is up to date (kvfold export or mirror "
          "--export-to), or, knowing that deleted or aged-out keys may persist, run with "
          "--repair none");
    }
    if (ctx.metrics) ctx.metrics->RecordRestoreRetry();
    ctx.Log(LogLevel::kWarning, "restore attempt " + std::to_string(out->attempts) +
                                    ": no usable artifact at " + ctx.artifacts->location() + " (" +
                                    reason + "); retrying in " + std::to_string(backoff.count()) +
                                    " ms");
    ctx.clock.SleepFor(backoff, ctx.stop);
    if (ctx.stop.stop_requested()) {
      out->stopped = true;
      return Status::OK();
    }
    backoff = std::min(backoff * 2, longest);
  }
}

}  // namespace kvfold::repair
