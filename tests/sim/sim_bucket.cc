#include "sim/sim_bucket.h"

#include <algorithm>

namespace kvfold::sim {
namespace {

class SimDelivery final : public Delivery {
 public:
  SimDelivery(const SimBucket& bucket, std::vector<uint64_t> sync_seqs, uint64_t from_seq,
              Scope scope, int reset_after, int stall)
      : opened_at_(bucket.last_seq()),
        moves_at_open_(bucket.moves()),
        bucket_(bucket),
        sync_(std::move(sync_seqs)),
        from_seq_(from_seq),
        scope_(std::move(scope)),
        reset_after_(reset_after),
        stall_(stall) {}

  StatusOr<DeliveryEvent> Next(std::chrono::milliseconds timeout) override {
    DeliveryEvent ev;
    if (stall_ > 0) {
      --stall_;
      return Idle(timeout);  // a timeout, though messages wait
    }
    if (reset_after_ >= 0 && sent_ == reset_after_) {
      reset_after_ = -1;
      ev.kind = DeliveryEvent::Kind::kReset;
      ev.reason = "simulated reset";
      ev.cause = ResetCause::kConsumerGap;
      return ev;
    }
    const SimBucket::Record* r = NextRecord();
    if (r == nullptr) return Idle(timeout);
    ev.kind = DeliveryEvent::Kind::kMessage;
    ev.message = r->message;
    delivered_ = r->message.seq;
    ++sent_;
    ev.message.pending = Pending();
    return ev;
  }

 private:
  // A timeout, after waiting it out on the bucket's idle clock, if any.
  DeliveryEvent Idle(std::chrono::milliseconds timeout) {
    if (Clock* clock = bucket_.idle_clock()) clock->SleepFor(timeout, std::stop_token());
    return DeliveryEvent{};
  }

  bool Matches(const SimBucket::Record& r) const {
    return r.retained && (!bucket_.server_filters() || scope_.Contains(r.message.key));
  }

  // The state-sync messages first (still retained), then the tail.
  const SimBucket::Record* NextRecord() {
    const auto& log = bucket_.log();
    while (sync_pos_ < sync_.size()) {
      const auto& r = log[sync_[sync_pos_++] - 1];
      if (r.retained) return &r;
    }
    uint64_t from = std::max(from_seq_, delivered_ + 1);
    if (bucket_.rollup_skips() && sync_pos_ >= sync_.size()) {
      // nats-server < 2.9.12: a purge stored after this delivery opened
      // moved it forward to the purge, over whatever it had not sent yet.
      for (uint64_t seq = log.size(); seq > std::max(from, opened_at_); --seq) {
        const auto& r = log[seq - 1];
        if (r.message.op == Op::kPurge && Matches(r)) {
          from = seq;
          break;
        }
      }
    }
    // Opened on a server the source has since left: its copy stopped there.
    const uint64_t end = bucket_.moves() != moves_at_open_
                             ? std::min<uint64_t>(log.size(), bucket_.moved_at_seq())
                             : log.size();
    for (uint64_t seq = from; seq <= end; ++seq) {
      if (Matches(log[seq - 1])) return &log[seq - 1];
    }
    return nullptr;
  }

  // 1 when anything is left to deliver, else 0 (the watcher only reads it
  // as a hint); with a lagging counter, 0 while up to lag_pending() more
  // messages are still to come.
  uint64_t Pending() const {
    const auto& log = bucket_.log();
    uint64_t left = 0;
    const uint64_t enough = static_cast<uint64_t>(bucket_.lag_pending()) + 1;
    for (size_t i = sync_pos_; i < sync_.size() && left < enough; ++i) {
      if (log[sync_[i] - 1].retained) ++left;
    }
    for (uint64_t seq = std::max(from_seq_, delivered_ + 1); seq <= log.size() && left < enough;
         ++seq) {
      if (Matches(log[seq - 1])) ++left;
    }
    return left >= enough ? 1 : 0;
  }

