#include "watch/async_committer.h"

#include <utility>

namespace kvfold {

AsyncCommitter::~AsyncCommitter() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

FoldCommit AsyncCommitter::Start(FoldCommit batch) {
  FoldCommit before = std::exchange(batch_, std::move(batch));
  in_flight_ = true;
  if (!background_) {
    std::chrono::steady_clock::duration took{};
    Status s = CommitTimed(&took);
    std::lock_guard lock(mu_);
    result_ = std::move(s);
    took_ = took;
    done_ = true;
    return before;
  }
  {
    std::lock_guard lock(mu_);
    queued_ = true;
    done_ = false;
  }
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { Loop(); });
  } else {
    cv_.notify_all();
  }
  return before;
}

bool AsyncCommitter::finished() {
  std::lock_guard lock(mu_);
  return done_;
}

Status AsyncCommitter::Wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  in_flight_ = false;
  return result_;
}

Status AsyncCommitter::CommitTimed(std::chrono::steady_clock::duration* took) {
  const auto start = std::chrono::steady_clock::now();
  Status s = fold_.Commit(batch_);
  *took = std::chrono::steady_clock::now() - start;
  return s;
}

void AsyncCommitter::Loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return queued_ || stop_; });
    if (queued_) {  // a stop still lets the batch in flight finish
      queued_ = false;
      lock.unlock();
      std::chrono::steady_clock::duration took{};
      Status s = CommitTimed(&took);
      lock.lock();
      result_ = std::move(s);
      took_ = took;
      done_ = true;
      cv_.notify_all();
      continue;
    }
    return;
  }
}

}  // namespace kvfold
