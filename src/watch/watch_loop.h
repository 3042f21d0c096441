// The watch loop behind Watch(): it sequences the decisions of src/core
// (window check, floor guard rules, what a message does to a key, batch and
// cursor rules, which repair runs) and the repairs of src/repair against a
// BucketSource, a Fold and a Clock. Its state lives in three rooms:
//  - FloorGuard (watch/floor_guard.h): received, verified, the cursor, and
//    their marker-window anchors;
//  - CommitPipeline (watch/commit_pipeline.h): pending and in-flight
//    batches, the fold's cursor, retry and backoff;
//  - the loop itself: sessions, the retention it last read, repair
//    orchestration, which re-anchors both rooms through ReanchorToFold.
//
// Its jobs live in four files: watch_loop.cc (prepare, the run loop,
// retention), watch_session.cc (sessions, delivery and the one way a
// message enters the fold), watch_floor.cc (floor checks, probes, the
// lagging view) and watch_repair.cc (the drain, repair plans and drivers,
// ReanchorToFold).
//
// Not thread-safe: Watch() runs one on the calling thread.

#ifndef KVFOLD_WATCH_WATCH_LOOP_H_
#define KVFOLD_WATCH_WATCH_LOOP_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "core/marker_window.h"
#include "core/repair_rules.h"
#include "kvfold/bucket.h"
#include "kvfold/clock.h"
#include "kvfold/fold.h"
#include "kvfold/watch_metrics.h"
#include "kvfold/watcher.h"
#include "repair/repair_context.h"
#include "watch/commit_pipeline.h"
#include "watch/deadline_queue.h"
#include "watch/floor_guard.h"
#include "watch/server_clock.h"

namespace kvfold {

class WatchLoop {
 public:
  WatchLoop(BucketSource& source, Fold& fold, const WatchOptions& options)
      : source_(source),
        fold_(fold),
        opt_(options),
        clock_(options.clock != nullptr ? *options.clock : *RealClock()),
        pipeline_(fold, clock_, PipelineOptions()) {}

  Status Run();

 private:
  enum class SessionEnd { kDone, kBroken, kRepair };

  CommitPipelineOptions PipelineOptions() {
    CommitPipelineOptions o;
    o.background = opt_.commit_in_background;
    o.batch_size = opt_.batch_size;
    o.batch_bytes = opt_.batch_bytes;
    o.sync_run_bytes = opt_.sync_run_bytes;
    o.max_commit_failures = opt_.max_commit_failures;
    o.metrics = opt_.metrics;
    o.log = [this](LogLevel level, const std::string& line) { Log(level, line); };
    o.committed = [this](uint64_t cursor) {
      if (opt_.metrics) {
        opt_.metrics->RecordCursor(cursor);
        if (head_hint_ > last_state_.last_seq)
          opt_.metrics->RecordStreamLast(head_hint_, /*read=*/false);
      }
      if (opt_.on_applied) opt_.on_applied(cursor);
    };
    return o;
  }