  uint64_t opened_at_;  // the stream's last sequence when the delivery opened
  int moves_at_open_;   // the bucket's server moves when it opened
  const SimBucket& bucket_;
  std::vector<uint64_t> sync_;
  size_t sync_pos_ = 0;
  uint64_t from_seq_;
  Scope scope_;
  int reset_after_;
  int stall_;
  int sent_ = 0;
  uint64_t delivered_ = 0;
};

}  // namespace

SimBucket::SimBucket(std::string name) : name_(std::move(name)) { Recreate(); }

void SimBucket::Recreate() {
  ++generation_;
  created_ = "2026-01-01T00:00:0" + std::to_string(generation_) + "Z";
  next_seq_ = 1;
  first_seq_ = 1;
  log_.clear();
  // The truth restarts too: the old bucket is gone.
  writes_.clear();
}

void SimBucket::RollBackTo(uint64_t seq) {
  if (seq >= next_seq_ - 1) return;
  log_.resize(seq);  // log_[i] holds sequence i + 1
  next_seq_ = seq + 1;
  std::erase_if(writes_, [seq](const BucketMessage& m) { return m.seq > seq; });
}

uint64_t SimBucket::Append(const std::string& key, Op op, const std::string& value) {
  BucketMessage m;
  m.key = key;
  m.op = op;
  m.value = op == Op::kPut ? value : "";
  m.seq = next_seq_++;
  if (op == Op::kPurge || history_one_) {
    for (auto& r : log_) {
      if (r.message.key == key) r.retained = false;
    }
  }
  m.time_ns = NowNs();
  log_.push_back(Record{m, true, now_s_});
  writes_.push_back(m);
  EnforceLimits();
  return m.seq;
}

namespace {
constexpr int64_t kEpochNs = int64_t{1767225600} * 1000000000;  // 2026-01-01
}  // namespace

int64_t SimBucket::NowNs() const {
  if (time_clock_ != nullptr) {
    return kEpochNs + std::chrono::duration_cast<std::chrono::nanoseconds>(time_clock_->Now() -
                                                                           time_clock_start_)
                          .count();
  }
  return kEpochNs + now_s_ * 1000000000 + now_extra_ns_;
}

void SimBucket::set_time_clock(Clock* clock) {
  // Time goes on from where it stands.
  const int64_t now = NowNs();
  time_clock_ = clock;
  if (clock != nullptr) {
    time_clock_start_ = clock->Now() - std::chrono::nanoseconds(now - kEpochNs);
  }
}

void SimBucket::SetMessageTtl(std::chrono::milliseconds marker_ttl) {
  allow_msg_ttl_ = true;
  marker_ttl_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(marker_ttl).count();
}

uint64_t SimBucket::PutWithTtl(const std::string& key, const std::string& value,
                               std::chrono::milliseconds ttl) {
  const uint64_t seq = Append(key, Op::kPut, value);
  log_[seq - 1].expires_ns = log_[seq - 1].message.time_ns +
                             std::chrono::duration_cast<std::chrono::nanoseconds>(ttl).count();
  // As a delivery reads it from the Nats-TTL header (whole seconds there).
  log_[seq - 1].message.expires_ns = log_[seq - 1].expires_ns;
  writes_.back().expires_ns = log_[seq - 1].expires_ns;
  return seq;
}

uint64_t SimBucket::PutNeverExpires(const std::string& key, const std::string& value) {
  const uint64_t seq = Append(key, Op::kPut, value);
  log_[seq - 1].never = true;
  return seq;
}

void SimBucket::ExpireTtls() {
  const int64_t now = NowNs();
  std::vector<std::pair<int64_t, std::string>> emptied;  // (when, key)
  for (size_t i = 0; i < log_.size(); ++i) {
    Record& r = log_[i];
    if (r.expired || r.expires_ns == 0 || r.expires_ns + ttl_lag_ns_ > now) continue;
    r.expired = true;
    const bool evicted = !r.retained;
    r.retained = false;
    if (r.marker) continue;  // an expired marker leaves nothing
    // An evicted message's key is still live in the truth (an eviction is
    // no delete) until a later write or its TTL. Where markers announce
    // expiries the server writes none for a message it no longer holds,
    // and the truth keeps the key (what a fold can know).
    if (evicted && marker_ttl_ns_ > 0) continue;
    // A later write of the key that has not expired is its truth.
    bool later = false;
    for (size_t j = i + 1; j < log_.size() && !later; ++j) {
      later = !log_[j].expired && log_[j].message.key == r.message.key;
    }
    if (later) continue;
    // The key's state after the expiry is as of its newest sequence (an
    // earlier expiry may have uncovered this one): the fold's revision.
    uint64_t revision = r.message.seq;
    for (size_t j = i + 1; j < log_.size(); ++j) {
      if (log_[j].message.key == r.message.key) revision = log_[j].message.seq;
    }
    // With history, the key's previous message (if retained) is its value
    // again, and no marker is written (nats-server writes one only for a
    // subject's last message).
    const Record* previous = nullptr;
    for (size_t j = i; j-- > 0 && !evicted;) {
      if (log_[j].retained && log_[j].message.key == r.message.key) {
        previous = &log_[j];
        break;
      }
    }
    if (previous != nullptr) {
      BucketMessage back = previous->message;
      back.seq = revision;
      writes_.push_back(back);
      continue;
    }
    if (marker_ttl_ns_ <= 0) {
      // No marker: the key leaves the truth at its revision, unannounced.
      BucketMessage gone = r.message;
      gone.seq = revision;
      gone.op = Op::kDelete;
      gone.value.clear();
      gone.expires_ns = 0;
      writes_.push_back(gone);
      continue;
    }
    emptied.emplace_back(r.expires_ns, r.message.key);
  }
  std::sort(emptied.begin(), emptied.end());
  for (const auto& [when, key] : emptied) {
    BucketMessage m;
    m.key = key;
    m.op = Op::kDelete;
    m.seq = next_seq_++;
    m.time_ns = when;
    Record r{m, true, now_s_};
    r.marker = true;
    r.expires_ns = when + marker_ttl_ns_;
    r.retained = r.expires_ns > now;
    log_.push_back(r);
    writes_.push_back(m);  // a delete the server declares: the truth loses the key
  }
}

void SimBucket::EnforceLimits() {
  if (max_msgs_ <= 0 && max_bytes_ <= 0 && max_age_s_ <= 0) return;
  // From the newest back: once a limit is passed, everything older goes.
  uint64_t retained = 0, bytes = 0;
  bool evicting = false;
  for (auto it = log_.rbegin(); it != log_.rend(); ++it) {
    if (!it->retained) continue;
    ++retained;
    bytes += it->message.key.size() + it->message.value.size() + 16;
    evicting = evicting || (max_msgs_ > 0 && retained > static_cast<uint64_t>(max_msgs_)) ||
               (max_bytes_ > 0 && bytes > static_cast<uint64_t>(max_bytes_));
    // Age is per message (a `never` message stays, the ones behind it go).
    const bool aged = max_age_s_ > 0 && now_s_ - it->stored_at > max_age_s_ && !it->never;
    if (evicting || aged) it->retained = false;
  }
  uint64_t first = next_seq_;
  for (const auto& r : log_) {
    if (r.retained) {
      first = r.message.seq;
      break;
    }
  }
  // Limits evict from the head: nothing below the first retained stays.
  first_seq_ = std::max(first_seq_, first);
}

void SimBucket::SetMaxBytes(int64_t max_bytes) { max_bytes_ = max_bytes; }

void SimBucket::SetMaxAge(std::chrono::seconds max_age) { max_age_s_ = max_age.count(); }

void SimBucket::AdvanceTime(std::chrono::seconds by) { AdvanceTime(std::chrono::milliseconds(by)); }

void SimBucket::AdvanceTime(std::chrono::milliseconds by) {
  now_extra_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(by).count();
  now_s_ += now_extra_ns_ / 1000000000;
  now_extra_ns_ %= 1000000000;
  if (time_clock_ != nullptr) time_clock_->SleepFor(by, std::stop_token());
  EnforceLimits();
  ExpireTtls();
}

uint64_t SimBucket::LimitMarker(const std::string& key) {
  // Delivered as the delete it means; the truth loses the key as well.
  return Append(key, Op::kDelete, "");
}

void SimBucket::SetMaxMsgs(int64_t max_msgs) { max_msgs_ = max_msgs; }

void SimBucket::PurgeMarker(uint64_t seq) {
  // KV PurgeDeletes purges the subject: the marker and all before it.
  const BucketMessage& marker = log_[seq - 1].message;
  if (marker.op == Op::kPut) return;
  for (auto& r : log_) {
    if (r.message.key == marker.key && r.message.seq <= seq) r.retained = false;
  }
}

uint64_t SimBucket::Put(const std::string& key, const std::string& value) {
  return Append(key, Op::kPut, value);
}
uint64_t SimBucket::Delete(const std::string& key) { return Append(key, Op::kDelete, ""); }
uint64_t SimBucket::Purge(const std::string& key) { return Append(key, Op::kPurge, ""); }

void SimBucket::EvictThrough(uint64_t seq) {
  for (auto& r : log_) {
    if (r.message.seq <= seq) r.retained = false;
  }
  first_seq_ = std::max(first_seq_, seq + 1);
}

void SimBucket::ApplyTail(uint64_t cursor, const Scope& scope,
                          std::map<std::string, Entry>* entries) const {
  for (const auto& r : log_) {
    const BucketMessage& m = r.message;
    if (!r.retained || m.seq <= cursor || !scope.Contains(m.key)) continue;
    auto it = entries->find(m.key);
    if (it != entries->end() && it->second.revision >= m.seq) continue;
    (*entries)[m.key] = Entry{m.seq, m.op != Op::kPut, m.op == Op::kPut ? m.value : "",
                              m.op == Op::kPut ? m.expires_ns : 0};
  }
  std::erase_if(*entries, [](const auto& kv) { return kv.second.deleted; });
}

std::map<std::string, Entry> SimBucket::Truth(const Scope& scope, uint64_t through) const {
  std::map<std::string, Entry> truth;
  for (const auto& w : writes_) {
    if (w.seq > through || !scope.Contains(w.key)) continue;
    if (w.op == Op::kPut) {
      truth[w.key] = Entry{w.seq, false, w.value, w.expires_ns};
    } else {
      truth.erase(w.key);
    }
  }
  return truth;
}

StatusOr<StreamState> SimBucket::ReadStream() {
  if (on_read_stream) on_read_stream();
  if (before_request) before_request("read_stream");
  ExpireTtls();
  if (unavailable_calls_ > 0) {
    --unavailable_calls_;
    return Status::Unavailable("simulated outage");
  }
  StreamState s;
  s.created = created_;
  // Like JetStream: the first retained sequence, or last + 1 when empty.
  s.first_seq = next_seq_;
  for (const auto& r : log_) {
    if (r.retained) {
      s.first_seq = r.message.seq;
      break;
    }
  }
  s.first_seq = std::max(s.first_seq, first_seq_);
  s.last_seq = next_seq_ - 1;
  if (stale_reads_ > 0) {
    --stale_reads_;
    s.last_seq = std::min(s.last_seq, stale_last_seq_);
    s.first_seq = std::min(s.first_seq, s.last_seq + 1);
  }
  if (ahead_reads_ > 0) {
    --ahead_reads_;
    s.first_seq = std::max(s.first_seq, std::min(ahead_first_seq_, s.last_seq + 1));
  }
  s.discard_new = false;
  s.max_msgs = max_msgs_;
  s.max_bytes = max_bytes_;
  s.max_age_ns = max_age_s_ * 1000 * 1000 * 1000;
  s.history = history_one_ ? 1 : 64;
  s.allow_msg_ttl = allow_msg_ttl_;
  s.marker_ttl_ns = marker_ttl_ns_;
  s.server_time_ns = NowNs();
  return s;
}

StatusOr<std::optional<uint64_t>> SimBucket::FirstRetainedInScope(const Scope& scope,
                                                                  uint64_t from_seq) {
  if (before_request) before_request("first_retained_in_scope");
  if (unavailable_calls_ > 0) {
    --unavailable_calls_;
    return Status::Unavailable("simulated outage");
  }
  for (uint64_t seq = std::max<uint64_t>(from_seq, 1); seq <= log_.size(); ++seq) {
    const auto& r = log_[seq - 1];
    if (r.retained && (!server_filters_ || scope.Contains(r.message.key)))
      return std::optional<uint64_t>(seq);
  }
  return std::optional<uint64_t>();
}

StatusOr<std::unique_ptr<Delivery>> SimBucket::Open(const DeliveryStart& start,
                                                    const Scope& scope) {
  if (before_request) before_request("open");
  if (unavailable_calls_ > 0) {
    --unavailable_calls_;
    return Status::Unavailable("simulated outage");
  }
  ++opened_;
  if (std::exchange(move_on_open_, false)) MoveServer();
  std::vector<uint64_t> sync;
  uint64_t from = 1;
  if (!start.from_seq) {
    std::map<std::string, uint64_t> last;
    for (const auto& r : log_) {
      // Without server filters the state sync covers the whole bucket too.
      if (r.retained && (!server_filters_ || scope.Contains(r.message.key))) {
        last[r.message.key] = r.message.seq;
      }
    }
    for (const auto& [k, seq] : last) sync.push_back(seq);
    std::sort(sync.begin(), sync.end());
    from = next_seq_;  // the tail after the sync
  } else {
    from = *start.from_seq;  // below first_seq is clamped silently, as NATS does
  }
  auto d = std::make_unique<SimDelivery>(*this, std::move(sync), from, scope, reset_after_, stall_);
  reset_after_ = -1;
  if (on_open) on_open();
  return std::unique_ptr<Delivery>(std::move(d));
}

StatusOr<std::optional<BucketMessage>> SimBucket::LastOfKey(const std::string& key) {
  if (before_request) before_request("last_of_key");
  if (before_last_of_key) before_last_of_key();
  if (last_of_key_failures_ > 0) {
    --last_of_key_failures_;
    return Status::Unavailable("simulated outage (LastOfKey)");
  }
  for (auto it = log_.rbegin(); it != log_.rend(); ++it) {
    if (it->retained && it->message.key == key) {
      return std::optional<BucketMessage>(it->message);
    }
  }
  return std::optional<BucketMessage>();
}

Status SimBucket::ListKeys(const Scope& scope,
                           const std::function<Status(std::string_view, uint64_t)>& fn,
                           uint64_t* last_seq) {
  if (before_request) before_request("list_keys");
  *last_seq = next_seq_ - 1;
  if (during_listing) during_listing();
  // Like a last-per-subject consumer snapshot raced by writes: a key whose
  // old message was superseded after last_seq was read is not named.
  std::map<std::string, const BucketMessage*> last;
  for (const auto& r : log_) {
    if (r.retained && r.message.seq <= *last_seq && scope.Contains(r.message.key)) {
      last[r.message.key] = &r.message;
    }
  }
  for (const auto& [k, m] : last) {
    if (m->op == Op::kPut) KVFOLD_RETURN_IF_ERROR(fn(k, m->seq));
  }
  return Status::OK();
}

}  // namespace kvfold::sim
