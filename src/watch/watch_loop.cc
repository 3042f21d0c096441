// The watch loop's driver (watch/watch_loop.h): preparing from the fold,
// the run loop that alternates sessions, repairs and retry waits, and what
// each stream read teaches about the bucket's retention. Sessions and
// delivery are in watch_session.cc, the floor checks, probes and lagging
// view in watch_floor.cc, repair orchestration in watch_repair.cc.

#include "watch/watch_loop.h"

#include <utility>

#include "core/backoff.h"
#include "core/message_ttl.h"
#include "core/mutation.h"
#include "kvfold/retention.h"

namespace kvfold {

using std::chrono::milliseconds;

Status WatchLoop::Prepare() {
  if (opt_.batch_size == 0 || opt_.batch_bytes == 0 || opt_.sync_run_bytes == 0 ||
      opt_.max_commit_failures <= 0) {
    return Status::InvalidArgument(
        "WatchOptions: batch_size, batch_bytes, sync_run_bytes and max_commit_failures must be "
        "> 0");
  }
  if (opt_.reconnect_backoff_min.count() <= 0 ||
      opt_.reconnect_backoff_max < opt_.reconnect_backoff_min) {
    return Status::InvalidArgument(
        "WatchOptions: reconnect_backoff_min must be > 0 and at most reconnect_backoff_max");
  }
  auto meta = fold_.ReadMeta();
  if (!meta.ok()) return meta.status();
  const std::string& bucket = source_.bucket();
  if (!meta->bucket.empty() && meta->bucket != bucket) {
    return Status::FailedPrecondition("this fold mirrors bucket " + meta->bucket + ", not " +
                                      bucket + "; use another fold directory for bucket " + bucket);
  }
  if (meta->scope && *meta->scope != opt_.scope.prefixes()) {
    auto recorded = Scope::Make(*meta->scope);
    return Status::FailedPrecondition(
        "this fold was mirrored with scope " +
        (recorded.ok() ? recorded->ToString() : std::string("<unreadable>")) +
        " but this watch asks for " + opt_.scope.ToString() +
        "; use the same scope or another fold directory");
  }
  if (meta->unfinished_seed()) {
    return Status::FailedPrecondition("the fold holds an unfinished seed from artifact " +
                                      meta->seeding + "; re-run `kvfold seed` to finish it");
  }
  unanchored_ = !meta->cursor && meta->entries > 0 && !KVFOLD_MUTANT("watch-trust-unanchored");
  fold_max_revision_ = meta->max_revision;
  fold_empty_ = meta->entries == 0 && meta->max_revision == 0;
  fold_entries_ = meta->entries;
  counts_stale_ = meta->counts_stale;
  recount_at_ = 0;
  new_keys_through_ = 0;
  ForgetDeadlines();
  pipeline_.ResetTo(meta->cursor, meta->cursor_time_ns);
  if (opt_.metrics && meta->cursor) opt_.metrics->RecordCursor(*meta->cursor);
  guard_.ResetTo(meta->cursor, meta->cursor_time_ns, /*new_stream=*/false);
  marker_ttl_ = core::MarkerTtl(meta->marker_ttl_ns);
  // Markers the fold saw on announced every expiry since its cursor's anchor.
  markers_written_ = meta->marker_ttl_ns > 0;
  markers_since_ns_ = 0;
  stream_created_ = meta->stream_created;
  eviction_observed_ = meta->eviction_observed;
  eviction_cause_ = meta->eviction_cause;
  if (meta->bucket.empty()) pipeline_.pending().meta().bucket = bucket;
  if (!meta->scope) pipeline_.pending().meta().scope = opt_.scope.prefixes();
  next_reconcile_ = clock_.Now() + opt_.reconcile_every;
  return Status::OK();
}

void WatchLoop::PlanCounting(const StreamState& state, uint64_t sequential_from) {
  const uint64_t backlog =
      state.last_seq >= sequential_from ? state.last_seq - sequential_from + 1 : 0;
  // The fold as it is now (a long-running watch has grown it since Prepare).
  if (auto meta = fold_.ReadMeta(); meta.ok()) fold_entries_ = meta->entries;
  // A recount of the whole fold costs about what reading the entries of
  // half of it does (docs/performance.md): a catch-up that rewrites half
  // the fold or more saves by skipping its reads. Never on
  // an empty fold, whose first sync proves its keys new and counts them,
  // nor with an apply hook: the watch reads each key for it and counts.
  const bool uncounted = opt_.recount_backlog > 0 && !opt_.apply && !fold_empty_ &&
                         fold_entries_ > 0 && backlog >= opt_.recount_backlog &&
                         backlog >= fold_entries_ / 2;
  pipeline_.pending().set_uncounted(uncounted);
  if (uncounted && !counts_stale_) {
    Log("catching up " + std::to_string(backlog) + " messages on a fold of " +
        std::to_string(fold_entries_) +
        " entries: the fold's counts wait for one recount at "
        "the end");
  }
  counts_stale_ = (counts_stale_ && !KVFOLD_MUTANT("watch-forget-stale-fold")) || uncounted;
  recount_at_ = counts_stale_ ? std::max<uint64_t>(state.last_seq, 1) : 0;
}

Status WatchLoop::RecountWhenDue(bool caught_up) {
  // A stop is not held up by a scan of the fold: the next start recounts.
  if (!counts_stale_ || opt_.stop.stop_requested()) return Status::OK();
  const auto& committed = pipeline_.committed();
  if (!caught_up && (recount_at_ == 0 || !committed || *committed < recount_at_)) {
    return Status::OK();
  }
  pipeline_.pending().set_uncounted(false);
  // No commit may run beside it: the batches handed over land first.
  const bool flush_after = KVFOLD_MUTANT("watch-recount-before-flush");
  if (!flush_after) KVFOLD_RETURN_IF_ERROR(Flush());
  if (!KVFOLD_MUTANT("watch-recount-skipped")) {
    const auto started = clock_.Now();
    Status s = fold_.Recount();
    if (!s.ok()) return s.WithContext("recounting the fold after a catch-up");
    Log("recounted the fold in " +
        std::to_string(std::chrono::duration_cast<milliseconds>(clock_.Now() - started).count()) +
        " ms");
  }
  if (flush_after) KVFOLD_RETURN_IF_ERROR(Flush());
  counts_stale_ = false;
  recount_at_ = 0;
  return Status::OK();
}

bool WatchLoop::CaughtUp() const {
  if (!target_) return false;
  const auto& committed = pipeline_.committed();
  return *target_ == 0 || (committed && *committed >= *target_);
}

Status WatchLoop::Run() {
  KVFOLD_RETURN_IF_ERROR(Prepare());
  core::Backoff backoff(opt_.reconnect_backoff_min, opt_.reconnect_backoff_max);
  while (true) {
    SessionEnd end = SessionEnd::kBroken;
    const auto received_before = guard_.received();
    Status s = Session(&end);
    if (!s.ok()) {
      // Keep what was received and hooked; the error still wins.
      (void)Flush();
      return s;
    }
    if (end == SessionEnd::kDone) return Finish();
    if (end == SessionEnd::kRepair) {
      // Everything received is folded and in the store before any repair
      // looks at the fold (a re-queued batch would be invisible to it).
      // Readiness: a repair rewrites the fold (a reconcile only drops keys
      // already gone, and the fold stays servable through it).
      const bool rewrites = repair_cause_ != core::RepairCause::kReconcile;
      if (opt_.metrics && rewrites) opt_.metrics->RecordRepairRunning(true);
      Status r = Repair();
      RecordRepairOutcome(r);
      if (opt_.metrics && rewrites) {
        // An interrupted repair runs again: still repairing (a session that
        // then finds none due ends it, in Deliver). A finished one must
        // catch up again before the fold is ready.
        if (!r.IsUnavailable()) opt_.metrics->RecordRepairRunning(false);
        if (r.ok()) opt_.metrics->RecordRepaired();
      }
      // A repair writes entries of its own, possibly above the cursor.
      auto meta = fold_.ReadMeta();
      fold_max_revision_ = meta.ok() ? meta->max_revision : UINT64_MAX;
      fold_empty_ = false;
      if (meta.ok()) {
        fold_entries_ = meta->entries;
        counts_stale_ = meta->counts_stale;
      }
      recount_at_ = 0;
      pipeline_.pending().set_uncounted(false);  // the next delivery decides
      new_keys_through_ = 0;
      // A restore or relist brings deadlines (and a position) of its own;
      // a reconcile only deletes keys, whose items then fall stale.
      if (rewrites && !KVFOLD_MUTANT("deadlines-kept-after-repair")) ForgetDeadlines();
      if (r.ok()) {
        if (opt_.stop.stop_requested()) return Flush();
        source_moved_ = false;
        backoff.Reset();
        continue;
      }
      if (!r.IsUnavailable()) return r;
      Log(LogLevel::kWarning, "repair interrupted: " + r.message());
    } else {
      KVFOLD_RETURN_IF_ERROR(TryCommit(/*force=*/true));
    }
    const bool moved = std::exchange(source_moved_, false);
    if (guard_.received() != received_before || moved) backoff.Reset();
    if (opt_.metrics) opt_.metrics->RecordRetryWait();  // the loop turns: liveness
    const milliseconds wait = backoff.Next();
    Log("retrying in " + std::to_string(wait.count()) + " ms");
    clock_.SleepFor(wait, opt_.stop);
    if (opt_.stop.stop_requested()) return Flush();
  }
}

void WatchLoop::NoteRetention(const StreamState& state) {
  if (marker_ttl_.Observe(state, guard_.anchor_lost() ? 0 : guard_.CursorAnchor())) {
    pipeline_.pending().meta().marker_ttl_ns = marker_ttl_.effective_ns();
    Log("limit-marker TTL for the marker window: " +
        std::to_string(marker_ttl_.effective_ns() / 1000000) +
        " ms (the bucket's: " + std::to_string(state.marker_ttl_ns / 1000000) + " ms)");
  }
  last_state_ = marker_ttl_.Apply(state);
  pipeline_.set_marker_window(core::MarkerWindowNs(last_state_));
  if (opt_.metrics) opt_.metrics->RecordStreamLast(state.last_seq);
  // Markers turned on announce only the expiries after they were: those
  // before (deadlines up to the read that first saw them) stay the fold's.
  const bool markers = state.marker_ttl_ns > 0;
  if (markers && !markers_written_ && !KVFOLD_MUTANT("markers-on-forget-earlier-deadlines")) {
    markers_since_ns_ = state.server_time_ns;
  }
  if (!markers) markers_since_ns_ = 0;
  markers_written_ = markers;
  // Where limit markers announce every expiry (history 1): no queue.
  const bool deadlines =
      (core::ExpiriesMayGoUnmarked(state) || (state.allow_msg_ttl && markers_since_ns_ > 0)) &&
      !KVFOLD_MUTANT("deadlines-ignored");
  if (deadlines != deadlines_apply_) ForgetDeadlines();
  deadlines_apply_ = deadlines;
  if (deadlines && !markers && !warned_ttl_without_markers_) {
    warned_ttl_without_markers_ = true;
    Log(LogLevel::kWarning,
        "bucket " + source_.bucket() +
            " allows per-message TTL but writes no limit markers (subject_delete_marker_ttl "
            "unset): an expiry vanishes from the stream without a trace, so this fold deletes "
            "each key at its deadline (its message's time plus its Nats-TTL, by the server's "
            "clock; with history, back to its previous message), but a TTL write that expired "
            "while this fold was behind is never seen; "
            "enable limit markers on the bucket (LimitMarkerTTL), or run with --reconcile-every");
  }
  if (eviction_observed_) return;
  const Retention seen = ClassifyRetention(state, /*eviction_observed=*/true);
  if (seen.has_evicted) {
    eviction_observed_ = true;
    eviction_cause_ = seen.eviction_cause;
    pipeline_.pending().meta().eviction_observed = true;
    pipeline_.pending().meta().eviction_cause = seen.eviction_cause;
    Log("bucket " + source_.bucket() + " has evicted current values (" +
        DescribeRetention(state, seen) +
        "); recorded in the fold: its key listing is never taken for the truth again");
  }
}

}  // namespace kvfold
