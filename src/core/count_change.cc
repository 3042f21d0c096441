#include "core/count_change.h"

namespace kvfold::core {

FoldCommit::CountChange CountChangeOf(const Entry* before, const Entry& after) {
  FoldCommit::CountChange change;
  if (before == nullptr) change.entries = 1;
  const bool was_live = before != nullptr && !before->deleted;
  if (was_live && after.deleted) change.live_keys = -1;
  if (!was_live && !after.deleted) change.live_keys = 1;
  return change;
}

}  // namespace kvfold::core
