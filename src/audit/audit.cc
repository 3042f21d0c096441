// The audit (kvfold/audit.h). It reads the fold's cursor C first, then
// makes two passes over the fold's scope, judging only what both sides
// settled at or below C:
//  1. the bucket's key listing. The listing starts after C was committed
//     and names each key's latest put as of some moment after that, so a
//     key listed at revision r <= C was live at r in the stream's state at
//     C: the fold must hold it live at r.
//  2. the fold's walk. A live entry at or below C that the listing did not
//     name is read once more from the bucket's store (its last message),
//     and that read decides: a listing races writes.
// The fold moves on under a running mirror; entries never move backward,
// so an entry read at or below C after C was committed is the one the fold
// held at C, and one above C is in flight.

#include "kvfold/audit.h"

#include <chrono>
#include <thread>

#include "core/marker_window.h"
#include "core/message_ttl.h"
#include "core/mutation.h"
#include "core/window.h"
#include "kvfold/retention.h"
#include "repair/change_writer.h"
#include "repair/listed_keys.h"

namespace kvfold {

std::string_view AuditFindingName(AuditFinding finding) {
  switch (finding) {
    case AuditFinding::kMissing:
      return "missing";
    case AuditFinding::kStale:
      return "stale";
    case AuditFinding::kPhantom:
      return "phantom";
    case AuditFinding::kKept:
      return "kept";
    case AuditFinding::kValue:
      return "value";
  }
  return "unknown";
}

namespace {

using SteadyClock = std::chrono::steady_clock;

class Auditor {
 public:
  Auditor(BucketSource& source, Fold& fold, const AuditOptions& options, const FoldMeta& meta,
          AuditReport* report)
      : source_(source), fold_(fold), options_(options), meta_(meta), report_(*report) {}

  // Pass 1: a key the listing named at `revision`.
  Status Listed(const std::string& key, uint64_t revision) {
    if (options_.stop.stop_requested()) return Stopped();
    if (revision > cursor() && !KVFOLD_MUTANT("audit-judge-in-flight")) {
      ++report_.in_flight;
      return Status::OK();
    }
    Entry entry;
    Status s = fold_.Get(key, &entry);
    if (!s.ok() && !s.IsNotFound()) return s;
    if (s.ok() && entry.revision > cursor()) {
      ++report_.in_flight;  // the fold moved on since C
      return Status::OK();
    }
    if (s.ok() && !entry.deleted && entry.revision > revision) {
      // The fold is ahead of the key's last message: the message at its
      // revision expired, uncovering this one (with history). Either the
      // fold holds what it uncovered, at the revision that expired, or it
      // still holds the expired message, which the mirror folds next.
      KVFOLD_RETURN_IF_ERROR(ReadStateOnce());
      if (PastDeadline(entry)) {
        ++report_.in_flight;
        return Status::OK();
      }
      auto last = source_.LastOfKey(key);
      if (!last.ok()) return last.status();
      if (*last && (*last)->seq == revision && (*last)->op == Op::kPut &&
          (*last)->value == entry.value && (*last)->expires_ns == entry.expires_ns &&
          !KVFOLD_MUTANT("audit-uncovered-stale")) {
        ++report_.judged;
        return Status::OK();
      }
    }
    ++report_.judged;
    if (s.IsNotFound() || entry.deleted) {
      Record(key, AuditFinding::kMissing, 0, revision);
    } else if (entry.revision != revision) {
      Record(key, AuditFinding::kStale, entry.revision, revision);
    }
    return Status::OK();
  }

  // The entry's per-message TTL passed on a bucket where no limit marker
  // need announce it (none written, or history > 1): a change after C,
  // which the mirror folds at the deadline.
  bool PastDeadline(const Entry& entry) const {
    const StreamState& state = *state_;
    return entry.expires_ns > 0 && state.server_time_ns >= entry.expires_ns &&
           core::ExpiriesMayGoUnmarked(state) && !KVFOLD_MUTANT("audit-judge-expired");
  }

  Status Stopped() const { return Status::Cancelled("the audit was stopped"); }

  // Pass 3 (compare_values): each key's last message with its value, from
  // a state-sync delivery, in sequence order. Only a put at exactly the
  // revision the fold holds live is compared: the same message, so any
  // other value is the fold's fault. Ends at the first message after C.
  Status CompareValues(const Scope& scope) {
    auto delivery = source_.Open(DeliveryStart{}, scope);
    if (!delivery.ok()) return delivery.status();
    auto idle_since = SteadyClock::now();
    while (true) {
      if (options_.stop.stop_requested()) return Stopped();
      auto ev = (*delivery)->Next(std::chrono::milliseconds(200));
      if (!ev.ok()) return ev.status();
      if (ev->kind == DeliveryEvent::Kind::kReset) return Status::OK();  // cut short
      if (ev->kind == DeliveryEvent::Kind::kTimeout) {
        if (SteadyClock::now() - idle_since >= options_.values_idle) return Status::OK();
        continue;
      }
      idle_since = SteadyClock::now();
      const BucketMessage& m = ev->message;
      if (m.seq > cursor()) return Status::OK();
      if (m.op == Op::kPut && scope.Contains(m.key)) {
        Entry entry;
        Status s = fold_.Get(m.key, &entry);
        if (!s.ok() && !s.IsNotFound()) return s;
        if (s.ok() && !entry.deleted && entry.revision == m.seq) {
          ++report_.values_compared;
          if (entry.value != m.value && !KVFOLD_MUTANT("audit-ignore-values")) {
            Record(m.key, AuditFinding::kValue, m.seq, m.seq);
          }
        }
      }
      if (m.pending == 0) return Status::OK();
    }
  }

