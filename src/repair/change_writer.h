// How a repair writes: changes gather into a commit of up to batch_size
// changes with no cursor (the old cursor stays), retried like the watch's
// own commits. The apply hook sees a batch's changes, in order, only when
// the batch commits, after every bucket read that decided them: a read that
// fails partway discards a batch the hook never saw, so the retry shows it
// each change once (SPEC §1, "exactly once per committed change"). Only
// Finish carries the repair's final metadata, the cursor among it.

#ifndef KVFOLD_REPAIR_CHANGE_WRITER_H_
#define KVFOLD_REPAIR_CHANGE_WRITER_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/commit_retry.h"
#include "kvfold/clock.h"
#include "kvfold/fold.h"
#include "repair/repair_context.h"

namespace kvfold::repair {

class ChangeWriter {
 public:
  // Commits every `batch_limit` changes (batch_size when 0); a caller may
  // Flush sooner, e.g. at each artifact chunk.
  ChangeWriter(const RepairContext& ctx, ChangeOrigin origin, size_t batch_limit = 0)
      : fold_(ctx.fold),
        ctx_(ctx),
        clock_(ctx.clock),
        origin_(origin),
        batch_limit_(batch_limit == 0 ? ctx.batch_size : batch_limit),
        retry_(ctx.max_commit_failures) {}

  // Records `next` for `key` (whose fold entry was `previous`), for the
  // hook too when `hook`; commits when the batch is full.
  Status Add(const std::string& key, const std::optional<Entry>& previous, const Entry& next,
             bool hook);
  // Marks each batch Flush commits FoldCommit::bulk (where its counts are
  // known): for batches of many keys, as a restore's chunks.
  void set_bulk(bool bulk) { bulk_ = bulk; }
  // Shows the hook what is pending, then commits it, without a cursor.
  Status Flush();
  // Commits what is pending together with `final_meta`.
  Status Finish(FoldCommit final_meta);

  uint64_t puts() const { return puts_; }
  uint64_t deletes() const { return deletes_; }

 private:
  // Shows the hook the batch's changes, in the order they were added, then
  // moves them into `commit`.
  Status TakePending(FoldCommit* commit);
  Status CommitWithRetry(FoldCommit& commit);
  // Sets the counts `commit` (holding pending_'s entries) changes, when
  // known, and starts a new batch's.
  void TakeCounts(FoldCommit* commit);

  Fold& fold_;
  const RepairContext& ctx_;
  Clock& clock_;
  ChangeOrigin origin_;
  size_t batch_limit_;
  bool bulk_ = false;
  core::CommitRetry retry_;
  // The batch, in the order Add was called; a key may come twice (the
  // later entry is the one committed).
  struct Pending {
    std::string key;
    std::optional<Entry> previous;  // its value is not kept: the hook needs the revision
    Entry next;
    bool hook = false;
  };
  std::vector<Pending> pending_;
  // The batch's distinct keys; the set only once a key came out of order.
  std::set<std::string, std::less<>> pending_keys_;
  bool ascending_ = true;
  size_t distinct_ = 0;
  // The batch's count change, from the `previous` entries Add was given;
  // unknown once a key changes twice in one batch.
  FoldCommit::CountChange counts_;
  bool counts_known_ = true;
  uint64_t puts_ = 0;
  uint64_t deletes_ = 0;
};

// A fold's entries in key order, page by page (bounded memory), skipping
// keys outside `scope`. A repair writes only keys it has already passed,
// so a page read before those writes land still holds what it needs.
class FoldWalker {
 public:
  // Without `values`, entries come with empty values (a pass that only
  // needs keys, revisions, tombstone flags and deadlines copies less).
  FoldWalker(Fold& fold, const Scope& scope, bool values = true)
      : fold_(fold), scope_(scope), values_(values) {}
  // The next entry, or nullptr at the end. Valid until Pop().
  StatusOr<const std::pair<std::string, Entry>*> Peek();
  void Pop() { ++pos_; }

 private:
  Fold& fold_;
  const Scope& scope_;
  const bool values_;
  std::vector<std::pair<std::string, Entry>> page_;
  size_t pos_ = 0;
  std::string next_start_;
  bool done_ = false;
};

}  // namespace kvfold::repair

#endif  // KVFOLD_REPAIR_CHANGE_WRITER_H_
