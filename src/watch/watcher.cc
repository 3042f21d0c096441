// The watch loop. The decisions it applies (window check, what a message
// does to a key, batch and cursor rules) live in src/core; this file
// sequences them against a BucketSource, a Fold and a Clock.

#include "kvfold/watcher.h"

#include <algorithm>

#include "core/pending_batch.h"
#include "core/mutation.h"
#include "core/window.h"

namespace kvfold {
namespace {

using std::chrono::milliseconds;

class WatchLoop {
 public:
  WatchLoop(BucketSource& source, Fold& fold, const WatchOptions& options)
      : source_(source),
        fold_(fold),
        opt_(options),
        clock_(options.clock != nullptr ? *options.clock : *RealClock()) {}

  Status Run();

 private:
  enum class SessionEnd { kDone, kBroken };

  Status Prepare();
  // One delivery from open to reset, stop or catch-up. Returns a fatal
  // status, or OK with *end saying how it ended.
  Status Session(SessionEnd* end);
  Status Apply(const BucketMessage& message);
  Status Probe(Delivery& delivery);
  // Commits what is pending unless a retry is not due yet. Returns non-OK
  // only when max_commit_failures is reached.
  Status TryCommit(bool force);
  // Commits until nothing is pending or the failure limit is reached.
  Status Flush();
  bool CaughtUp() const;
  void Log(const std::string& line) const {
    if (opt_.log) opt_.log(line);
  }

  BucketSource& source_;
  Fold& fold_;
  const WatchOptions& opt_;
  Clock& clock_;

