// A fold's counts as a reader needs them: exact, also while a catch-up
// that skipped them (FoldMeta::counts_stale) has not recounted yet.

#ifndef KVFOLD_STORE_EXACT_COUNTS_H_
#define KVFOLD_STORE_EXACT_COUNTS_H_

#include "kvfold/fold.h"
#include "kvfold/status.h"

namespace kvfold::store {

// Where `meta` (the snapshot's) has stale counts, counts the snapshot's
// entries in one scan into live_keys and entries and clears counts_stale;
// otherwise leaves *meta as it is.
Status CountExactly(FoldSnapshot& snapshot, FoldMeta* meta);

// Fold::ReadMeta with exact counts: counted from a snapshot where stale.
StatusOr<FoldMeta> ReadExactMeta(Fold& fold);

}  // namespace kvfold::store

#endif  // KVFOLD_STORE_EXACT_COUNTS_H_