  Status Prepare();
  // One delivery from open to reset, stop, catch-up or a needed repair.
  // Returns a fatal status, or OK with *end saying how it ended.
  Status Session(SessionEnd* end);
  // The session from opening its delivery on `state`, the stream state
  // its start checks passed on.
  Status Deliver(const StreamState& state, SessionEnd* end);
  // When the idle probe is due: after `probe_every` without a message.
  struct Pace {
    Clock::TimePoint last_activity;
    std::chrono::milliseconds probe_every;
  };
  // The session's event loop. Each handler returns a fatal status, or OK
  // with *keep false when the session ends (the next one starts after
  // what was received).
  Status Pump(Delivery& delivery, uint64_t sequential_from, SessionEnd* end);
  Status DrainBeforeRepair(Delivery& delivery, uint64_t sequential_from);
  // How long the next read may wait, as of `now`; `in_flight`: a batch
  // was in flight then.
  std::chrono::milliseconds NextTimeout(Clock::TimePoint now, bool in_flight, const Pace& pace);
  // The one way a delivered message enters the fold, live or drained
  // before a repair: the roll-up skip check, then Apply. *keep false: the
  // delivery skipped something, and the next session starts after received.
  // Take, OnMessage and Apply may move the message's key and value into the
  // pending batch; its sequence, time and pending count stay.
  Status Take(BucketMessage* message, uint64_t sequential_from, bool* keep);
  Status OnMessage(BucketMessage* message, uint64_t sequential_from, bool floor_due, bool* keep);
  Status OnIdle(bool floor_due, Pace* pace, bool* keep);
  // Takes note of the delivery's heartbeats that came since the last look.
  void NoteHeartbeats(const Delivery& delivery, Clock::TimePoint now);
  // Nothing was written since the last stream read, as a whole-bucket
  // delivery and the server's heartbeat show: the idle read and probe can
  // wait (at most WatchOptions::quiet_read_every; less on a bucket with
  // limit markers).
  bool QuietProven(Clock::TimePoint now) const;
  // The window check at a session's start. Sets repair_cause_ when a repair
  // must run first.
  void CheckStart(const StreamState& state);
  Status Apply(BucketMessage* message);
  // Folds the expiry of each key whose deadline (Entry::expires_ns) the
  // fold's expiry clock has passed, where no limit marker may say so
  // (deadlines_apply_): a delete, or with history > 1 the key's previous
  // message, each through the apply hook and the pending batch.
  // When the stream's store could not be asked, the items stay queued and
  // *keep is false: the session ends.
  Status ExpireDue(bool* keep);
  // Drops the deadlines and the expiry clock: read again before the next
  // expiry (after the fold was reopened or rewritten).
  void ForgetDeadlines();
  // The key's entry, pending or in flight or folded; nullopt when none.
  Status CurrentEntry(const std::string& key, std::optional<Entry>* current);
  StatusOr<bool> SkippedBeforeRollup(const BucketMessage& message, uint64_t sequential_from);
  // Reads fresh stream state and checks the floor: on success everything
  // received before the read is verified; otherwise repair_cause_ is set.
  StatusOr<StreamState> CheckFloor();
  // Proves quiet stretches empty so the cursor can pass them.
  Status Probe();
  // A repair's inputs, decided once at its start.
  struct RepairPlan {
    core::RepairCause cause;
    std::string why;
    StreamState state;  // read after the flush
    core::RepairChoice choice;
    bool rebase = false;  // the stream was recreated, or reset below the fold
    // The eviction memo the repair runs under: the fold's, but for a
    // rebase onto a stream of another identity.
    bool memo = false;
  };
  Status Repair();
  Status Relist(const RepairPlan& plan);
  Status Restore(const RepairPlan& plan);
  Status Resync(const RepairPlan& plan);
  static std::optional<RepairKind> RepairKindOf(const RepairPlan& plan);
  // The fold's last_repair line for `outcome`.
  std::string RepairRecord(const RepairPlan& plan, const std::string& outcome) const;
  // The narrow contract a repair runs under, with the plan's memo.
  repair::RepairContext RepairCtx(const RepairPlan& plan) const;
  void RecordRepairOutcome(const Status& s);
  void NoteRetention(const StreamState& state);
  void NeedRepair(core::RepairCause cause, std::string why) {
    repair_cause_ = cause;
    repair_why_ = std::move(why);
  }
  // The cursor a commit would carry now, and that position's anchor.
  void AdvanceCursor() {
    const auto cursor = guard_.Cursor();
    if (cursor) pipeline_.pending().AdvanceTo(*cursor, guard_.CursorAnchor());
  }
  // Fresh stream state; the server clock is measured on it. Unavailable
  // while the server's view lags what this watch received (LaggingView).
  StatusOr<StreamState> ReadState() {
    const auto before = clock_.Now();
    const int64_t before_system = ServerClock::SystemNs();
    auto state = source_.ReadStream();
    if (NoteSourceMove(state.ok())) moved_since_open_ = true;
    if (!state.ok()) return state;
    server_clock_.Measure(before, before_system, state->server_time_ns);
    KVFOLD_RETURN_IF_ERROR(LaggingView(*state));
    return state;
  }
  // A cluster's replica that has not caught up (after a partition, say)
  // can answer for the stream with a head before what this watch already
  // received from the same stream. That is no reset: Unavailable, so the
  // caller retries after its backoff, until the view catches up. Only a
  // view behind for kLaggingViewPatience goes on to the window check,
  // which takes it for a reset.
  Status LaggingView(const StreamState& state);
  // The server's clock now, as the last ReadState measured it; 0 unknown.
  int64_t ServerNow() { return server_clock_.Now(clock_.Now()); }
  // Every position back at the fold's cursor and anchor after a repair
  // rewrote the fold (a restore, or a relist of a recreated stream, a
  // `new_stream`). Called first, before anything else that may fail.
  Status ReanchorToFold(bool new_stream);
  // The marker window check of a stretch after received read at server
  // time `now_ns`: on failure a floor trip, and the anchor stays lost until
  // a repair re-anchors the fold.
  bool MarkerStretchHolds(int64_t now_ns, const std::string& stretch);
  // Commits through the pipeline, the frontier proven first (one stream
  // read per commit at most) so the cursor covers the batch: a fold's
  // entries stay at or below its cursor (what an export of it requires)
  // except after a trip or mid-repair. Non-OK only when the failure limit
  // is reached or the check fails for good.
  Status TryCommit(bool force) {
    return pipeline_.TryCommit(force, [this] { return ProveFrontier(); });
  }
  Status Flush() {
    return pipeline_.Flush([this] { return ProveFrontier(); });
  }
  Status ProveFrontier();
  bool PendingWork() const { return pipeline_.HasWork(); }
  bool CaughtUp() const;
  // Whether the delivery about to run (its stream `state`, read from
  // `sequential_from`) goes uncounted, and when the fold is due a recount.
  void PlanCounting(const StreamState& state, uint64_t sequential_from);
  // Recounts a fold whose counts are stale once the committed cursor
  // reaches recount_at_ (or, with `caught_up`, at once), after the batches
  // handed over land. A failed recount is fatal, as a failed commit is
  // after its retries.
  Status RecountWhenDue(bool caught_up = false);
  // The end of Run: everything received committed, then a due recount
  // when caught up.
  Status Finish() {
    KVFOLD_RETURN_IF_ERROR(Flush());
    return CaughtUp() ? RecountWhenDue(/*caught_up=*/true) : Status::OK();
  }
  void Log(LogLevel level, const std::string& line) const {
    if (opt_.log) opt_.log(LogLine{level, line});
  }
  void Log(const std::string& line) const { Log(LogLevel::kInfo, line); }
  // A move of the source to another server: logged; true when there was
  // one. The backoff starts over once the new server answered (`served`);
  // a move in a cluster-wide outage keeps it growing.
  bool NoteSourceMove(bool served) {
    std::string notice = source_.TakeMoveNotice();
    if (notice.empty()) return false;
    Log(LogLevel::kWarning, notice);
    if (served) source_moved_ = true;
    return true;
  }

