#include "watch/floor_guard.h"

#include <algorithm>

#include "core/marker_window.h"
#include "core/mutation.h"
#include "kvfold/retention.h"

namespace kvfold {

void FloorGuard::ResetTo(std::optional<uint64_t> cursor, int64_t anchor_ns, bool new_stream) {
  received_ = cursor;
  verified_ = cursor.value_or(0);
  received_anchor_ = verified_anchor_ = anchor_ns;
  anchor_lost_ = false;
  if (new_stream) relist_floor_ = 0;
}

std::optional<uint64_t> FloorGuard::Cursor() const {
  if (!received_) return std::nullopt;
  return std::min(*received_, verified_);
}

uint64_t FloorGuard::Frontier(const StreamState& state) const {
  if (ClassifyRetention(state, false).evicts_current_values &&
      !KVFOLD_MUTANT("floor-relist-floor-on-evicting")) {
    return verified_;
  }
  return std::max(verified_, relist_floor_);
}

void FloorGuard::Receive(uint64_t seq, int64_t time_ns) {
  const uint64_t before = received_.value_or(0);
  received_anchor_ = std::max(received_anchor_, time_ns);
  if ((seq == before + 1 || KVFOLD_MUTANT("floor-jump-verified")) && verified_ >= before) {
    verified_ = std::max(verified_, seq);
    verified_anchor_ = received_anchor_;
  }
  received_ = seq;
}

void FloorGuard::ReceiveQuietStretch(uint64_t last, int64_t ts_ns) {
  // Received, not verified: the store was searched after the stream was
  // read, and only the next floor check proves nothing in the stretch was
  // evicted before that search.
  if (KVFOLD_MUTANT("probe-quiet-stretch-verified") && received_ && verified_ >= *received_) {
    verified_ = last;
  }
  received_ = last;
  received_anchor_ = std::max(received_anchor_, ts_ns);
}

void FloorGuard::ReanchorReceived(int64_t ts_ns) {
  received_anchor_ = std::max(received_anchor_, ts_ns);
  if (received_ && verified_ == *received_) verified_anchor_ = received_anchor_;
}

void FloorGuard::ReanchorAfterListing(int64_t ts_ns) {
  received_anchor_ = std::max(received_anchor_, ts_ns);
  verified_anchor_ = std::max(verified_anchor_, ts_ns);
  anchor_lost_ = false;
}

void FloorGuard::VerifyReceived() {
  if (!received_ || *received_ < verified_) return;
  verified_ = *received_;
  verified_anchor_ = received_anchor_;
}

void FloorGuard::StartStateSync(uint64_t first_seq, int64_t ts_ns, bool forget_received) {
  if (first_seq > 0) verified_ = std::max(verified_, first_seq - 1);
  if (forget_received) received_.reset();
  // Every key taken from here is read after this reply, so any marker that
  // concerns it is written after it too.
  received_anchor_ = verified_anchor_ = ts_ns;
  anchor_lost_ = false;
}

bool FloorGuard::LoseAnchor() {
  const bool first = !anchor_lost_;
  anchor_lost_ = true;
  return first;
}

bool FloorGuard::ReceivedInsideWindow(int64_t now_ns, int64_t window_ns) const {
  return !anchor_lost_ && core::InsideMarkerWindow(received_anchor_, now_ns, window_ns);
}

void FloorGuard::SampleWrites(Clock::TimePoint at, uint64_t last_seq) {
  if (write_sample_) {
    const double secs = std::chrono::duration<double>(at - write_sample_->first).count();
    if (secs > 0.001 && last_seq >= write_sample_->second) {
      const double rate = static_cast<double>(last_seq - write_sample_->second) / secs;
      write_rate_ = std::max(rate, write_rate_ / 2);
    }
  }
  write_sample_ = std::make_pair(at, last_seq);
}

}  // namespace kvfold
