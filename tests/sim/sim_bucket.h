// A simulated KV bucket: a deterministic BucketSource that behaves like a
// JetStream KV stream where it matters to the watcher: sequences, ordered
// delivery from a sequence with the silent clamp, state sync, eviction,
// purge roll-ups, resets and a recreated stream. The watcher under test is
// the product's own code.

#ifndef KVFOLD_TESTS_SIM_SIM_BUCKET_H_
#define KVFOLD_TESTS_SIM_SIM_BUCKET_H_

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kvfold/bucket.h"
#include "kvfold/clock.h"
#include "kvfold/fold.h"

namespace kvfold::sim {

class SimBucket final : public BucketSource {
 public:
  explicit SimBucket(std::string name = "sim");

  // Writes; each returns the new message's sequence.
  uint64_t Put(const std::string& key, const std::string& value);
  uint64_t Delete(const std::string& key);
  uint64_t Purge(const std::string& key);  // also rolls up the key's history
  // A nats-server 2.11 limit marker (Nats-Marker-Reason, no KV-Operation):
  // the key's value aged out. Delivered as a delete.
  uint64_t LimitMarker(const std::string& key);

  // nats-server 2.11+ per-message TTL. With a marker TTL > 0 the bucket
  // allows TTLs and writes limit markers: an expiry that empties a key
  // appends a marker (delivered as a delete; the truth loses the key),
  // stored when the expiry happened and itself removed `marker_ttl` later,
  // leaving nothing. 0: TTLs allowed, no markers (keys vanish silently).
  void SetMessageTtl(std::chrono::milliseconds marker_ttl);
  // A put removed from the stream `ttl` after it was stored.
  uint64_t PutWithTtl(const std::string& key, const std::string& value,
                      std::chrono::milliseconds ttl);
  // A put with `Nats-TTL: never`: exempt from max_age (nats-server skips it
  // in expireMsgs and ages out the messages behind it), not from volume.
  uint64_t PutNeverExpires(const std::string& key, const std::string& value);
  // The bucket's clock (ReadStream's server time, message times, TTLs)
  // follows `clock` from now on, and AdvanceTime sleeps it: a watcher on
  // the same clock sees time pass as the server does. Null: only
  // AdvanceTime moves it.
  void set_time_clock(Clock* clock);
  // Server time now, ns since the Unix epoch.
  int64_t NowNs() const;

  // Retention removes every message with sequence <= seq.
  void EvictThrough(uint64_t seq);
  // Retention config as ReadStream reports it. With `max_msgs` > 0 (and
  // discard old) every write evicts from the head down to max_msgs
  // retained messages, as JetStream's limits do.
  void SetMaxMsgs(int64_t max_msgs);
  // The same by size (key + value + 16 bytes a message) and by age: a
  // message older than `max_age` on the bucket's own clock, which only
  // AdvanceTime moves, is evicted.
  void SetMaxBytes(int64_t max_bytes);
  void SetMaxAge(std::chrono::seconds max_age);
  void AdvanceTime(std::chrono::seconds by);
  void AdvanceTime(std::chrono::milliseconds by);
  // History 1: a write removes the key's older messages (supersession, not
  // eviction: current values stay).
  void SetHistoryOne(bool on) { history_one_ = on; }
  // The server removes a message whose TTL passed only this much later
  // (its expiry timer lags the deadline).
  void SetTtlLag(std::chrono::milliseconds lag) {
    ttl_lag_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(lag).count();
  }
  // Removes a delete marker and the key's messages before it, as KV
  // PurgeDeletes does: a delete the stream no longer shows.
  void PurgeMarker(uint64_t seq);
  // Messages reported in `pending` lag by this many: with n > 0 a delivery
  // says 0 pending although up to n messages are still to come (nats-server
  // 2.10+ updates num_pending asynchronously; a cluster replica lags).
  void LagPending(int n) { lag_pending_ = n; }
  // nats-server before 2.9.12: storing a purge (a roll-up) moves every open
  // delivery that is behind forward to it, skipping what it had not sent.
  void SetRollupSkips(bool on) { rollup_skips_ = on; }
  bool rollup_skips() const { return rollup_skips_; }
  // Deletes and recreates the stream: new identity, sequences restart.
  void Recreate();
  // The stream restored from a backup taken at `seq`: the same identity
  // (created time), the messages after `seq` gone, the next write at
  // `seq` + 1 again. The truth loses those writes too.
  void RollBackTo(uint64_t seq);