  BucketSource& source_;
  Fold& fold_;
  const WatchOptions& opt_;
  Clock& clock_;

  FloorGuard guard_;
  int relists_abandoned_ = 0;       // in a row: bounds a relist that cannot finish
  std::string stream_created_;      // "" until recorded
  bool eviction_observed_ = false;  // the fold's memo
  std::string eviction_cause_;      // and what it saw (FoldMeta::eviction_cause)
  bool unanchored_ = false;         // data but no cursor: repair first
  bool sync_next_ = false;          // repair none: the next delivery is a state sync
  std::optional<uint64_t> target_;  // until_caught_up: stream last_seq at start
  std::optional<core::RepairCause> repair_cause_;
  std::string repair_why_;
  // What the running repair does, for the metrics (unset: nothing to count).
  std::optional<RepairKind> repair_kind_;
  bool repair_stopped_ = false;  // a stop request ended it between commits
  int deliveries_opened_ = 0;
  Clock::TimePoint oldest_pending_;
  Clock::TimePoint last_floor_check_;
  std::optional<Clock::TimePoint> lagging_since_;  // the server's view behind received
  Clock::TimePoint next_reconcile_;
  // The last stream state (with the measured marker TTL): it paces the
  // idle probe so a quiet prefix is proven before retention reaches it.
  StreamState last_state_;
  bool probe_soon_ = false;
  // The last message said more is waiting in the delivery (a hint).
  bool delivery_has_more_ = false;
  // The running delivery's heartbeats as last seen.
  Delivery::Heartbeats heartbeats_;
  // The stream's head as delivered messages suggest (a hint, for metrics).
  uint64_t head_hint_ = 0;
  // The fold's max_revision as of the last Prepare or repair: the watcher's
  // own commits stay below what it receives next.
  uint64_t fold_max_revision_ = UINT64_MAX;
  // The fold held no entry at Prepare and nothing has been folded or
  // repaired into it since: the first state sync may prove keys new.
  bool fold_empty_ = false;
  // The fold's entries as of the last delivery's start (FoldMeta::entries,
  // a lower bound while the counts are stale): a catch-up is sized by it.
  uint64_t fold_entries_ = 0;
  // The fold's counts are stale, or will be once the batches handed over
  // land (FoldCommit::uncounted): a Fold::Recount is due.
  bool counts_stale_ = false;
  // The recount is due once the committed cursor reaches this: the head of
  // the stream when the running delivery's catch-up began (0: none).
  uint64_t recount_at_ = 0;
  // In scope, a message at or below this sequence is a key's only message
  // the running delivery brings, on a fold that never held the key (0:
  // none is). Set for the first state sync into an empty fold to the
  // stream's last sequence as read before its consumer was created: a
  // last-per-subject delivery (or, with history 1, a sequential one) holds
  // at most one message per key up to there.
  uint64_t new_keys_through_ = 0;
  ServerClock server_clock_;
  bool warned_ttl_without_markers_ = false;
  // The bucket allows per-message TTL and writes no limit markers, or
  // keeps history (markers only announce a key's last message): an expiry
  // may leave no trace, so the fold looks at a key at its deadline.
  bool deadlines_apply_ = false;
  // The bucket writes limit markers now (its own setting, not the TTL the
  // window is measured with, which may lag a change).
  bool markers_written_ = false;
  // Markers were first seen on at this server time (0: on since before the
  // fold's cursor, or off): an expiry before it left no marker.
  int64_t markers_since_ns_ = 0;
  // The fold's deadlines are in deadlines_ (read from the fold and the
  // uncommitted batches once per start, per repair and whenever they come
  // to apply); keys folded since are added as they come.
  bool deadlines_loaded_ = false;
  DeadlineQueue deadlines_;
  // The server time as of which the fold (with what is pending) is the
  // stream, for deadlines: the stored time of the newest message received
  // since the deadlines were loaded. Not received's anchor: a relist moves
  // that to its listing without bringing the rewrites after received.
  int64_t expiry_clock_ns_ = 0;
  bool source_moved_ = false;  // since the backoff last turned
  // A ReadState came from a new server since Deliver opened the delivery
  // (which stays on the server left behind).
  bool moved_since_open_ = false;
  // The marker TTL windows are measured with (a raise counts late).
  core::MarkerTtl marker_ttl_;
  // Last: its callbacks read the fields above.
  CommitPipeline pipeline_;
};

}  // namespace kvfold

#endif  // KVFOLD_WATCH_WATCH_LOOP_H_
