// The watch loop's sessions (watch/watch_loop.h): the window check at a
// session's start, opening a delivery, the event pump, and the one way a
// delivered message enters the fold (Take: the roll-up skip check, then
// Apply).

#include <algorithm>
#include <utility>

#include "core/change_report.h"
#include "core/marker_window.h"
#include "core/mutation.h"
#include "core/window.h"
#include "kvfold/retention.h"
#include "watch/watch_loop.h"

namespace kvfold {
namespace {

// How long after a deadline the server may still hold the message: a key
// found unexpired is looked at again this much later (server time).
constexpr int64_t kExpiryRecheckNs = 1'000'000'000;
// What a stream read's server time is taken back by, as a clock for
// deadlines: a write the server had stamped may not show in its reply yet.
constexpr int64_t kReadClockMarginNs = 250'000'000;

}  // namespace

using std::chrono::milliseconds;

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
  // What expired while this fold was stopped goes first: a watch already
  // caught up ends here.
  bool keep = true;
  KVFOLD_RETURN_IF_ERROR(ExpireDue(&keep));
  if (!keep) return Status::OK();
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
  // from a sequence and brings every message after it, unless this one
  // ended before anything arrived (then the next is a state sync again).
  new_keys_through_ = sync && fold_empty_ && !guard_.received() ? state.last_seq : 0;
  PlanCounting(*after, sequential_from);
  if (new_keys_through_ != 0 && KVFOLD_MUTANT("watch-new-keys-past-sync")) {
    new_keys_through_ = UINT64_MAX;
  }
  heartbeats_ = {};  // counted per delivery
  return Pump(*delivery, sequential_from, end);
}