  // With server filters the delivery sends only keys in scope (nats-server
  // filters); without, it sends everything (2.9 multi-prefix fallback).
  void set_server_filters(bool on) { server_filters_ = on; }
  // The next opened delivery reports a reset after `n` messages.
  void ResetNextDeliveryAfter(int n) { reset_after_ = n; }
  // Each delivery opened from now on first answers `n` timeouts although
  // messages are waiting: messages in flight that have not arrived yet.
  void StallDeliveries(int n) { stall_ = n; }
  // A delivery with nothing to send (or stalled) waits out its timeout on
  // `clock` (SleepFor) instead of answering at once: with an instant-sleep clock
  // the watcher's linger and probe timers run out without spinning on a
  // core, as they would while a real delivery blocks. Null: answer at once.
  void set_idle_clock(Clock* clock) { idle_clock_ = clock; }
  Clock* idle_clock() const { return idle_clock_; }
  // Runs right after each delivery is opened (to race retention with it).
  std::function<void()> on_open;
  // Runs at the start of each ReadStream: time passing between the
  // watcher's reads (writes that churn the head).
  std::function<void()> on_read_stream;
  // Runs at the start of every request (after on_read_stream for a
  // ReadStream), named: "read_stream", "open", "first_retained_in_scope",
  // "last_of_key", "list_keys". A write or an eviction can so land between
  // any two requests the watch makes (between a probe's stream read and its
  // store search, say).
  std::function<void(std::string_view request)> before_request;
  // Makes ReadStream/Open answer Unavailable `n` times.
  void FailNextCalls(int n) { unavailable_calls_ = n; }
  // The next `reads` ReadStream calls answer as a replica that lags: a
  // head no later than `last_seq` (same stream, same identity).
  void ReportStaleHead(int reads, uint64_t last_seq) {
    stale_reads_ = reads;
    stale_last_seq_ = last_seq;
  }

  // The next `reads` ReadStream calls answer as a server that already
  // dropped the messages before `first_seq` (another server's view).
  void ReportFirstSeq(int reads, uint64_t first_seq) {
    ahead_reads_ = reads;
    ahead_first_seq_ = first_seq;
  }
  // The next Open counts as made on another server, after a move:
  // TakeMoveNotice then says so once.
  void MoveOnNextOpen() { move_on_open_ = true; }
  // A move now (call it from on_read_stream: that read's answer comes from
  // the new server). Deliveries opened before it stay on the old server,
  // whose copy stops here: they send nothing stored after.
  void MoveServer() {
    move_notice_ = "moved to another simulated server";
    ++moves_;
    moved_at_seq_ = last_seq();
  }
  int moves() const { return moves_; }
  uint64_t moved_at_seq() const { return moved_at_seq_; }
  // How often the watch reported a lagging view (NoteLaggingView).
  int lagging_views_noted() const { return lagging_noted_; }

  int deliveries_opened() const { return opened_; }
  uint64_t last_seq() const { return next_seq_ - 1; }
  // The stream's identity, without ReadStream's side effects.
  const std::string& created() const { return created_; }

  // The cursor's meaning (SPEC §1): folds the retained messages after
  // `cursor` in `scope` over `entries` (a fold's entries, tombstones
  // included) by the revision rule, then drops the tombstones: the live
  // entries a fold at `cursor` plus the stream's tail come to.
  void ApplyTail(uint64_t cursor, const Scope& scope, std::map<std::string, Entry>* entries) const;

