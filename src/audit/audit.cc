// The audit (kvfold/audit.h). It reads the fold's cursor C first, then
// makes two passes over the fold's scope, judging only what both sides
// settled at or below C:
//  1. the bucket's key listing. The listing starts after C was committed
//     and names each key's latest put as of some moment after that, so a
//     key listed at revision r <= C was live at r in the stream's state at
//     C: the fold must hold it live at r.
//  2. the fold's walk. A live entry at or below C that the listing did not
//     name is read once more from the bucket's store (its last message,
//     headers only), and that read decides: a listing races writes.
// The fold moves on under a running mirror; entries never move backward,
// so an entry read at or below C after C was committed is the one the fold
// held at C, and one above C is in flight.

#include "kvfold/audit.h"

#include <chrono>
#include <thread>

#include "core/mutation.h"
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
    ++report_.judged;
    if (s.IsNotFound() || entry.deleted) {
      Record(key, AuditFinding::kMissing, 0, revision);
    } else if (entry.revision != revision) {
      Record(key, AuditFinding::kStale, entry.revision, revision);
    }
    return Status::OK();
  }

  // Pass 2: a live entry at or below C the listing did not name.
  Status Unlisted(const std::string& key, const Entry& entry) {
    Pace();
    auto last = source_.LastOfKey(key);
    if (!last.ok()) return last.status();
    if (*last && (*last)->seq > cursor()) {
      ++report_.in_flight;  // rewritten or deleted after C
      return Status::OK();
    }
    if (!*last) {
      // No message of the key: evicted (the fold keeps what the stream
      // lost) or never there. Retention only moves forward, so a stream
      // that now says its listing is the truth said so all along.
      auto state = source_.ReadStream();
      if (!state.ok()) return state.status();
      if (!ClassifyRetention(*state, meta_.eviction_observed).listing_is_truth ||
          KVFOLD_MUTANT("audit-no-message-is-kept")) {
        ++report_.kept;
        return Status::OK();
      }
      ++report_.judged;
      Record(key, AuditFinding::kPhantom, entry.revision, 0);
      return Status::OK();
    }
    const BucketMessage& m = **last;
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

  void Record(const std::string& key, AuditFinding finding, uint64_t fold_revision,
              uint64_t bucket_revision) {
    if (finding == AuditFinding::kMissing) ++report_.missing;
    if (finding == AuditFinding::kStale) ++report_.stale;
    if (finding == AuditFinding::kPhantom) ++report_.phantom;
    if (report_.named.size() < options_.max_named) {
      report_.named.push_back({key, finding, fold_revision, bucket_revision});
    }
  }

  void Pace() {
    if (options_.max_reads_per_second <= 0) return;
    const auto gap = std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(1.0 / options_.max_reads_per_second));
    const auto now = SteadyClock::now();
    if (next_read_ > now) std::this_thread::sleep_for(next_read_ - now);
    next_read_ = std::max(now, next_read_) + gap;
  }

  BucketSource& source_;
  Fold& fold_;
  const AuditOptions& options_;
  const FoldMeta& meta_;
  AuditReport& report_;
  SteadyClock::time_point next_read_{};
};

}  // namespace

StatusOr<AuditReport> Audit(BucketSource& source, Fold& fold, const AuditOptions& options) {
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
  auto stream = source.ReadStream();
  if (!stream.ok()) return stream.status();
  if (stream->created != meta->stream_created) {
    return Status::FailedPrecondition(
        "the fold was made from another stream of bucket " + source.bucket() + " (created " +
        meta->stream_created + "; the bucket's stream was created " + stream->created +
        "): the bucket was recreated, and the next mirror rebuilds the fold");
  }

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
  return report;
}

}  // namespace kvfold
