#include "watch/watch_loop.h"

#include <algorithm>
#include <ctime>
#include <utility>

#include "core/backoff.h"
#include "core/change_report.h"
#include "core/mutation.h"
#include "core/window.h"
#include "kvfold/retention.h"
#include "repair/repair_drivers.h"

namespace kvfold {

using std::chrono::milliseconds;

namespace {

// How long the server's view of the stream may lag what a watch received
// before it counts as a reset (LaggingView): longer than a cluster's
// replica takes to catch up after a partition heals.
constexpr std::chrono::seconds kLaggingViewPatience{120};

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Status WatchLoop::Prepare() {
  if (opt_.batch_size == 0 || opt_.max_commit_failures <= 0) {
    return Status::InvalidArgument("WatchOptions: batch_size and max_commit_failures must be > 0");
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
  new_keys_through_ = 0;
  pipeline_.ResetTo(meta->cursor, meta->cursor_time_ns);
  if (opt_.metrics && meta->cursor) opt_.metrics->RecordCursor(*meta->cursor);
  guard_.ResetTo(meta->cursor, meta->cursor_time_ns, /*new_stream=*/false);
  marker_ttl_ = core::MarkerTtl(meta->marker_ttl_ns);
  stream_created_ = meta->stream_created;
  eviction_observed_ = meta->eviction_observed;
  if (meta->bucket.empty()) pipeline_.pending().meta().bucket = bucket;
  if (!meta->scope) pipeline_.pending().meta().scope = opt_.scope.prefixes();
  next_reconcile_ = clock_.Now() + opt_.reconcile_every;
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
    if (end == SessionEnd::kDone) return Flush();
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
      new_keys_through_ = 0;
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
  if (state.allow_msg_ttl && state.marker_ttl_ns <= 0 && !warned_ttl_without_markers_) {
    warned_ttl_without_markers_ = true;
    Log(LogLevel::kWarning,
        "bucket " + source_.bucket() +
            " allows per-message TTL but writes no limit markers (subject_delete_marker_ttl "
            "unset): a key whose TTL expires vanishes from the stream without a trace, so this "
            "fold keeps its last value, and a write that expired while this fold was behind is "
            "never seen; enable limit markers on the bucket (LimitMarkerTTL) for kvfold to fold "
            "expiries");
  }
  if (eviction_observed_) return;
  const Retention seen = ClassifyRetention(state, /*eviction_observed=*/true);
  if (seen.has_evicted) {
    eviction_observed_ = true;
    pipeline_.pending().meta().eviction_observed = true;
    Log("bucket " + source_.bucket() + " has evicted current values (" +
        DescribeRetention(state, seen) +
        "); recorded in the fold: its key listing is never taken for the truth again");
  }
}

void WatchLoop::CheckStart(const StreamState& state) {
  std::string why;
  const auto& received = guard_.received();
  const std::optional<uint64_t> frontier =
      received && !sync_next_ ? std::optional<uint64_t>(guard_.Frontier(state)) : std::nullopt;
  if (!KVFOLD_MUTANT("window-skip-check")) {
    switch (core::CheckWindow(source_.bucket(), state, frontier, stream_created_, &why)) {
      case core::WindowFault::kRecreated:
        return NeedRepair(core::RepairCause::kRecreated, why);
      case core::WindowFault::kExpired:
        return NeedRepair(core::RepairCause::kExpired, why);
      case core::WindowFault::kNone:
        break;
    }
    // The marker window, by the server's own clock in this very reply. A
    // stream that stored nothing after the position is current by itself.
    if (frontier && state.last_seq <= *received && !guard_.anchor_lost()) {
      guard_.ReanchorReceived(state.server_time_ns);
    }
    const StreamState measured = marker_ttl_.Apply(state);
    const auto window = core::MarkerWindowNs(measured);
    if (frontier && window && !KVFOLD_MUTANT("window-ignore-marker-window") &&
        !guard_.ReceivedInsideWindow(state.server_time_ns, *window)) {
      return NeedRepair(core::RepairCause::kExpired,
                        guard_.anchor_lost()
                            ? "a stretch after sequence " + std::to_string(guard_.verified()) +
                                  " was read outside the marker window"
                            : core::DescribeMarkerWindowMiss(
                                  "cursor " + std::to_string(*received), source_.bucket(),
                                  guard_.received_anchor(), state.server_time_ns, measured));
    }
  }
  if (received || sync_next_) return;
  if (unanchored_) {
    return NeedRepair(core::RepairCause::kUnanchored,
                      "the fold holds data but no cursor, so it cannot tell what it has missed");
  }
  const Retention r = ClassifyRetention(state, eviction_observed_);
  if (!r.listing_is_truth) {
    NeedRepair(core::RepairCause::kFreshStart,
               "a new fold on a bucket that has already evicted current values: a state sync "
               "would miss keys that aged out");
  }
}

Status WatchLoop::Session(SessionEnd* end) {
  *end = SessionEnd::kBroken;
  auto state = ReadState();
  if (!state.ok()) {
    if (state.status().IsUnavailable()) {
      Log(LogLevel::kWarning, "reading stream state: " + state.status().message());
      return Status::OK();
    }
    return state.status();
  }
  if (opt_.until_caught_up && !target_) target_ = state->last_seq;
  NoteRetention(*state);
  CheckStart(*state);
  if (repair_cause_) {
    *end = SessionEnd::kRepair;
    return Status::OK();
  }
  // The frontier is proven at the start of every session: everything
  // received before this read was scanned by an earlier delivery.
  if (!sync_next_) guard_.VerifyReceived();
  if (stream_created_.empty()) {
    stream_created_ = state->created;
    pipeline_.pending().meta().stream_created = stream_created_;
  }
  AdvanceCursor();
  if (CaughtUp() || opt_.stop.stop_requested()) {
    *end = SessionEnd::kDone;
    return Status::OK();
  }

  return Deliver(*state, end);
}

Status WatchLoop::Deliver(const StreamState& state, SessionEnd* end) {
  // No repair is due: one that was interrupted has been overtaken.
  if (opt_.metrics) opt_.metrics->RecordRepairRunning(false);
  const bool sync = !guard_.received() || sync_next_;
  DeliveryStart start;
  if (!sync) {
    start.from_seq = *guard_.received() + 1;
  } else if (state.history == 1) {
    // Where each key keeps one message, everything retained *is* each key's
    // last message: a sequential read from the first, which the server
    // streams far faster than a last-per-subject walk. Folding it gives the
    // same fold even if history were raised meanwhile, only more messages.
    start.from_seq = std::max<uint64_t>(state.first_seq, 1);
  }
  moved_since_open_ = false;
  auto opened = source_.Open(start, opt_.scope);
  const bool moved = NoteSourceMove(opened.ok());
  if (!opened.ok()) {
    if (opened.status().IsUnavailable()) {
      Log(LogLevel::kWarning, "opening a delivery: " + opened.status().message());
      return Status::OK();
    }
    return opened.status();
  }
  // Its start came from the old server's state: a session on the new one
  // reads the stream there first.
  if (moved) return Status::OK();
  std::unique_ptr<Delivery> delivery = std::move(opened).value();
  if (opt_.metrics && deliveries_opened_ > 0) opt_.metrics->RecordReconnect();
  ++deliveries_opened_;
  // Again after the consumer exists: retention may have moved the head
  // between the first check and the consumer's creation, and the server
  // would clamp the start without a word.
  auto after = ReadState();
  if (!after.ok()) {
    if (after.status().IsUnavailable()) return Status::OK();
    return after.status();
  }
  // The delivery is on the old server, the state from the new: start over.
  if (moved_since_open_ && !KVFOLD_MUTANT("watch-keep-delivery-after-start-move")) {
    return Status::OK();
  }
  NoteRetention(*after);
  CheckStart(*after);
  if (repair_cause_) {
    *end = SessionEnd::kRepair;
    return Status::OK();
  }
  if (sync) {
    // A state sync delivers every key's last message as of the consumer's
    // creation: what retention removed before is superseded, or (only with
    // repair none, which warned) accepted as gone.
    guard_.StartStateSync(after->first_seq, after->server_time_ns,
                          /*forget_received=*/sync_next_);
    sync_next_ = false;
  }
  last_floor_check_ = clock_.Now();
  // Where the delivery reads the stream in sequence order: from its start,
  // or, after a last-per-subject state sync, from past the stream's end as
  // it stood once the consumer existed.
  const uint64_t sequential_from = start.from_seq ? *start.from_seq : after->last_seq + 1;
  // Only this delivery may rely on it: another one (after a reset) starts
  // from a sequence and brings every message after it.
  new_keys_through_ = sync && std::exchange(fold_empty_, false) ? state.last_seq : 0;
  if (new_keys_through_ != 0 && KVFOLD_MUTANT("watch-new-keys-past-sync")) {
    new_keys_through_ = UINT64_MAX;
  }
  return Pump(*delivery, sequential_from, end);
}

Status WatchLoop::Pump(Delivery& delivery, uint64_t sequential_from, SessionEnd* end) {
  probe_soon_ = true;
  Pace pace{clock_.Now(), opt_.idle_probe};
  while (true) {
    if (opt_.stop.stop_requested() || CaughtUp()) {
      *end = SessionEnd::kDone;
      return Status::OK();
    }
    if (opt_.reconcile_every.count() > 0 && clock_.Now() >= next_reconcile_) {
      next_reconcile_ = clock_.Now() + opt_.reconcile_every;
      NeedRepair(core::RepairCause::kReconcile,
                 "scheduled every " + std::to_string(opt_.reconcile_every.count()) + " ms");
    }
    if (repair_cause_) {
      KVFOLD_RETURN_IF_ERROR(DrainBeforeRepair(delivery, sequential_from));
      *end = SessionEnd::kRepair;
      return Status::OK();
    }
    const auto now = clock_.Now();
    const bool in_flight = pipeline_.in_flight();
    if (in_flight) KVFOLD_RETURN_IF_ERROR(pipeline_.CollectIfFinished());
    auto ev = delivery.Next(NextTimeout(now, in_flight, pace));
    if (!ev.ok()) return ev.status();
    const auto arrived = clock_.Now();  // one reading per event
    const bool floor_due = guard_.unverified() && arrived - last_floor_check_ >= opt_.floor_check;
    bool keep = true;  // false: the session ends (a reset, a failed read)
    switch (ev->kind) {
      case DeliveryEvent::Kind::kMessage:
        pace.last_activity = arrived;
        KVFOLD_RETURN_IF_ERROR(OnMessage(ev->message, sequential_from, floor_due, &keep));
        break;
      case DeliveryEvent::Kind::kTimeout:
        KVFOLD_RETURN_IF_ERROR(OnIdle(floor_due, &pace, &keep));
        break;
      case DeliveryEvent::Kind::kReset:
        if (opt_.metrics) opt_.metrics->RecordReset(ev->cause);
        Log("delivery reset: " + ev->reason);
        keep = false;
        break;
    }
    if (!keep) return Status::OK();
    // A floor check or probe moved the source: this delivery is on the
    // server left behind, which may no longer move. A new one, there.
    if (moved_since_open_ && !KVFOLD_MUTANT("watch-keep-delivery-after-move")) {
      return Status::OK();
    }
    if (PendingWork() && arrived - oldest_pending_ >= opt_.linger) {
      KVFOLD_RETURN_IF_ERROR(TryCommit(/*force=*/false));
    }
  }
}

// Folds what already arrived before a repair: it is received, and a restore
// would otherwise have to cover it too. Each message passes the same gates
// as a live one (Take): the next session's start trusts everything received
// as checked. Bounded: a busy stream must not postpone the repair forever.
Status WatchLoop::DrainBeforeRepair(Delivery& delivery, uint64_t sequential_from) {
  for (size_t drained = 0; drained < std::max<size_t>(opt_.batch_size, 10000); ++drained) {
    auto ev = delivery.Next(milliseconds(1));
    if (!ev.ok() || ev->kind != DeliveryEvent::Kind::kMessage) break;
    if (KVFOLD_MUTANT("drain-apply-unchecked")) {
      KVFOLD_RETURN_IF_ERROR(Apply(ev->message));
      continue;
    }
    bool keep = true;
    KVFOLD_RETURN_IF_ERROR(Take(ev->message, sequential_from, &keep));
    if (!keep) break;  // the rest comes again after received
  }
  return Status::OK();
}

milliseconds WatchLoop::NextTimeout(Clock::TimePoint now, bool in_flight, const Pace& pace) {
  milliseconds timeout(200);                 // bounds how long a stop request waits
  if (in_flight) timeout = milliseconds(1);  // collect it promptly
  if (PendingWork()) {
    const auto due = std::chrono::duration_cast<milliseconds>(oldest_pending_ + opt_.linger - now);
    timeout = std::clamp(due, milliseconds(1), timeout);
  }
  if (probe_soon_) timeout = std::min(timeout, milliseconds(10));
  const auto probe_in =
      std::chrono::duration_cast<milliseconds>(pace.last_activity + pace.probe_every - now);
  return std::min(timeout, std::max(probe_in, milliseconds(1)));
}

Status WatchLoop::Take(const BucketMessage& m, uint64_t sequential_from, bool* keep) {
  auto skipped = SkippedBeforeRollup(m, sequential_from);
  if (!skipped.ok()) {
    if (!skipped.status().IsUnavailable() && !skipped.status().IsNotFound()) {
      return skipped.status();
    }
    Log(LogLevel::kWarning, "checking a purge after a jump failed: " + skipped.status().message());
    *keep = false;
    return Status::OK();
  }
  if (*skipped) {
    *keep = false;  // the next session starts after received
    return Status::OK();
  }
  return Apply(m);
}

Status WatchLoop::OnMessage(const BucketMessage& m, uint64_t sequential_from, bool floor_due,
                            bool* keep) {
  KVFOLD_RETURN_IF_ERROR(Take(m, sequential_from, keep));
  if (!*keep) return Status::OK();
  // A hint only: it makes the probe come sooner, it proves nothing.
  if (m.pending == 0) probe_soon_ = true;
  if (floor_due) {
    auto c = CheckFloor();
    if (!c.ok()) {
      if (!c.status().IsUnavailable()) return c.status();
      Log(LogLevel::kWarning, "floor check failed: " + c.status().message());
      *keep = false;
      return Status::OK();
    }
  }
  if (pipeline_.pending().changes() >= opt_.batch_size) return TryCommit(/*force=*/false);
  return Status::OK();
}

Status WatchLoop::OnIdle(bool floor_due, Pace* pace, bool* keep) {
  if (!probe_soon_ && !floor_due && clock_.Now() - pace->last_activity < pace->probe_every) {
    return Status::OK();
  }
  probe_soon_ = false;
  pace->last_activity = clock_.Now();
  Status p = Probe();
  if (p.IsUnavailable() || p.IsNotFound()) {
    Log(LogLevel::kWarning, "progress probe failed: " + p.message());
    *keep = false;
    return Status::OK();
  }
  KVFOLD_RETURN_IF_ERROR(p);
  pace->probe_every =
      core::NextFloorProbe(last_state_, guard_.verified(), guard_.write_rate(), opt_.idle_probe);
  // Within a quarter of the marker window the probe re-anchors an idle
  // watch, so the next message after a quiet spell passes.
  if (const auto window = core::MarkerWindowNs(last_state_)) {
    pace->probe_every = std::min(core::QuarterWindow(*window), pace->probe_every);
  }
  return Status::OK();
}

// nats-server before 2.9.12 moves every consumer that is behind forward to
// a roll-up message (a KV purge) when it is stored, skipping what lies
// between without a gap in consumer sequences. So a purge that arrives
// after a jump in stream sequences is checked against the stream's store:
// if it still retains something in scope in between, the delivery skipped
// it, and a new delivery starts right after what arrived. Only where the
// delivery reads in sequence order (from `sequential_from` on): a state
// sync's jumps over older messages are its design.
StatusOr<bool> WatchLoop::SkippedBeforeRollup(const BucketMessage& m, uint64_t sequential_from) {
  if (m.op != Op::kPurge || KVFOLD_MUTANT("delivery-ignore-rollup-skip")) return false;
  const auto& received = guard_.received();
  const uint64_t from = std::max(received ? *received + 1 : 0, sequential_from);
  if (m.seq <= from) return false;
  auto next = source_.FirstRetainedInScope(opt_.scope, from);
  if (!next.ok()) return next.status();
  if (!*next || **next >= m.seq) return false;
  if (opt_.metrics) opt_.metrics->RecordReset(ResetCause::kRollupSkip);
  Log("delivery reset: the server skipped from sequence " + std::to_string(from) +
      " to the purge at " + std::to_string(m.seq) + " past retained sequence " +
      std::to_string(**next) + " (a roll-up moved the consumer forward)");
  return true;
}

Status WatchLoop::Apply(const BucketMessage& m) {
  // A re-created delivery may repeat what already arrived.
  if (guard_.AlreadyReceived(m.seq)) return Status::OK();
  const bool was_idle = !PendingWork();
  if (opt_.scope.Contains(m.key)) {
    std::optional<Entry> current;
    // A key proven new has nothing to read. Above the fold's max_revision
    // (and so above anything pending) nothing stored can be newer: without
    // a hook to tell the previous revision, the message folds without a read.
    const bool known_new = m.seq <= new_keys_through_;
    const bool must_read =
        !known_new &&
        (opt_.apply || (m.seq <= fold_max_revision_ && !KVFOLD_MUTANT("apply-skip-read")));
    if (!must_read) {
    } else if (const Entry* p = pipeline_.Find(m.key)) {
      current = *p;  // pending or in flight: the fold may not show it yet
    } else {
      Entry stored;
      Status s = fold_.Get(m.key, &stored);
      if (s.ok()) {
        current = std::move(stored);
      } else if (!s.IsNotFound()) {
        return s.WithContext("reading key " + m.key + " from the fold");
      }
    }
    std::optional<Entry> next = core::FoldMessage(m, current);
    if (next) {
      // The cursor must not cover a change the hook refused: stop before
      // advancing past it.
      KVFOLD_RETURN_IF_ERROR(core::ReportChange(&opt_.apply, opt_.metrics, ChangeOrigin::kLive,
                                                m.key, m.op, *next, current));
      pipeline_.pending().Put(m.key, std::move(*next), known_new);
    }
  }
  // Consecutive sequences leave no stretch to prove; a jump does, and the
  // frontier waits for the next floor check. On a bucket with limit
  // markers the jumped stretch was read now: within the window or a trip.
  if (guard_.Jumps(m.seq) && core::MarkerWindowNs(last_state_)) {
    MarkerStretchHolds(ServerNow(), "the stretch from sequence " +
                                        std::to_string(*guard_.received() + 1) + " to " +
                                        std::to_string(m.seq));
  }
  guard_.Receive(m.seq, m.time_ns);
  head_hint_ = std::max(head_hint_, m.seq + m.pending);
  AdvanceCursor();
  if (was_idle) oldest_pending_ = clock_.Now();  // linger counts from the first pending change
  return Status::OK();
}

Status WatchLoop::LaggingView(const StreamState& state) {
  // The position the window check compares the head with: what was
  // received, or above it the frontier a relist raised to its listing's
  // head. A head below either is a view behind what this watch saw.
  std::optional<uint64_t> received = guard_.received();
  if (received && !KVFOLD_MUTANT("window-lagging-below-received-only")) {
    received = std::max(*received, guard_.Frontier(state));
  }
  if (stream_created_.empty() || state.created != stream_created_ || !received ||
      state.last_seq >= *received || KVFOLD_MUTANT("window-trust-lagging-view")) {
    lagging_since_.reset();
    return Status::OK();
  }
  source_.NoteLaggingView();  // it may be this server's copy that lags
  const auto now = clock_.Now();
  if (!lagging_since_) lagging_since_ = now;
  if (now - *lagging_since_ >= kLaggingViewPatience) return Status::OK();
  return Status::Unavailable(
      "stream KV_" + source_.bucket() + " as the server reports it ends at sequence " +
      std::to_string(state.last_seq) + ", before sequence " + std::to_string(*received) +
      " this watch already received or listed from the same stream: a replica that has not caught "
      "up "
      "(after a partition, say); waiting for it (a view behind for " +
      std::to_string(
          std::chrono::duration_cast<std::chrono::seconds>(kLaggingViewPatience).count()) +
      " s is taken for a reset of the stream)");
}

StatusOr<StreamState> WatchLoop::CheckFloor() {
  const auto received = guard_.received();
  auto state = ReadState();
  if (!state.ok()) return state.status();
  last_floor_check_ = clock_.Now();
  NoteRetention(*state);
  guard_.SampleWrites(last_floor_check_, state->last_seq);
  std::string why;
  auto fault =
      core::CheckWindow(source_.bucket(), *state, guard_.Frontier(*state), stream_created_, &why);
  if (KVFOLD_MUTANT("floor-skip-midwatch")) fault = core::WindowFault::kNone;
  switch (fault) {
    case core::WindowFault::kRecreated:
      NeedRepair(core::RepairCause::kRecreated, why);
      return state;
    case core::WindowFault::kExpired:
      if (opt_.metrics) opt_.metrics->RecordFloorTrip();
      NeedRepair(core::RepairCause::kFloorTrip, "retention passed the frontier mid-watch: " + why);
      return state;
    case core::WindowFault::kNone:
      break;
  }
  // A repair already due (a stretch read outside the marker window) keeps
  // the frontier where it is.
  if (repair_cause_) return state;
  if (guard_.received() == received) guard_.VerifyReceived();
  AdvanceCursor();
  return state;
}

bool WatchLoop::MarkerStretchHolds(int64_t now_ns, const std::string& stretch) {
  const auto window = core::MarkerWindowNs(last_state_);
  if (!window || KVFOLD_MUTANT("floor-ignore-marker-window")) return true;
  if (guard_.ReceivedInsideWindow(now_ns, *window)) return true;
  const bool first = guard_.LoseAnchor();
  if (repair_cause_) return false;
  if (opt_.metrics && first) opt_.metrics->RecordFloorTrip();
  NeedRepair(core::RepairCause::kFloorTrip,
             stretch + " was read outside the marker window: " +
                 core::DescribeMarkerWindowMiss(
                     "sequence " + std::to_string(guard_.received().value_or(0)), source_.bucket(),
                     guard_.received_anchor(), now_ns, last_state_));
  return false;
}

// Proves that everything in scope up to the stream's last sequence has
// arrived, so the cursor can pass stretches with nothing in scope. last_seq
// is read first; then the stream's store (not a consumer counter, which a
// newer or clustered server updates late) must hold nothing in scope
// between what arrived and last_seq; then a fresh floor check must pass,
// which proves nothing in that stretch was evicted before the store was
// asked.
Status WatchLoop::Probe() {
  auto first = CheckFloor();
  if (!first.ok()) return first.status();
  if (repair_cause_) return Status::OK();
  const uint64_t last = first->last_seq;
  const uint64_t received = guard_.received().value_or(0);
  if (last > received) {
    auto next = source_.FirstRetainedInScope(opt_.scope, received + 1);
    if (!next.ok()) return next.status();
    if (!core::NothingInScopeToCome(last, *next)) {
      probe_soon_ = true;  // something in scope is still on its way
      return TryCommit(/*force=*/false);
    }
    // The store was searched just now: on a bucket with limit markers the
    // stretch passes only if that was within the window.
    if (!MarkerStretchHolds(ServerNow(), "the stretch from sequence " +
                                             std::to_string(received + 1) + " to " +
                                             std::to_string(last))) {
      return Status::OK();
    }
    // Everything after `last` was stored after the first read.
    guard_.ReceiveQuietStretch(last, first->server_time_ns);
    auto second = CheckFloor();
    if (!second.ok()) return second.status();
    if (repair_cause_) return Status::OK();
  } else if (guard_.received() && !guard_.anchor_lost()) {
    guard_.ReanchorReceived(first->server_time_ns);  // nothing at all after received
    AdvanceCursor();
  }
  return TryCommit(/*force=*/true);
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
    KVFOLD_RETURN_IF_ERROR(fold_.Commit(memo));
  }
  plan.rebase = plan.cause == core::RepairCause::kRecreated;
  // Judged with the memo the repair runs under: a recreated stream's
  // listing by that stream alone (RepairCtx).
  const Retention retention = ClassifyRetention(plan.state, RepairCtx(plan).eviction_observed);
  plan.choice = core::ChooseRepair(opt_.repair, plan.cause, retention);
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
  ctx.eviction_observed =
      eviction_observed_ && (!plan.rebase || KVFOLD_MUTANT("repair-recreated-keeps-old-memo"));
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
    // The memo was about the old stream; the new one starts clean.
    final_meta.eviction_observed = ClassifyRetention(plan.state, false).has_evicted;
  }
  repair::RelistResult r;
  const ChangeOrigin origin = plan.cause == core::RepairCause::kReconcile ? ChangeOrigin::kReconcile
                                                                          : ChangeOrigin::kRelist;
  repair::RepairContext ctx = RepairCtx(plan);
  Status s = repair::RunRelist(ctx, opt_.scope, origin, plan.rebase, final_meta, &r);
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
  eviction_observed_ = meta->eviction_observed;
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

Status WatchLoop::ProveFrontier() {
  if (guard_.unverified() && !repair_cause_) {
    auto checked = CheckFloor();
    if (!checked.ok() && !checked.status().IsUnavailable()) return checked.status();
  }
  return Status::OK();
}

}  // namespace kvfold