  // Every write minus every real delete, in `scope`, for sequences <= `through`
  // (independent of retention).
  std::map<std::string, Entry> Truth(const Scope& scope, uint64_t through = UINT64_MAX) const;

  const std::string& bucket() const override { return name_; }
  StatusOr<StreamState> ReadStream() override;
  StatusOr<std::unique_ptr<Delivery>> Open(const DeliveryStart& start, const Scope& scope) override;
  StatusOr<std::optional<uint64_t>> FirstRetainedInScope(const Scope& scope,
                                                         uint64_t from_seq) override;
  std::string TakeMoveNotice() override { return std::exchange(move_notice_, std::string()); }
  void NoteLaggingView() override { ++lagging_noted_; }
  // Runs at the start of each LastOfKey (retention racing the read).
  std::function<void()> before_last_of_key;
  // Makes the next `n` LastOfKey calls answer Unavailable (after
  // before_last_of_key has run).
  void FailNextLastOfKey(int n) { last_of_key_failures_ = n; }
  StatusOr<std::optional<BucketMessage>> LastOfKey(const std::string& key) override;
  // Runs inside each ListKeys, after the listing's last_seq was read and
  // before keys are named (writes racing the listing).
  std::function<void()> during_listing;
  Status ListKeys(const Scope& scope, const std::function<Status(std::string_view, uint64_t)>& fn,
                  uint64_t* last_seq) override;

  // For the delivery.
  struct Record {
    BucketMessage message;
    bool retained = true;
    int64_t stored_at = 0;   // seconds on the bucket's clock
    int64_t expires_ns = 0;  // per-message TTL: removed at this time; 0 never
    bool marker = false;     // a limit marker
    bool never = false;      // Nats-TTL: never (exempt from max_age)
    bool expired = false;    // its TTL passed (whether retained then or evicted before)
  };
  const std::vector<Record>& log() const { return log_; }
  bool server_filters() const { return server_filters_; }
  int lag_pending() const { return lag_pending_; }

 private:
  uint64_t Append(const std::string& key, Op op, const std::string& value);
  // Evicts from the head until the count, size and age limits hold.
  void EnforceLimits();
  // Removes messages whose TTL passed, writing limit markers where that
  // empties a key.
  void ExpireTtls();

  std::string name_;
  std::string created_;
  int generation_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t first_seq_ = 1;
  std::vector<Record> log_;            // current stream, by sequence
  std::vector<BucketMessage> writes_;  // every write ever, for the truth
  bool server_filters_ = true;
  bool history_one_ = false;
  int64_t ttl_lag_ns_ = 0;
  bool rollup_skips_ = false;
  int64_t max_msgs_ = -1;
  int64_t max_bytes_ = -1;
  int64_t max_age_s_ = 0;
  int64_t now_s_ = 0;
  int64_t now_extra_ns_ = 0;  // sub-second AdvanceTime
  bool allow_msg_ttl_ = false;
  int64_t marker_ttl_ns_ = 0;
  Clock* time_clock_ = nullptr;
  Clock::TimePoint time_clock_start_;
  int lag_pending_ = 0;
  int reset_after_ = -1;
  int stale_reads_ = 0;
  uint64_t stale_last_seq_ = 0;
  int ahead_reads_ = 0;
  uint64_t ahead_first_seq_ = 0;
  bool move_on_open_ = false;
  std::string move_notice_;
  int moves_ = 0;
  uint64_t moved_at_seq_ = 0;
  int lagging_noted_ = 0;
  Clock* idle_clock_ = nullptr;
  int stall_ = 0;
  int unavailable_calls_ = 0;
  int last_of_key_failures_ = 0;
  int opened_ = 0;
};

}  // namespace kvfold::sim

#endif  // KVFOLD_TESTS_SIM_SIM_BUCKET_H_