  std::optional<uint64_t> committed_;  // the fold's cursor
  std::optional<uint64_t> received_;   // everything in scope up to here arrived
  std::string stream_created_;         // "" until recorded
  std::optional<uint64_t> target_;     // until_caught_up: stream last_seq at start
  core::PendingBatch pending_;
  Clock::TimePoint oldest_pending_;
  Clock::TimePoint retry_at_;
  int failures_ = 0;
  bool probe_soon_ = false;
};

Status WatchLoop::Prepare() {
  if (opt_.batch_size == 0 || opt_.max_commit_failures <= 0) {
    return Status::InvalidArgument(
        "WatchOptions: batch_size and max_commit_failures must be > 0");
  }
  auto meta = fold_.ReadMeta();
  if (!meta.ok()) return meta.status();
  const std::string& bucket = source_.bucket();
  if (!meta->bucket.empty() && meta->bucket != bucket) {
    return Status::FailedPrecondition(
        "this fold mirrors bucket " + meta->bucket + ", not " + bucket +
        "; use another fold directory for bucket " + bucket);
  }
  if (meta->scope && *meta->scope != opt_.scope.prefixes()) {
    auto recorded = Scope::Make(*meta->scope);
    return Status::FailedPrecondition(
        "this fold was mirrored with scope " +
        (recorded.ok() ? recorded->ToString() : std::string("<unreadable>")) +
        " but this watch asks for " + opt_.scope.ToString() +
        "; use the same scope or another fold directory");
  }
  if (!meta->cursor && !meta->seeding.empty()) {
    return Status::FailedPrecondition("the fold holds an unfinished seed from artifact " +
                                      meta->seeding + "; re-run `kvfold seed` to finish it");
  }
  if (!meta->cursor && meta->entries > 0) {
    return Status::CursorExpired(
        "the fold holds " + std::to_string(meta->entries) +
        " entries but no cursor, so it cannot tell what it has missed; mirror "
        "into a new, empty fold directory");
  }
  committed_ = meta->cursor;
  received_ = meta->cursor;
  stream_created_ = meta->stream_created;
  if (meta->bucket.empty()) pending_.meta().bucket = bucket;
  if (!meta->scope) pending_.meta().scope = opt_.scope.prefixes();
  return Status::OK();
}

bool WatchLoop::CaughtUp() const {
  if (!target_) return false;
  return *target_ == 0 || (committed_ && *committed_ >= *target_);
}

Status WatchLoop::Run() {
  KVFOLD_RETURN_IF_ERROR(Prepare());
  milliseconds backoff = opt_.reconnect_backoff_min;
  while (true) {
    SessionEnd end = SessionEnd::kBroken;
    const auto received_before = received_;
    Status s = Session(&end);
    if (!s.ok()) {
      // Keep what was received and hooked; the error still wins.
      (void)Flush();
      return s;
    }
    if (end == SessionEnd::kDone) return Flush();
    KVFOLD_RETURN_IF_ERROR(TryCommit(/*force=*/true));
    if (received_ != received_before) backoff = opt_.reconnect_backoff_min;
    Log("retrying in " + std::to_string(backoff.count()) + " ms");
    clock_.SleepFor(backoff, opt_.stop);
    if (opt_.stop.stop_requested()) return Flush();
    backoff = std::min(backoff * 2, opt_.reconnect_backoff_max);
  }
}

Status WatchLoop::Session(SessionEnd* end) {
  *end = SessionEnd::kBroken;
  const std::string& bucket = source_.bucket();
  auto state = source_.ReadStream();
  if (!state.ok()) {
    if (state.status().IsUnavailable()) {
      Log("reading stream state: " + state.status().message());
      return Status::OK();
    }
    return state.status();
  }
  if (opt_.until_caught_up && !target_) target_ = state->last_seq;
  if (!KVFOLD_MUTANT("window-skip-before-open")) {
    KVFOLD_RETURN_IF_ERROR(core::CheckWindow(bucket, *state, received_, stream_created_));
  }
  if (stream_created_.empty()) {
    stream_created_ = state->created;
    pending_.meta().stream_created = stream_created_;
  }
  if (CaughtUp() || opt_.stop.stop_requested()) {
    *end = SessionEnd::kDone;
    return Status::OK();
  }

  DeliveryStart start;
  if (received_) start.from_seq = *received_ + 1;
  auto opened = source_.Open(start, opt_.scope);
  if (!opened.ok()) {
    if (opened.status().IsUnavailable()) {
      Log("opening a delivery: " + opened.status().message());
      return Status::OK();
    }
    return opened.status();
  }
  std::unique_ptr<Delivery> delivery = std::move(opened).value();
  // Again after the consumer exists: retention may have moved the head
  // between the first check and the consumer's creation, and the server
  // would clamp the start without a word.
  auto after = source_.ReadStream();
  if (!after.ok()) {
    if (after.status().IsUnavailable()) return Status::OK();
    return after.status();
  }
  if (!KVFOLD_MUTANT("window-skip-after-open")) {
    KVFOLD_RETURN_IF_ERROR(core::CheckWindow(bucket, *after, received_, stream_created_));
  }

  probe_soon_ = true;
  Clock::TimePoint last_activity = clock_.Now();
  while (true) {
    if (opt_.stop.stop_requested() || CaughtUp()) {
      *end = SessionEnd::kDone;
      return Status::OK();
    }
    const auto now = clock_.Now();
    milliseconds timeout(200);  // bounds how long a stop request waits
    if (pending_.HasWork(committed_)) {
      const auto due = std::chrono::duration_cast<milliseconds>(
          oldest_pending_ + opt_.linger - now);
      timeout = std::clamp(due, milliseconds(1), timeout);
    }
    if (probe_soon_) timeout = std::min(timeout, milliseconds(10));
    auto ev = delivery->Next(timeout);
    if (!ev.ok()) return ev.status();
    switch (ev->kind) {
      case DeliveryEvent::Kind::kMessage:
        last_activity = clock_.Now();
        KVFOLD_RETURN_IF_ERROR(Apply(ev->message));
        if (ev->message.pending == 0) probe_soon_ = true;
        if (pending_.changes() >= opt_.batch_size) {
          KVFOLD_RETURN_IF_ERROR(TryCommit(/*force=*/false));
        }
        break;
      case DeliveryEvent::Kind::kTimeout:
        if (probe_soon_ || clock_.Now() - last_activity >= opt_.idle_probe) {
          probe_soon_ = false;
          last_activity = clock_.Now();
          Status p = Probe(*delivery);
          if (p.IsUnavailable() || p.IsNotFound()) {
            Log("progress probe failed: " + p.message());
            return Status::OK();
          }
          KVFOLD_RETURN_IF_ERROR(p);
        }
        break;
      case DeliveryEvent::Kind::kReset:
        Log("delivery reset: " + ev->reason);
        return Status::OK();
    }
    if (pending_.HasWork(committed_) &&
        clock_.Now() - oldest_pending_ >= opt_.linger) {
      KVFOLD_RETURN_IF_ERROR(TryCommit(/*force=*/false));
    }
  }
}

Status WatchLoop::Apply(const BucketMessage& m) {
  // A re-created delivery may repeat what already arrived.
  if (received_ && m.seq <= *received_) return Status::OK();
  const bool was_idle = !pending_.HasWork(committed_);
  if (opt_.scope.Contains(m.key)) {
    std::optional<Entry> current;
    if (const Entry* p = pending_.Find(m.key)) {
      current = *p;
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
      if (opt_.apply) {
        Change change;
        change.key = m.key;
        change.op = m.op;
        change.value = next->value;
        change.revision = next->revision;
        change.previous_revision = current ? current->revision : 0;
        // The cursor must not cover a change the hook refused: stop before
        // advancing past it.
        KVFOLD_RETURN_IF_ERROR(opt_.apply(change));
      }
      pending_.Put(m.key, std::move(*next));
    }
  }
  received_ = m.seq;
  pending_.AdvanceTo(m.seq);
  if (was_idle) oldest_pending_ = clock_.Now();  // linger counts from the first pending change
  return Status::OK();
}

// Proves that everything in scope up to the stream's last sequence has
// arrived, so the cursor can pass stretches with nothing in scope: read
// last_seq first, then the delivery must show itself drained. Every message
// <= last_seq existed before the drain was observed, so none in scope can
// still come.
Status WatchLoop::Probe(Delivery& delivery) {
  auto state = source_.ReadStream();
  if (!state.ok()) return state.status();
  auto progress = delivery.Progress();
  if (!progress.ok()) return progress.status();
  if (!progress->drained && !KVFOLD_MUTANT("probe-ignore-drain")) return Status::OK();
  if (state->last_seq > received_.value_or(0)) {
    received_ = state->last_seq;
    pending_.AdvanceTo(state->last_seq);
  }
  return TryCommit(/*force=*/true);
}

Status WatchLoop::TryCommit(bool force) {
  if (!pending_.HasWork(committed_)) return Status::OK();
  if (!force && failures_ > 0 && clock_.Now() < retry_at_) return Status::OK();
  Status s = fold_.Commit(pending_.ToCommit());
  if (s.ok()) {
    if (failures_ > 0) Log("commit succeeded after " + std::to_string(failures_) + " failure(s)");
    failures_ = 0;
    committed_ = pending_.cursor();
    pending_.Clear();
    if (opt_.on_applied && committed_) opt_.on_applied(*committed_);
    return Status::OK();
  }
  ++failures_;
  if (KVFOLD_MUTANT("batch-drop-on-failure")) pending_.Clear();
  if (failures_ >= opt_.max_commit_failures) {
    return s.WithContext("commit failed " + std::to_string(failures_) +
                         " consecutive times; the fold keeps cursor " +
                         (committed_ ? std::to_string(*committed_) : "<none>"));
  }
  Log("commit failed (" + s.ToString() + "); keeping the batch to retry");
  retry_at_ = clock_.Now() + std::min(milliseconds(100) * failures_, milliseconds(2000));
  return Status::OK();
}

Status WatchLoop::Flush() {
  while (pending_.HasWork(committed_)) {
    const int before = failures_;
    KVFOLD_RETURN_IF_ERROR(TryCommit(/*force=*/true));
    if (failures_ > before) {
      // Flushing on shutdown still backs off between attempts, but a stop
      // request must not skip them.
      clock_.SleepFor(milliseconds(100) * failures_, std::stop_token());
    }
  }
  return Status::OK();
}

}  // namespace

Status Watch(BucketSource& source, Fold& fold, const WatchOptions& options) {
  WatchLoop loop(source, fold, options);
  return loop.Run();
}

}  // namespace kvfold
