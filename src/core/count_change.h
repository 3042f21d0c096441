// How replacing one key's entry changes a fold's key counts
// (FoldMeta::live_keys and ::entries). One rule for the stores, which apply
// it to their counters, and for repairs, which state a commit's change.

#ifndef KVFOLD_CORE_COUNT_CHANGE_H_
#define KVFOLD_CORE_COUNT_CHANGE_H_

#include "kvfold/fold.h"

namespace kvfold::core {

// `before` is the key's entry before (nullptr: the fold never saw the key).
FoldCommit::CountChange CountChangeOf(const Entry* before, const Entry& after);

inline void AddCountChange(const FoldCommit::CountChange& change, FoldCommit::CountChange* sum) {
  sum->live_keys += change.live_keys;
  sum->entries += change.entries;
}

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_COUNT_CHANGE_H_
