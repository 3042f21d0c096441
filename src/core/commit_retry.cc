#include "core/commit_retry.h"

#include <algorithm>
#include <string>

#include "core/mutation.h"

namespace kvfold::core {

int CommitRetry::Succeeded() {
  const int ended = failures_;
  if (!KVFOLD_MUTANT("commit-failures-never-reset")) failures_ = 0;
  return ended;
}

Status CommitRetry::Failed(const Status& s, std::string_view what, std::string_view more) {
  ++failures_;
  if (s.code() == Status::Code::kInternal && !KVFOLD_MUTANT("commit-retry-internal")) return s;
  if (failures_ >= max_failures_) {
    return s.WithContext(std::string(what) + " failed " + std::to_string(failures_) +
                         " consecutive times" + std::string(more));
  }
  return Status::OK();
}

std::chrono::milliseconds CommitRetry::Delay() const {
  using std::chrono::milliseconds;
  return std::min(milliseconds(100) * failures_, milliseconds(2000));
}

}  // namespace kvfold::core
