#include "kvfold/mirror.h"

#include <algorithm>
#include <string>

namespace kvfold {

StatusOr<std::unique_ptr<Mirror>> Mirror::Start(BucketSource& source, Fold& fold,
                                                MirrorOptions options) {
  if (options.watch.until_caught_up) {
    return Status::InvalidArgument(
        "a Mirror follows until stopped: until_caught_up must be false (call Watch for a "
        "catch-up that returns)");
  }
  auto meta = fold.ReadMeta();
  if (!meta.ok()) return meta.status();
  std::unique_ptr<Mirror> m(new Mirror(fold, std::move(options), meta->cursor));
  WatchOptions o = m->options_.watch;
  o.stop = m->stop_.get_token();
  o.metrics = m->metrics_;
  o.on_applied = [mirror = m.get(), user = o.on_applied](uint64_t cursor) {
    {
      std::lock_guard lock(mirror->mu_);
      mirror->cursor_ = std::max(mirror->cursor_.value_or(0), cursor);
    }
    mirror->changed_.notify_all();
    if (user) user(cursor);
  };
  if (m->options_.watch.stop.stop_possible()) {
    m->user_stop_.emplace(m->options_.watch.stop,
                          [mirror = m.get()] { mirror->stop_.request_stop(); });
  }
  m->thread_ = std::thread([mirror = m.get(), &source, &fold, o] {
    Status s = Watch(source, fold, o);
    {
      std::lock_guard lock(mirror->mu_);
      mirror->result_ = std::move(s);
    }
    mirror->changed_.notify_all();
  });
  return m;
}

Mirror::Mirror(Fold& fold, MirrorOptions options, std::optional<uint64_t> cursor)
    : fold_(fold),
      options_(std::move(options)),
      metrics_(options_.watch.metrics != nullptr ? options_.watch.metrics : &own_metrics_),
      cursor_(cursor) {}

Mirror::~Mirror() { (void)Stop(); }

Status Mirror::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_requested_ = true;
  }
  stop_.request_stop();
  {
    std::lock_guard join(join_mu_);
    if (thread_.joinable()) thread_.join();
  }
  std::lock_guard lock(mu_);
  return result_.value_or(Status::OK());
}

std::optional<Status> Mirror::Result() const {
  std::lock_guard lock(mu_);
  return result_;
}

std::optional<uint64_t> Mirror::Cursor() const {
  std::lock_guard lock(mu_);
  return cursor_;
}

Status Mirror::Ended(const std::string& waiting_for) const {
  const std::string at = cursor_ ? "cursor " + std::to_string(*cursor_) : "no cursor";
  if (result_->ok()) {
    return Status::Cancelled("the mirror " +
                             std::string(stop_requested_ ? "was stopped" : "ended") + " at " + at +
                             " before " + waiting_for);
  }
  return result_->WithContext("the mirror ended at " + at + " before " + waiting_for);
}

namespace {

using SteadyClock = std::chrono::steady_clock;

// Readiness and a stream read can change without a commit: waits look
// again at least this often.
constexpr std::chrono::milliseconds kRejudge{100};

}  // namespace

Status Mirror::WaitForRevision(uint64_t revision, std::chrono::milliseconds timeout) {
  const auto start = SteadyClock::now();
  const auto deadline = start + timeout;
  const std::string what = "revision " + std::to_string(revision);
  const uint64_t reads_before = metrics_->Snapshot().stream_reads;
  std::unique_lock lock(mu_);
  while (true) {
    if (cursor_ && *cursor_ >= revision) return Status::OK();
    if (result_) return Ended(what);
    const auto now = SteadyClock::now();
    // Only a read asked after this wait began proves the revision absent:
    // one asked before may predate the write that returned it, also when
    // its answer comes after (CI saw that). Reads go one at a time, so the
    // second answered since the start was asked after it.
    const WatchStats stats = metrics_->Snapshot();
    if (stats.read_stream_last_seq > 0 && stats.read_stream_last_seq < revision &&
        stats.stream_reads >= reads_before + 2) {
      return Status::InvalidArgument(
          what + " is beyond the stream's last sequence " +
          std::to_string(stats.read_stream_last_seq) +
          ", read after this wait began: it was not written to this bucket (another bucket's "
          "revision, or one of a stream since recreated) and will never come");
    }
    if (now >= deadline) {
      return Status::DeadlineExceeded("waited " + std::to_string(timeout.count()) + " ms for " +
                                      what + "; the cursor is at " +
                                      (cursor_ ? std::to_string(*cursor_) : "none") +
                                      " of the stream's " + std::to_string(stats.stream_last_seq));
    }
    changed_.wait_until(lock, std::min(deadline, now + kRejudge));
  }
}

Status Mirror::WaitReady(std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  std::unique_lock lock(mu_);
  while (true) {
    if (result_) return Ended("it was ready");
    const HealthVerdict ready = JudgeReady(metrics_->Snapshot(), options_.health);
    if (ready.ok) return Status::OK();
    const auto now = SteadyClock::now();
    if (now >= deadline) {
      return Status::DeadlineExceeded("not ready after " + std::to_string(timeout.count()) +
                                      " ms: " + ready.reason);
    }
    changed_.wait_until(lock, std::min(deadline, now + kRejudge));
  }
}

}  // namespace kvfold
