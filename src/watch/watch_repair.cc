// The watch loop's repair orchestration (watch/watch_loop.h): the drain
// before a repair, the plan (cause, fresh retention, policy), the drivers
// of src/repair run under a narrow RepairContext, and ReanchorToFold, the
// one way a repair's outcome re-enters the loop.

#include <ctime>
#include <utility>

#include "core/mutation.h"
#include "kvfold/retention.h"
#include "repair/repair_drivers.h"
#include "watch/watch_loop.h"

namespace kvfold {

using std::chrono::milliseconds;

namespace {

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

// Folds what already arrived before a repair: it is received, and a restore
// would otherwise have to cover it too. Each message passes the same gates
// as a live one (Take): the next session's start trusts everything received
// as checked. Bounded: a busy stream must not postpone the repair forever.
Status WatchLoop::DrainBeforeRepair(Delivery& delivery, uint64_t sequential_from) {
  for (size_t drained = 0; drained < std::max<size_t>(opt_.batch_size, 10000); ++drained) {
    // Within the byte bound too: this batch is flushed whole before the repair.
    if (pipeline_.pending().bytes() >= opt_.batch_bytes) break;
    auto ev = delivery.Next(milliseconds(1));
    if (!ev.ok() || ev->kind != DeliveryEvent::Kind::kMessage) break;
    if (KVFOLD_MUTANT("drain-apply-unchecked")) {
      KVFOLD_RETURN_IF_ERROR(Apply(&ev->message));
      continue;
    }
    bool keep = true;
    KVFOLD_RETURN_IF_ERROR(Take(&ev->message, sequential_from, &keep));
    if (!keep) break;  // the rest comes again after received
  }
  return Status::OK();
}

Status WatchLoop::Repair() {
  RepairPlan plan;
  plan.cause = *repair_cause_;
  plan.why = repair_why_;
  // Everything received is folded and in the store before any repair looks
  // at the fold: a re-queued batch would be invisible to the key-set diff
  // and could resurrect a key deleted meanwhile.
  repair_kind_.reset();
  repair_stopped_ = false;
  if (!KVFOLD_MUTANT("repair-skip-flush")) KVFOLD_RETURN_IF_ERROR(Flush());
  repair_cause_.reset();
  auto state = ReadState();
  if (!state.ok()) {
    repair_cause_ = plan.cause;  // retried after the backoff
    return state.status();
  }
  plan.state = *state;
  const bool memo_before = eviction_observed_;
  NoteRetention(plan.state);
  if (eviction_observed_ && !memo_before) {
    FoldCommit memo;
    memo.eviction_observed = true;
    memo.eviction_cause = eviction_cause_;
    KVFOLD_RETURN_IF_ERROR(fold_.Commit(memo));
  }
  plan.rebase = plan.cause == core::RepairCause::kRecreated;
  // The memo goes only with a rebuild on a stream of another identity; a
  // stream that kept its identity with a shorter history (restored from a
  // backup) is the same bucket, and the memo still speaks for it.
  bool drop_memo = plan.rebase && plan.state.created != stream_created_;
  if (KVFOLD_MUTANT("repair-recreated-keeps-old-memo")) drop_memo = false;
  if (KVFOLD_MUTANT("repair-rebase-drops-memo-of-same-stream")) drop_memo = plan.rebase;
  plan.memo = eviction_observed_ && !drop_memo;
  const Retention retention = ClassifyRetention(plan.state, plan.memo);
  plan.choice = core::ChooseRepair(opt_.repair, plan.cause, retention);
  // A memo an older kvfold recorded may speak of expiries only: kept (a
  // volume limit since removed looks the same), but said.
  if (plan.memo && eviction_cause_ == kEvictionCauseUnknown && !retention.evicts_current_values) {
    plan.choice.why +=
        " (this fold's eviction memo was recorded by a kvfold that counted expiries as "
        "evictions, so its cause is unknown; if bucket " +
        source_.bucket() +
        " never had max_msgs or max_bytes with discard old, nor max_age without limit markers, "
        "move this fold aside and start a new one: on this bucket a new fold joins by a state "
        "sync, no artifact needed)";
  }
  repair_kind_ = RepairKindOf(plan);
  Log(std::string("repair: ") + core::RepairCauseName(plan.cause) + " (" + plan.why + "); bucket " +
      DescribeRetention(plan.state, retention) + "; policy " +
      std::string(ExpiryRepairName(opt_.repair)) + " -> " +
      core::RepairActionName(plan.choice.action) + ": " + plan.choice.why);
  switch (plan.choice.action) {
    case core::RepairAction::kRefuse:
      if (plan.cause == core::RepairCause::kReconcile) return Status::OK();
      // Refused: entries, cursor and last_repair stay as they were (only
      // the eviction memo, a fact about the bucket, may have been recorded).
      return Status::CursorExpired(
          plan.why + ". " + plan.choice.why +
          ". Choices: --repair restore with --artifacts LOC holding a fresh artifact of this "
          "bucket (export one from an up-to-date node); or, on a first deploy onto a bucket "
          "that has already evicted, start one node with --repair none, export from it, then "
          "start the rest with --repair auto --artifacts LOC");
    case core::RepairAction::kRelist:
      return Relist(plan);
    case core::RepairAction::kRestore:
      return Restore(plan);
    case core::RepairAction::kResync:
      return Resync(plan);
  }
  return Status::Internal("unknown repair action");
}

std::optional<RepairKind> WatchLoop::RepairKindOf(const RepairPlan& plan) {
  const bool reconcile = plan.cause == core::RepairCause::kReconcile;
  switch (plan.choice.action) {
    case core::RepairAction::kRefuse:
      // A reconcile with nothing it may do is skipped, not refused.
      if (reconcile) return std::nullopt;
      return RepairKind::kRefuse;
    case core::RepairAction::kRelist:
      return reconcile ? RepairKind::kReconcile : RepairKind::kRelist;
    case core::RepairAction::kRestore:
      return RepairKind::kRestore;
    case core::RepairAction::kResync:
      return RepairKind::kResync;
  }
  return std::nullopt;
}

std::string WatchLoop::RepairRecord(const RepairPlan& plan, const std::string& outcome) const {
  return std::string(ExpiryRepairName(opt_.repair)) + " " +
         core::RepairActionName(plan.choice.action) + " after " +
         core::RepairCauseName(plan.cause) + ": " + outcome + " at " + UtcNow();
}

repair::RepairContext WatchLoop::RepairCtx(const RepairPlan& plan) const {
  repair::RepairContext ctx(source_, fold_, clock_);
  ctx.eviction_observed = plan.memo;
  if (plan.memo) ctx.eviction_cause = eviction_cause_;
  ctx.artifacts = opt_.artifacts;
  ctx.repair_timeout = opt_.repair_timeout;
  ctx.backoff_min = opt_.reconnect_backoff_min;
  ctx.backoff_max = opt_.reconnect_backoff_max;
  ctx.apply = &opt_.apply;
  ctx.batch_size = opt_.batch_size;
  ctx.max_commit_failures = opt_.max_commit_failures;
  ctx.listing_memory_keys = opt_.listing_memory_keys;
  ctx.spill_dir = opt_.spill_dir;
  ctx.stop = opt_.stop;
  ctx.log = &opt_.log;
  ctx.metrics = opt_.metrics;
  return ctx;
}

Status WatchLoop::Relist(const RepairPlan& plan) {
  FoldCommit final_meta;
  if (plan.rebase) {
    final_meta.cursor = 0;
    final_meta.rebase = true;
    final_meta.stream_created = plan.state.created;
    // A new identity starts clean; the same stream keeps its memo.
    const Retention now = ClassifyRetention(plan.state, false);
    final_meta.eviction_observed = plan.memo || now.has_evicted;
    if (*final_meta.eviction_observed) {
      final_meta.eviction_cause = plan.memo ? eviction_cause_ : now.eviction_cause;
    }
  }
  repair::RelistResult r;
  const ChangeOrigin origin = plan.cause == core::RepairCause::kReconcile ? ChangeOrigin::kReconcile
                                                                          : ChangeOrigin::kRelist;
  repair::RepairContext ctx = RepairCtx(plan);
  // A fold with a cursor (or a rebuilt one, at cursor 0) is re-anchored at
  // the listing; an unanchored one state-syncs next.
  const bool anchor_cursor = plan.rebase || pipeline_.committed().has_value();
  Status s = repair::RunRelist(ctx, opt_.scope, origin, plan.rebase, anchor_cursor, final_meta, &r);
  if (s.IsFailedPrecondition()) {
    // The bucket began evicting during the listing: decide again with
    // the new retention (the memo is recorded by the next read).
    Log(LogLevel::kWarning, "relist abandoned: " + s.message());
    if (++relists_abandoned_ >= 3) {
      return Status::CursorExpired(plan.why + ". The key listing stopped being the truth " +
                                   std::to_string(relists_abandoned_) +
                                   " times in a row: " + s.message());
    }
    repair_cause_ = plan.cause;
    repair_why_ = plan.why;
    return Status::OK();
  }
  relists_abandoned_ = 0;
  KVFOLD_RETURN_IF_ERROR(s);
  if (r.stopped) {
    repair_stopped_ = true;
    return Status::OK();
  }
  Log(std::string(plan.cause == core::RepairCause::kReconcile ? "reconcile" : "relist") +
      " done: " + std::to_string(r.listed) + " keys listed through revision " +
      std::to_string(r.listing_revision) + ", " + std::to_string(r.deleted) +
      " deleted, no values fetched");
  // The fold now holds the new stream's keys at cursor 0: re-anchored
  // before anything else can fail.
  if (plan.rebase) {
    KVFOLD_RETURN_IF_ERROR(ReanchorToFold(/*new_stream=*/true));
    if (opt_.until_caught_up) target_ = plan.state.last_seq;  // the new stream's
  } else if (r.anchor_ns > 0) {
    // Every expiry before the listing is in the fold: positions up to the
    // listing's head read on within the window of its start.
    // The pipeline's next commit carries it too (what else is pending, a
    // marker TTL the repair's read noted, stays).
    guard_.ReanchorAfterListing(r.anchor_ns);
    if (const auto committed = pipeline_.committed()) {
      pipeline_.pending().AdvanceTo(*committed, r.anchor_ns);
    }
  }
  FoldCommit outcome;
  outcome.last_repair =
      RepairRecord(plan, std::to_string(r.listed) + " listed, " + std::to_string(r.deleted) +
                             " deleted through revision " + std::to_string(r.listing_revision));
  KVFOLD_RETURN_IF_ERROR(fold_.Commit(outcome));
  // Every delete at or below the listing's revision is in the fold now;
  // on a bucket that never evicts current values nothing below it can
  // still be missing (the frontier honours this only while that holds).
  guard_.RaiseRelistFloor(r.listing_revision);
  // An unanchored fold continues with a state sync, decided afresh by
  // CheckStart (which refuses one where the listing is not the truth).
  unanchored_ = false;
  AdvanceCursor();
  return Status::OK();
}

Status WatchLoop::Restore(const RepairPlan& plan) {
  repair::RestoreRequest req;
  req.scope = opt_.scope;
  req.rebase = plan.rebase;
  req.marker_ttl_ns = marker_ttl_.effective_ns();
  if (plan.cause != core::RepairCause::kUnanchored &&
      plan.cause != core::RepairCause::kFreshStart) {
    req.fold_cursor = pipeline_.committed();
  }
  repair::RestoreResult r;
  repair::RepairContext ctx = RepairCtx(plan);
  Status s = repair::RunRestore(ctx, req, &r);
  if (!s.ok()) {
    if (s.IsCursorExpired()) return Status::CursorExpired(plan.why + ". " + s.message());
    return s;
  }
  if (r.stopped) {
    repair_stopped_ = true;
    return Status::OK();
  }
  Log("restore done from artifact " + r.artifact_id + ": cursor " +
      (pipeline_.committed() ? std::to_string(*pipeline_.committed()) : std::string("<none>")) +
      " -> " + std::to_string(r.cursor) + ", " + std::to_string(r.taken) + " entries taken, " +
      std::to_string(r.deleted) + " deleted, " + std::to_string(r.listed) + " keys listed, after " +
      std::to_string(r.attempts) + " attempt(s)");
  // Re-anchored before anything else can fail: a loop left at the old
  // cursor would carry it into its next commit, past what the fold holds.
  KVFOLD_RETURN_IF_ERROR(ReanchorToFold(plan.rebase));
  if (plan.rebase && opt_.until_caught_up) {
    // The old stream's target means nothing now; if this read fails the
    // next session takes the new stream's.
    target_.reset();
    auto now = source_.ReadStream();
    if (!now.ok()) return now.status();
    target_ = now->last_seq;  // the new stream's
  }
  return Status::OK();
}

Status WatchLoop::Resync(const RepairPlan& plan) {
  Log(LogLevel::kWarning,
      "repair none: re-listing current values without deleting anything; keys "
      "deleted or aged out while this fold was behind may persist in it");
  FoldCommit note;
  note.last_repair = RepairRecord(plan, "re-listed current values, deleted nothing");
  KVFOLD_RETURN_IF_ERROR(fold_.Commit(note));
  sync_next_ = true;
  unanchored_ = false;
  return Status::OK();
}

Status WatchLoop::ReanchorToFold(bool new_stream) {
  auto meta = fold_.ReadMeta();
  if (!meta.ok()) return meta.status();
  if (!meta->cursor) return Status::Internal("a repair left the fold without a cursor");
  guard_.ResetTo(meta->cursor, meta->cursor_time_ns, new_stream);
  stream_created_ = meta->stream_created;
  if (!KVFOLD_MUTANT("reanchor-keep-memo")) {  // a rebuilt fold's memo is the new stream's
    eviction_observed_ = meta->eviction_observed;
    eviction_cause_ = meta->eviction_cause;
  }
  marker_ttl_ = core::MarkerTtl(meta->marker_ttl_ns);
  pipeline_.ResetTo(meta->cursor, meta->cursor_time_ns);
  unanchored_ = false;
  sync_next_ = false;
  if (new_stream) head_hint_ = 0;
  if (opt_.metrics) opt_.metrics->RecordCursor(*meta->cursor);
  if (opt_.on_applied) opt_.on_applied(*meta->cursor);
  return Status::OK();
}

void WatchLoop::RecordRepairOutcome(const Status& s) {
  if (!opt_.metrics || !repair_kind_) return;
  RepairOutcome outcome = RepairOutcome::kDone;
  if (s.IsCursorExpired()) {
    outcome = RepairOutcome::kRefused;
  } else if (s.IsUnavailable()) {
    outcome = RepairOutcome::kInterrupted;
  } else if (!s.ok()) {
    outcome = RepairOutcome::kFailed;
  } else if (repair_cause_) {
    outcome = RepairOutcome::kAbandoned;  // decided afresh
  } else if (repair_stopped_) {
    outcome = RepairOutcome::kInterrupted;  // a later run finishes it
  }
  opt_.metrics->RecordRepair(*repair_kind_, outcome);
  repair_kind_.reset();
}

}  // namespace kvfold
