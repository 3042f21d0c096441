// What a repair needs from whoever runs it: the narrow contract between
// the watch loop and src/repair. The watch loop fills it from its options;
// a repair never sees WatchOptions.

#ifndef KVFOLD_REPAIR_REPAIR_CONTEXT_H_
#define KVFOLD_REPAIR_REPAIR_CONTEXT_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <stop_token>
#include <string>

#include "kvfold/bucket.h"
#include "kvfold/change.h"
#include "kvfold/clock.h"
#include "kvfold/fold.h"
#include "kvfold/log_line.h"
#include "kvfold/repair.h"
#include "kvfold/watch_metrics.h"

namespace kvfold::repair {

struct RepairContext {
  RepairContext(BucketSource& source, Fold& fold, Clock& clock)
      : source(source), fold(fold), clock(clock) {}

  BucketSource& source;
  Fold& fold;
  Clock& clock;
  bool eviction_observed = false;  // the fold's memo as the watch knows it
  std::string eviction_cause;      // and what it saw (FoldMeta::eviction_cause)

  // Where a restore finds artifacts (nullptr: none), how long it waits for
  // a usable one, and the backoff between its looks.
  ArtifactSource* artifacts = nullptr;
  std::chrono::milliseconds repair_timeout{0};
  std::chrono::milliseconds backoff_min{0};
  std::chrono::milliseconds backoff_max{0};

  // The change sink: every change goes to the hook `*apply` (if set)
  // before the commit holding it; commits of up to `batch_size` changes
  // are retried up to `max_commit_failures` times in a row. The hook and
  // the log are the caller's own objects, not copies: a hook with state
  // sees the repair's changes as it sees the watch's.
  const ApplyHook* apply = nullptr;
  size_t batch_size = 1;
  int max_commit_failures = 1;

  // A key listing larger than `listing_memory_keys` spills under
  // `spill_dir` ("" : the system's temporary directory).
  size_t listing_memory_keys = 0;
  std::string spill_dir;

  std::stop_token stop;  // checked between commits
  const std::function<void(const LogLine&)>* log = nullptr;
  WatchMetrics* metrics = nullptr;

  void Log(LogLevel level, const std::string& line) const {
    if (log != nullptr && *log) (*log)(LogLine{level, line});
  }
};

}  // namespace kvfold::repair

#endif  // KVFOLD_REPAIR_REPAIR_CONTEXT_H_