  // Pass 2: a live entry at or below C the listing did not name.
  Status Unlisted(const std::string& key, const Entry& entry) {
    KVFOLD_RETURN_IF_ERROR(Pace());
    auto last = source_.LastOfKey(key);
    if (!last.ok()) return last.status();
    if (*last && (*last)->seq > cursor()) {
      ++report_.in_flight;  // rewritten or deleted after C
      return Status::OK();
    }
    if (!*last) return NoMessage(key, entry);
    const BucketMessage& m = **last;
    if (m.seq < entry.revision) {
      // An expiry uncovered it: in flight while the fold holds the
      // expired message past its deadline.
      KVFOLD_RETURN_IF_ERROR(ReadStateOnce());
      if (PastDeadline(entry)) {
        ++report_.in_flight;
        return Status::OK();
      }
    }
    ++report_.judged;
    if (m.op != Op::kPut) {
      Record(key, AuditFinding::kPhantom, entry.revision, m.seq);
    } else if (m.seq != entry.revision) {
      Record(key, AuditFinding::kStale, entry.revision, m.seq);
    }
    // (A put at the fold's revision: the listing missed a key rewritten
    // while it ran; the fold is right.)
    return Status::OK();
  }

 private:
  uint64_t cursor() const { return report_.cursor; }

  // A live fold entry at or below C whose key the stream holds no message
  // of. The stream is read at most once per key judged this way, and not
  // again while an earlier read already decides: retention only moves
  // forward, so what an earlier read proved lost or evicted stays so.
  Status ReadStateOnce() {
    if (state_) return Status::OK();
    auto state = source_.ReadStream();
    if (!state.ok()) return state.status();
    state_ = std::move(state).value();
    return Status::OK();
  }

  Status NoMessage(const std::string& key, const Entry& entry) {
    for (bool fresh = !state_.has_value();; fresh = true) {
      if (fresh) {
        auto state = source_.ReadStream();
        if (!state.ok()) return state.status();
        state_ = std::move(state).value();
      }
      const Verdict v = JudgeNoMessage(entry);
      if (v == Verdict::kPhantom && !fresh) continue;  // judge on a fresh read
      if (v == Verdict::kLost) ++report_.in_flight;
      if (v == Verdict::kKept) ++report_.kept;
      if (v == Verdict::kPhantom) {
        ++report_.judged;
        Record(key, AuditFinding::kPhantom, entry.revision, 0);
      }
      return Status::OK();
    }
  }

  enum class Verdict { kLost, kKept, kPhantom };
  Verdict JudgeNoMessage(const Entry& entry) const {
    const StreamState& state = *state_;
    // The stream no longer holds all of what came after C: a delete of
    // the key after C may be among what it lost (the next mirror repairs
    // it, by its policy), so its absence proves nothing. Evicted history
    // (first_seq past C + 1), and on a bucket with limit markers a cursor
    // outside the marker window (a marker written after C may have
    // expired with no trace).
    std::string why;
    bool lost = core::CheckWindow(source_.bucket(), state, cursor(), meta_.stream_created, &why) !=
                core::WindowFault::kNone;
    core::MarkerTtl ttl(meta_.marker_ttl_ns);
    ttl.Observe(state, meta_.cursor_time_ns);
    if (const auto window = core::MarkerWindowNs(ttl.Apply(state));
        window && state.last_seq > cursor() &&
        !core::InsideMarkerWindow(meta_.cursor_time_ns, state.server_time_ns, *window)) {
      lost = true;
    }
    // An eviction removes the oldest messages first: it explains a key
    // whose every message lay below the first one retained.
    const bool evicted = !ClassifyRetention(state, meta_.eviction_observed).listing_is_truth &&
                         entry.revision < state.first_seq;
    if (evicted || KVFOLD_MUTANT("audit-no-message-is-kept")) return Verdict::kKept;
    if (PastDeadline(entry)) return Verdict::kLost;
    if (lost && !KVFOLD_MUTANT("audit-trust-lost-tail")) return Verdict::kLost;
    return Verdict::kPhantom;
  }

  void Record(const std::string& key, AuditFinding finding, uint64_t fold_revision,
              uint64_t bucket_revision) {
    if (finding == AuditFinding::kMissing) ++report_.missing;
    if (finding == AuditFinding::kStale) ++report_.stale;
    if (finding == AuditFinding::kPhantom) ++report_.phantom;
    if (finding == AuditFinding::kValue) ++report_.value_differs;
    if (report_.named.size() < options_.max_named) {
      report_.named.push_back({key, finding, fold_revision, bucket_revision});
    }
  }

