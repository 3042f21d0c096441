// When may the latest-artifact pointer move? Only forward within one stream
// history: same bucket and stream identity, strictly higher cursor. A slower
// exporter racing a faster one therefore can never move it back. The one
// exception is a pointer beyond the stream's head (the stream was restored
// from a backup since: same identity, another history); see
// artifacts/FORMAT.md, "Latest pointer".

#ifndef KVFOLD_CORE_POINTER_RULE_H_
#define KVFOLD_CORE_POINTER_RULE_H_

#include <optional>

#include "kvfold/status.h"
#include "kvfold/transport.h"

namespace kvfold::core {

// OK when `next` may replace `current` (nullopt: no pointer yet): a higher
// cursor; or `next.replaces` names `current` and says its cursor is beyond
// the stream's last sequence, which `next` is not; or
// `next.replaces_invalid` names `current` (whatever its cursor and bucket);
// AlreadyExists when `current` is at the same or a higher cursor otherwise;
// FailedPrecondition when they are of different buckets or streams.
Status CheckPointerAdvance(const std::optional<ArtifactPointer>& current,
                           const ArtifactPointer& next);

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_POINTER_RULE_H_
