// How a commit's metadata fields change a fold's metadata: the one rule
// every Fold backend applies to the metadata it read before storing what
// changed, with the entries, in one atomic write. A new metadata field is
// one edit here (and its storage in each backend's codec). Entry counts
// and max_revision are the backends' own: they depend on the entries held.

#ifndef KVFOLD_CORE_META_MERGE_H_
#define KVFOLD_CORE_META_MERGE_H_

#include "kvfold/fold.h"
#include "kvfold/status.h"

namespace kvfold::core {

// Applies `commit`'s metadata to `*meta`. Returns FailedPrecondition, and
// leaves `*meta` as it was, for a cursor that would move backward without
// a rebase (FoldCommit::rebase with a new stream_created).
Status MergeCommitMeta(const FoldCommit& commit, FoldMeta* meta);

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_META_MERGE_H_
