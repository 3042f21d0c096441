#include "repair/change_writer.h"

#include "core/change_report.h"
#include "core/count_change.h"
#include "core/mutation.h"
#include "kvfold/watch_metrics.h"

namespace kvfold::repair {

Status ChangeWriter::Add(const std::string& key, const std::optional<Entry>& previous,
                         const Entry& next, bool hook) {
  if (hook && KVFOLD_MUTANT("repair-hook-before-reads")) {
    const Op op = next.deleted ? Op::kDelete : Op::kPut;
    KVFOLD_RETURN_IF_ERROR(
        core::ReportChange(ctx_.apply, ctx_.metrics, origin_, key, op, next, previous));
    hook = false;
  }
  if (hook) ++(next.deleted ? deletes_ : puts_);
  // While keys come in ascending order (a repair walks them so) none can
  // repeat and no set is kept; the first out of order starts it.
  bool first = ascending_ && (pending_.empty() || key > pending_.back().key);
  if (!first) {
    if (ascending_) {
      ascending_ = false;
      for (const Pending& p : pending_) pending_keys_.insert(p.key);
    }
    first = pending_keys_.insert(key).second;
  }
  if (first) ++distinct_;
  if (!first) counts_known_ = false;
  core::AddCountChange(core::CountChangeOf(previous ? &*previous : nullptr, next), &counts_);
  std::optional<Entry> before;
  if (previous) before = Entry{previous->revision, previous->deleted, {}};
  pending_.push_back(Pending{key, std::move(before), next, hook});
  if (distinct_ >= batch_limit_) return Flush();
  return Status::OK();
}

Status ChangeWriter::TakePending(FoldCommit* commit) {
  // The hook runs here, after every read that decided the batch and right
  // before its commit: nothing it sees is discarded by a failed read.
  for (const Pending& p : pending_) {
    if (!p.hook) continue;
    const Op op = p.next.deleted ? Op::kDelete : Op::kPut;
    KVFOLD_RETURN_IF_ERROR(
        core::ReportChange(ctx_.apply, ctx_.metrics, origin_, p.key, op, p.next, p.previous));
  }
  // Repairs add in key order: the end is the hint, and each insert is
  // constant time.
  for (Pending& p : pending_) {
    commit->entries.insert_or_assign(commit->entries.end(), std::move(p.key), std::move(p.next));
  }
  pending_.clear();
  pending_keys_.clear();
  ascending_ = true;
  distinct_ = 0;
  return Status::OK();
}

void ChangeWriter::TakeCounts(FoldCommit* commit) {
  // The fold was read by the walker this repair writes behind: the store
  // need not read each key again for its counts.
  if (counts_known_ && !commit->clear_entries) {
    commit->counts = counts_;
  }
  counts_ = FoldCommit::CountChange();
  counts_known_ = true;
}

Status ChangeWriter::Flush() {
  if (pending_.empty()) return Status::OK();
  FoldCommit commit;
  KVFOLD_RETURN_IF_ERROR(TakePending(&commit));
  TakeCounts(&commit);
  commit.bulk = bulk_ && commit.counts;
  // A failed commit is retried as it is: the hook does not see it again.
  return CommitWithRetry(commit);
}

Status ChangeWriter::Finish(FoldCommit final_meta) {
  final_meta.entries.clear();
  KVFOLD_RETURN_IF_ERROR(TakePending(&final_meta));
  TakeCounts(&final_meta);
  return CommitWithRetry(final_meta);
}

Status ChangeWriter::CommitWithRetry(FoldCommit& commit) {
  while (true) {
    const auto start = std::chrono::steady_clock::now();
    Status s = fold_.Commit(commit);
    if (ctx_.metrics) ctx_.metrics->RecordCommit(s.ok(), std::chrono::steady_clock::now() - start);
    if (s.ok()) {
      retry_.Succeeded();
      return s;
    }
    // A failed commit may still have been applied: a count change would
    // then count twice, so the retry lets the store read the keys.
    commit.counts.reset();
    KVFOLD_RETURN_IF_ERROR(retry_.Failed(s, "repair commit"));
    ctx_.Log(LogLevel::kWarning, "repair commit failed (" + s.ToString() + "); retrying");
    clock_.SleepFor(retry_.Delay(), std::stop_token());
  }
}

StatusOr<const std::pair<std::string, Entry>*> FoldWalker::Peek() {
  if (pos_ < page_.size()) return &page_[pos_];
  if (done_) return nullptr;
  page_.clear();
  pos_ = 0;
  // Each page is a new iterator, whose reads start without readahead: a
  // page of keys alone is 16 times longer (a restore over a 1M-key fold
  // took 8% less CPU), one with values stays small.
  const size_t kPage = values_ ? 1024 : 16384;
  size_t seen = 0;
  std::string last;
  Status s = fold_.ScanFrom(next_start_, true, [&](std::string_view k, const Entry& e) {
    ++seen;
    if (!KVFOLD_MUTANT("walker-next-page-after-scope") || scope_.Contains(k)) last.assign(k);
    if (scope_.Contains(k)) {
      page_.emplace_back(std::string(k),
                         values_ ? e : Entry{e.revision, e.deleted, {}, e.expires_ns});
    }
    return page_.size() < kPage && seen < 16 * kPage;
  });
  KVFOLD_RETURN_IF_ERROR(s);
  if (seen == 0) {
    done_ = true;
    return nullptr;
  }
  next_start_ = last + '\0';  // the smallest key after `last`
  return Peek();
}

}  // namespace kvfold::repair
