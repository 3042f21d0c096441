// The one rule for a failed commit, kept by the watch loop's pipeline and
// by a repair's change writer alike: retry after 100 ms per failure in a
// row (at most 2 s), give up after `max_failures` in a row, and never retry
// an Internal error (a bug, such as a count change that does not match the
// fold, not a passing fault).

#ifndef KVFOLD_CORE_COMMIT_RETRY_H_
#define KVFOLD_CORE_COMMIT_RETRY_H_

#include <chrono>
#include <string_view>

#include "kvfold/status.h"

namespace kvfold::core {

class CommitRetry {
 public:
  explicit CommitRetry(int max_failures) : max_failures_(max_failures) {}

  // After a commit that succeeded: the failures in a row it ended.
  int Succeeded();
  // After a commit that failed with `s`: OK when a retry should follow
  // Delay() from now; else `s`, in context "<what> failed N consecutive
  // times<more>" when the limit ended it.
  Status Failed(const Status& s, std::string_view what, std::string_view more = "");
  // How long to wait before the retry the last failure allows.
  std::chrono::milliseconds Delay() const;
  int failures() const { return failures_; }

 private:
  const int max_failures_;
  int failures_ = 0;  // in a row
};

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_COMMIT_RETRY_H_
