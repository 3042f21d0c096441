#include "store/exact_counts.h"

#include "core/mutation.h"

namespace kvfold::store {

Status CountExactly(FoldSnapshot& snapshot, FoldMeta* meta) {
  if (!meta->counts_stale) return Status::OK();
  uint64_t live = 0, entries = 0;
  KVFOLD_RETURN_IF_ERROR(snapshot.Scan("", !KVFOLD_MUTANT("exact-counts-skip-tombstones"),
                                       [&](std::string_view, const Entry& e) {
                                         ++entries;
                                         live += e.deleted ? 0 : 1;
                                         return true;
                                       }));
  meta->live_keys = live;
  meta->entries = entries;
  meta->counts_stale = false;
  return Status::OK();
}

StatusOr<FoldMeta> ReadExactMeta(Fold& fold) {
  auto meta = fold.ReadMeta();
  if (!meta.ok() || !meta->counts_stale) return meta;
  auto snapshot = fold.Snapshot();
  if (!snapshot.ok()) return snapshot.status();
  FoldMeta exact = (*snapshot)->meta();
  KVFOLD_RETURN_IF_ERROR(CountExactly(**snapshot, &exact));
  return exact;
}

}  // namespace kvfold::store
