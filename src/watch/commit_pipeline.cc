#include "watch/commit_pipeline.h"

#include "core/mutation.h"

namespace kvfold {

CommitPipeline::CommitPipeline(Fold& fold, Clock& clock, CommitPipelineOptions options)
    : clock_(clock),
      opt_(std::move(options)),
      retry_(opt_.max_commit_failures),
      committer_(fold, opt_.background) {}

void CommitPipeline::ResetTo(std::optional<uint64_t> cursor, int64_t anchor_ns) {
  committed_ = cursor;
  committed_anchor_ = anchor_ns;
  pending_ = core::PendingBatch();
  if (cursor) pending_.AdvanceTo(*cursor, anchor_ns);
}

const Entry* CommitPipeline::Find(const std::string& key) const {
  if (const Entry* p = pending_.Find(key)) return p;
  if (!committer_.in_flight()) return nullptr;
  auto it = committer_.batch().entries.find(key);
  return it == committer_.batch().entries.end() ? nullptr : &it->second;
}

void CommitPipeline::ForEachUncommitted(
    const std::function<bool(std::string_view key, const Entry& entry)>& fn) const {
  if (committer_.in_flight()) {
    for (const auto& [key, entry] : committer_.batch().entries) {
      if (!fn(key, entry)) return;
    }
  }
  for (const auto& [key, entry] : pending_.meta().entries) {
    if (!fn(key, entry)) return;
  }
}

std::optional<uint64_t> CommitPipeline::Handed() const {
  if (committer_.in_flight() && committer_.batch().cursor) return committer_.batch().cursor;
  return committed_;
}

bool CommitPipeline::AnchorRefreshDue() const {
  if (!pending_.cursor() || pending_.cursor() != committed_) return false;
  if (KVFOLD_MUTANT("anchor-skip-refresh")) return false;
  return marker_window_ns_ &&
         pending_.cursor_time_ns() - committed_anchor_ >= *marker_window_ns_ / 4;
}

bool CommitPipeline::HasWork() const { return pending_.HasWork(Handed()) || AnchorRefreshDue(); }

bool CommitPipeline::BatchFull() const {
  // A run of new keys (a first state sync) is bounded by its memory alone,
  // not by batch_size: the store ingests it as one table file, whose cost
  // is mostly per file.
  if (pending_.AllKnownNew()) return pending_.footprint() >= opt_.sync_run_bytes;
  if (pending_.changes() >= opt_.batch_size) return true;
  return pending_.bytes() >= opt_.batch_bytes && !KVFOLD_MUTANT("batch-ignore-bytes");
}

bool CommitPipeline::RoomBesideInFlight() const {
  if (pending_.AllKnownNew()) return !BatchFull();
  return pending_.changes() < 8 * opt_.batch_size &&
         (pending_.bytes() < opt_.batch_bytes || KVFOLD_MUTANT("batch-ignore-bytes"));
}

Status CommitPipeline::TryCommit(bool force, const std::function<Status()>& prove) {
  if (committer_.in_flight()) {
    // Keep receiving while the store writes, up to a bound on memory: the
    // batch in flight and one more of at most batch_bytes.
    if (!force && !committer_.finished() && RoomBesideInFlight()) return Status::OK();
    KVFOLD_RETURN_IF_ERROR(Collect());
  }
  if (!HasWork()) return Status::OK();
  if (!force && retry_.failures() > 0 && clock_.Now() < retry_at_) return Status::OK();
  if (KVFOLD_MUTANT("commit-before-frontier-proof")) {
    pending_.Recycle(committer_.Start(pending_.Release()));
    KVFOLD_RETURN_IF_ERROR(prove());
  } else {
    // The proof may move the batch's cursor (a jump over what is out of
    // scope): the batch leaves only with it.
    KVFOLD_RETURN_IF_ERROR(prove());
    pending_.Recycle(committer_.Start(pending_.Release()));
  }
  if (force || !opt_.background) return Collect();
  return Status::OK();
}

Status CommitPipeline::CollectIfFinished() {
  if (committer_.in_flight() && committer_.finished()) return Collect();
  return Status::OK();
}

Status CommitPipeline::Collect() {
  Status s = committer_.Wait();
  if (opt_.metrics) opt_.metrics->RecordCommit(s.ok(), committer_.took());
  if (s.ok()) {
    if (const int ended = retry_.Succeeded(); ended > 0) {
      Log(LogLevel::kInfo, "commit succeeded after " + std::to_string(ended) + " failure(s)");
    }
    // A commit of metadata alone (the memo, say) leaves the cursor as it was.
    if (committer_.batch().cursor) committed_ = committer_.batch().cursor;
    if (committer_.batch().cursor_time_ns) committed_anchor_ = *committer_.batch().cursor_time_ns;
    if (opt_.committed && committed_) opt_.committed(*committed_);
    // Nothing arrived while it was written: the nodes kept for the next
    // batch would only be held while the watch idles.
    if (pending_.changes() == 0 && !KVFOLD_MUTANT("pipeline-keep-spare-when-idle")) {
      pending_.DropSpare();
    }
    return Status::OK();
  }
  FoldCommit failed = committer_.Take();
  if (!KVFOLD_MUTANT("batch-drop-on-failure")) pending_.TakeBack(std::move(failed));
  KVFOLD_RETURN_IF_ERROR(
      retry_.Failed(s, "commit",
                    "; the fold keeps cursor " +
                        (committed_ ? std::to_string(*committed_) : std::string("<none>"))));
  Log(LogLevel::kWarning, "commit failed (" + s.ToString() + "); keeping the batch to retry");
  retry_at_ = clock_.Now() + retry_.Delay();
  return Status::OK();
}

Status CommitPipeline::Flush(const std::function<Status()>& prove) {
  while (committer_.in_flight() || HasWork()) {
    const int before = retry_.failures();
    KVFOLD_RETURN_IF_ERROR(TryCommit(/*force=*/true, prove));
    if (retry_.failures() > before) {
      // Flushing on shutdown still backs off between attempts, but a stop
      // request must not skip them.
      clock_.SleepFor(retry_.Delay(), std::stop_token());
    }
  }
  return Status::OK();
}

}  // namespace kvfold