Status WatchLoop::Pump(Delivery& delivery, uint64_t sequential_from, SessionEnd* end) {
  probe_soon_ = true;
  Pace pace{clock_.Now(), opt_.idle_probe};
  while (true) {
    bool expired_keep = true;
    KVFOLD_RETURN_IF_ERROR(ExpireDue(&expired_keep));
    if (!expired_keep) return Status::OK();
    KVFOLD_RETURN_IF_ERROR(RecountWhenDue());
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
    NoteHeartbeats(delivery, arrived);
    // The stream is read at least every idle_probe, busy or idle: readiness
    // needs a fresh read, and a busy delivery with no stretch to prove
    // never idles. Not while quiet is proven without one.
    const bool read_due = arrived - last_floor_check_ >= opt_.idle_probe &&
                          !KVFOLD_MUTANT("watch-read-only-when-idle") && !QuietProven(arrived);
    const bool floor_due =
        (guard_.unverified() && arrived - last_floor_check_ >= opt_.floor_check) || read_due;
    bool keep = true;  // false: the session ends (a reset, a failed read)
    switch (ev->kind) {
      case DeliveryEvent::Kind::kMessage:
        pace.last_activity = arrived;
        KVFOLD_RETURN_IF_ERROR(OnMessage(&ev->message, sequential_from, floor_due, &keep));
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
    // A run of a first state sync waits for its bytes while the delivery
    // has more at once: the fewer and larger the runs, the cheaper.
    const bool run_filling =
        pipeline_.RunPending() && delivery_has_more_ && ev->kind == DeliveryEvent::Kind::kMessage;
    if (PendingWork() && arrived - oldest_pending_ >= opt_.linger && !run_filling) {
      KVFOLD_RETURN_IF_ERROR(TryCommit(/*force=*/false));
    }
  }
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

Status WatchLoop::Take(BucketMessage* message, uint64_t sequential_from, bool* keep) {
  const BucketMessage& m = *message;
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
  return Apply(message);
}

Status WatchLoop::OnMessage(BucketMessage* message, uint64_t sequential_from, bool floor_due,
                            bool* keep) {
  const BucketMessage& m = *message;
  // The first message past the first sync's new keys ends its run: the
  // run goes in whole as new keys, and this message in a batch after it.
  if (m.seq > new_keys_through_ && pipeline_.RunPending() && opt_.scope.Contains(m.key)) {
    KVFOLD_RETURN_IF_ERROR(TryCommit(/*force=*/true));
  }
  KVFOLD_RETURN_IF_ERROR(Take(message, sequential_from, keep));
  if (!*keep) return Status::OK();
  // A hint only: it makes the probe come sooner, it proves nothing.
  if (m.pending == 0) probe_soon_ = true;
  delivery_has_more_ = m.pending > 0;
  if (floor_due) {
    auto c = CheckFloor();
    if (!c.ok()) {
      if (!c.status().IsUnavailable()) return c.status();
      Log(LogLevel::kWarning, "floor check failed: " + c.status().message());
      *keep = false;
      return Status::OK();
    }
  }
  if (pipeline_.BatchFull()) return TryCommit(/*force=*/false);
  return Status::OK();
}

void WatchLoop::NoteHeartbeats(const Delivery& delivery, Clock::TimePoint now) {
  const Delivery::Heartbeats hb = delivery.heartbeats();
  if (hb.count == heartbeats_.count) return;
  heartbeats_ = hb;
  // What a read would tell readiness: the server answers, at this head.
  if (QuietProven(now) && opt_.metrics) opt_.metrics->RecordStreamHeartbeat(hb.stream_seq);
}

bool WatchLoop::QuietProven(Clock::TimePoint now) const {
  // A whole-bucket delivery brings every write: while nothing came after
  // the head the last read saw, nothing was written, so there is no stretch
  // to prove and nothing a volume limit could have evicted. The server's
  // heartbeat shows its consumer at that head (a later write shows as a
  // higher one), and the delivery ends itself after three missed ones.
  if (opt_.quiet_read_every.count() <= 0) return false;
  if (!opt_.scope.IsWholeBucket() && !KVFOLD_MUTANT("quiet-any-scope")) return false;
  if (repair_cause_ || probe_soon_ || heartbeats_.count == 0) return false;
  if (heartbeats_.stream_seq != last_state_.last_seq) return false;
  if (guard_.received() != last_state_.last_seq || guard_.unverified() ||
      guard_.verified() < last_state_.last_seq) {
    return false;
  }
  // Deadlines pass by the clock reads bring.
  if (deadlines_apply_ && deadlines_.size() > 0) return false;
  const auto since_read = now - last_floor_check_;
  // A marker window needs its anchor moved by a read within a quarter of it.
  if (const auto window = core::MarkerWindowNs(last_state_)) {
    if (since_read >= core::QuarterWindow(*window) / 2) return false;
  }
  return since_read < opt_.quiet_read_every;
}

Status WatchLoop::OnIdle(bool floor_due, Pace* pace, bool* keep) {
  if (!probe_soon_ && !floor_due && clock_.Now() - pace->last_activity < pace->probe_every) {
    return Status::OK();
  }
  if (!probe_soon_ && !floor_due && QuietProven(clock_.Now())) {
    pace->last_activity = clock_.Now();
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

Status WatchLoop::Apply(BucketMessage* message) {
  const BucketMessage& m = *message;
  // A re-created delivery may repeat what already arrived.
  if (guard_.AlreadyReceived(m.seq)) return Status::OK();
  expiry_clock_ns_ = std::max(expiry_clock_ns_, m.time_ns);
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
    if (must_read) KVFOLD_RETURN_IF_ERROR(CurrentEntry(m.key, &current));
    std::optional<Entry> next = core::FoldMessage(m, current, /*value_from=*/&message->value);
    if (next) {
      // The cursor must not cover a change the hook refused: stop before
      // advancing past it.
      KVFOLD_RETURN_IF_ERROR(core::ReportChange(&opt_.apply, opt_.metrics, ChangeOrigin::kLive,
                                                m.key, m.op, *next, current));
      if (next->expires_ns > 0 && deadlines_apply_) {
        deadlines_.Add(m.key, next->revision, next->expires_ns);
      }
      // What was read goes with the put: a batch whose every entry before
      // is known states its count change, and the store reads nothing.
      if (must_read) {
        pipeline_.pending().PutOver(std::move(message->key), std::move(*next), current);
      } else {
        pipeline_.pending().Put(std::move(message->key), std::move(*next), known_new);
      }
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

void WatchLoop::ForgetDeadlines() {
  deadlines_.Clear();
  deadlines_loaded_ = false;
  expiry_clock_ns_ = 0;
}

Status WatchLoop::ExpireDue(bool* keep) {
  if (!deadlines_apply_) return Status::OK();
  // Not past a stretch nothing proved yet (a message missing there may be
  // a rewrite in time), nor with a repair due.
  if (guard_.unverified() || repair_cause_) return Status::OK();
  if (!deadlines_loaded_) {
    // The fold's deadlines and those of the batches not yet committed (a
    // reload while deadlines did not apply found none queued for them).
    // Keys folded since are added as they come; an item twice is harmless.
    const auto add = [this](std::string_view key, const Entry& e) {
      if (!e.deleted && e.expires_ns > 0)
        deadlines_.Add(std::string(key), e.revision, e.expires_ns);
      return true;
    };
    Status scanned = fold_.Scan("", /*include_tombstones=*/false, add);
    if (!scanned.ok()) return scanned.WithContext("reading the fold's deadlines");
    pipeline_.ForEachUncommitted(add);
    deadlines_loaded_ = true;
  }
  // The fold (with what is pending) is the stream as of the newest message
  // received: nothing after it was stored before it; or, when the last
  // read found nothing stored after received, as of that read. Deadlines
  // up to there are expiries of that same moment; a later one, applied
  // before the delivery caught up, could delete a key a newer message
  // (still to come) rewrote in time.
  int64_t now = expiry_clock_ns_;
  if (KVFOLD_MUTANT("expire-by-received-anchor")) now = guard_.received_anchor();
  if (const auto& received = guard_.received()) {
    // With a margin: the server's reply may lag a write it had stamped.
    if (last_state_.last_seq <= *received) {
      now = std::max(now, last_state_.server_time_ns - kReadClockMarginNs);
    }
    if (KVFOLD_MUTANT("expire-by-server-clock")) now = ServerNow();
  }
  if (markers_since_ns_ > 0 && last_state_.history == 1) {
    // Markers came on: once every deadline before them is done, they
    // announce the rest.
    const auto first = deadlines_.Next();
    if (!first || *first > markers_since_ns_) {
      markers_since_ns_ = 0;
      deadlines_apply_ = false;
      ForgetDeadlines();
      return Status::OK();
    }
  }
  const auto next = deadlines_.Next();
  if (now <= 0 || !next || *next > now) return Status::OK();
  std::vector<DeadlineQueue::Item> due = deadlines_.PopDue(now);
  // Where markers announce an expiry, they do so only for a key's last
  // message (nats-server writes one when nothing else of the subject
  // remains); with history > 1 an expiry may instead uncover the key's
  // previous message, which only the stream's store can tell.
  const bool history_one = last_state_.history == 1 || KVFOLD_MUTANT("expire-assume-history-one");
  for (size_t i = 0; i < due.size(); ++i) {
    const DeadlineQueue::Item& item = due[i];
    // A marker announces this expiry (markers were on at its deadline).
    const bool markers = markers_written_ && item.expires_ns > markers_since_ns_;
    std::optional<Entry> current;
    KVFOLD_RETURN_IF_ERROR(CurrentEntry(item.key, &current));
    // Rewritten or deleted since the item was added: not this deadline's.
    if (!current || current->deleted ||
        ((current->revision != item.revision || current->expires_ns != item.expires_ns) &&
         !KVFOLD_MUTANT("expire-unchecked"))) {
      continue;
    }
    Op op = Op::kDelete;
    Entry next{current->revision, true, "", 0};
    if (!history_one) {
      auto last = source_.LastOfKey(item.key);
      if (!last.ok()) {
        // Looked at again once the session is back (a new one reloads).
        for (size_t j = i; j < due.size() && !KVFOLD_MUTANT("expire-drop-unread"); ++j) {
          deadlines_.Add(due[j].key, due[j].revision, due[j].expires_ns);
        }
        if (!last.status().IsUnavailable()) {
          return last.status().WithContext("reading key " + item.key + " at its deadline");
        }
        Log(LogLevel::kWarning,
            "reading key " + item.key + " at its deadline: " + last.status().message());
        *keep = false;
        return Status::OK();
      }
      // The server still holds the message that carries the deadline (its
      // expiry timer lags): look again in a second. A newer message is on
      // its way through the delivery, which may lose it to its own TTL:
      // look again then too (once folded, the item is stale).
      if (*last && ((*last)->seq == item.revision || (*last)->expires_ns == item.expires_ns ||
                    (*last)->seq > item.revision)) {
        if (!KVFOLD_MUTANT("expire-no-recheck")) {
          deadlines_.Add(item.key, item.revision, item.expires_ns, now + kExpiryRecheckNs);
        }
        continue;
      }
      // A marker's delete is on its way, or the window's checks see that
      // it went missing.
      if (!*last && markers) continue;
      if (*last) {
        // The previous message's state again (a put with its own deadline,
        // or a delete), at the revision that expired: revisions never go
        // backward, and the state is as of that expiry.
        op = (*last)->op;
        next = *core::FoldMessage(**last, std::nullopt);
        if (!KVFOLD_MUTANT("expire-uncover-at-old-revision")) next.revision = current->revision;
      }
    } else if (markers) {
      continue;  // the marker deletes it
    }
    KVFOLD_RETURN_IF_ERROR(core::ReportChange(&opt_.apply, opt_.metrics, ChangeOrigin::kExpiry,
                                              item.key, op, next, current));
    if (!next.deleted && next.expires_ns > 0) {
      deadlines_.Add(item.key, next.revision, next.expires_ns);
    }
    if (!PendingWork()) oldest_pending_ = clock_.Now();
    pipeline_.pending().PutOver(item.key, std::move(next), current);
  }
  return Status::OK();
}

Status WatchLoop::CurrentEntry(const std::string& key, std::optional<Entry>* current) {
  if (const Entry* p = pipeline_.Find(key)) {
    *current = *p;  // pending or in flight: the fold may not show it yet
    return Status::OK();
  }
  Entry stored;
  Status s = fold_.Get(key, &stored);
  if (s.ok()) {
    *current = std::move(stored);
  } else if (!s.IsNotFound()) {
    return s.WithContext("reading key " + key + " from the fold");
  }
  return Status::OK();
}

}  // namespace kvfold
