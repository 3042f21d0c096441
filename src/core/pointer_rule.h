// When may the latest-artifact pointer move? Only forward: same bucket and
// stream identity, strictly higher cursor. A slower exporter racing a faster
// one therefore can never move it back.

#ifndef KVFOLD_CORE_POINTER_RULE_H_
#define KVFOLD_CORE_POINTER_RULE_H_

#include <optional>

#include "kvfold/status.h"
#include "kvfold/transport.h"

namespace kvfold::core {

// OK when `next` may replace `current` (nullopt: no pointer yet);
// AlreadyExists when `current` is at the same or a higher cursor;
// FailedPrecondition when they are of different buckets or streams.
Status CheckPointerAdvance(const std::optional<ArtifactPointer>& current,
                           const ArtifactPointer& next);

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_POINTER_RULE_H_
