// Watch(): one WatchLoop (watch/watch_loop.h) run to its end.

#include "kvfold/watcher.h"

#include "watch/watch_loop.h"

namespace kvfold {

Status Watch(BucketSource& source, Fold& fold, const WatchOptions& options) {
  WatchLoop loop(source, fold, options);
  return loop.Run();
}

}  // namespace kvfold