  Status Pace() {
    if (options_.stop.stop_requested()) return Stopped();
    if (options_.max_reads_per_second <= 0) return Status::OK();
    const auto gap = std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(1.0 / options_.max_reads_per_second));
    // Sleeps in short steps, so a stop is heard.
    while (SteadyClock::now() < next_read_) {
      if (options_.stop.stop_requested()) return Stopped();
      std::this_thread::sleep_for(std::min<SteadyClock::duration>(next_read_ - SteadyClock::now(),
                                                                  std::chrono::milliseconds(50)));
    }
    next_read_ = std::max(SteadyClock::now(), next_read_) + gap;
    return Status::OK();
  }

  BucketSource& source_;
  Fold& fold_;
  const AuditOptions& options_;
  const FoldMeta& meta_;
  AuditReport& report_;
  SteadyClock::time_point next_read_{};
  std::optional<StreamState> state_;  // read when a key has no message
};

}  // namespace

StatusOr<AuditReport> Audit(BucketSource& source, Fold& fold, const AuditOptions& options) {
  if (options.max_reads_per_second > 0 && options.max_reads_per_second < 0.01) {
    return Status::InvalidArgument("max_reads_per_second must be 0 (unpaced) or at least 0.01");
  }
  auto meta = fold.ReadMeta();
  if (!meta.ok()) return meta.status();
  if (!meta->cursor) {
    return Status::FailedPrecondition("the fold has no cursor yet: mirror or seed it first");
  }
  if (meta->bucket != source.bucket()) {
    return Status::FailedPrecondition("the fold mirrors bucket " +
                                      (meta->bucket.empty() ? "<none>" : meta->bucket) + ", not " +
                                      source.bucket());
  }
  auto scope = Scope::Make(meta->scope.value_or(std::vector<std::string>{""}));
  if (!scope.ok()) return scope.status();
  // The stream the fold was made from, not gone backward below C; at the
  // start also still holding everything after C.
  auto same_stream = [&source, &meta](bool at_start) -> Status {
    auto stream = source.ReadStream();
    if (!stream.ok()) return stream.status();
    std::string why;
    const core::WindowFault fault =
        core::CheckWindow(source.bucket(), *stream, meta->cursor, meta->stream_created, &why);
    if (fault == core::WindowFault::kRecreated) {
      return Status::FailedPrecondition(why + "; the next mirror rebuilds the fold");
    }
    if (fault == core::WindowFault::kExpired && at_start) {
      return Status::FailedPrecondition(
          why +
          ": what the fold missed is gone from the stream, so it cannot be judged; the "
          "next mirror repairs the fold by its repair policy");
    }
    return Status::OK();
  };
  KVFOLD_RETURN_IF_ERROR(same_stream(true));

  AuditReport report;
  report.cursor = *meta->cursor;
  Auditor auditor(source, fold, options, *meta, &report);
  repair::ListedKeys listed(options.listing_memory_keys, options.spill_dir);
  KVFOLD_RETURN_IF_ERROR(source.ListKeys(
      *scope,
      [&](std::string_view key, uint64_t revision) -> Status {
        KVFOLD_RETURN_IF_ERROR(listed.Add(key));
        return auditor.Listed(std::string(key), revision);
      },
      &report.listing_revision));

  if (KVFOLD_MUTANT("audit-skip-fold-pass")) return report;
  repair::FoldWalker walker(fold, *scope, /*values=*/false);
  while (true) {
    auto next = walker.Peek();
    if (!next.ok()) return next.status();
    if (*next == nullptr) break;
    const auto& [key, entry] = **next;
    if (!entry.deleted && entry.revision <= report.cursor) {
      auto named = listed.Contains(key);
      if (!named.ok()) return named.status();
      if (!*named) KVFOLD_RETURN_IF_ERROR(auditor.Unlisted(key, entry));
    }
    walker.Pop();
  }
  if (options.compare_values) KVFOLD_RETURN_IF_ERROR(auditor.CompareValues(*scope));
  // Neither side may have been replaced meanwhile: a stream recreated, or
  // a fold rebuilt under a running mirror, makes every finding moot.
  KVFOLD_RETURN_IF_ERROR(same_stream(false).WithContext("while the audit ran"));
  auto after = fold.ReadMeta();
  if (!after.ok()) return after.status();
  if (after->stream_created != meta->stream_created || after->cursor.value_or(0) < report.cursor) {
    return Status::FailedPrecondition(
        "the fold was rebuilt while the audit ran (cursor " + std::to_string(report.cursor) +
        ", now " + (after->cursor ? std::to_string(*after->cursor) : "none") + "): audit it again");
  }
  if (report.judged == 0 && report.in_flight > 0) {
    return Status::FailedPrecondition(
        "nothing to judge: every key in scope changed after the fold's cursor " +
        std::to_string(report.cursor) + " (" + std::to_string(report.in_flight) +
        " in flight); let the mirror catch up, or audit a stopped one once it has");
  }
  return report;
}

}  // namespace kvfold
