// The changes received but not yet committed, and the cursor they reach.
//
// Batch and cursor rules live here, free of I/O, so the watch loop, the
// simulator and the tests share them:
//  - a message folds only if it is newer than the key's current entry (the
//    pending one if any, else the fold's), so replays after a reconnect or
//    a crash are no-ops and a key's revision never goes backward;
//  - the cursor only moves forward;
//  - a failed commit keeps everything for the next attempt.

#ifndef KVFOLD_CORE_PENDING_BATCH_H_
#define KVFOLD_CORE_PENDING_BATCH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "kvfold/bucket.h"
#include "kvfold/fold.h"

namespace kvfold::core {

// The entry `message` makes for a key whose current entry is `current`
// (nullopt when the key was never seen), or nullopt when the message is not
// newer and must be skipped. With `value_from` (the message's own value),
// the value is moved from there instead of copied.
std::optional<Entry> FoldMessage(const BucketMessage& message, const std::optional<Entry>& current,
                                 std::string* value_from = nullptr);

class PendingBatch {
 public:
  // The pending entry for `key`, or nullptr.
  const Entry* Find(const std::string& key) const;

  // `known_new`: the caller has proven the key absent from the fold and
  // from everything handed to it before (WatchLoop's first state sync into
  // an empty fold). While every entry pending is known new, the commit
  // states its count change and is marked FoldCommit::new_keys: the store
  // skips reading the keys and may ingest them as a table file. Without
  // it the key's entry before is unknown, and the store reads it.
  void Put(std::string key, Entry entry, bool known_new = false);

  // A put by a caller that read the key's entry before (`before`: the one
  // in flight to the store, else the fold's; nullopt: none): while every
  // entry pending came with its entry before or is known new, the commit
  // states its count change (FoldCommit::counts) and the store reads
  // nothing. A key already pending counts from its pending entry.
  void PutOver(std::string key, Entry entry, const std::optional<Entry>& before);

  // While on, a commit whose count change is not known goes uncounted
  // (FoldCommit::uncounted: the store skips reading each key's entry
  // before, and the fold's counts wait for a Fold::Recount). The watch
  // turns it on for a catch-up that rewrites a large share of the fold.
  // Stays as set until set again. Default: off.
  void set_uncounted(bool on) { uncounted_ = on; }
  bool uncounted() const { return uncounted_; }

  // Moves the cursor to `seq` if that is forward, with `anchor_ns` as its
  // anchor (FoldMeta::cursor_time_ns); at the same cursor, a later anchor
  // replaces the one pending.
  void AdvanceTo(uint64_t seq, int64_t anchor_ns = 0);

  // Metadata (bucket, scope, stream identity) to write with the next
  // commit. Set only metadata fields: entries and cursor belong to Put and
  // AdvanceTo.
  FoldCommit& meta() { return pending_; }
  const FoldCommit& meta() const { return pending_; }

  size_t changes() const { return pending_.entries.size(); }
  // Something is pending and every entry is known new (see Put): the
  // batch is a run of a first state sync.
  bool AllKnownNew() const { return all_known_new_ && !pending_.entries.empty(); }
  // The keys and values pending, in bytes: what the batch holds in memory,
  // give or take the per-entry overhead.
  size_t bytes() const { return bytes_; }
  // What the batch holds in memory with its bookkeeping: the bytes and,
  // per entry, about what a map node and its strings take beside them.
  size_t footprint() const { return bytes_ + changes() * kEntryOverhead; }
  static constexpr size_t kEntryOverhead = 128;
  std::optional<uint64_t> cursor() const { return cursor_; }
  int64_t cursor_time_ns() const { return cursor_time_ns_; }

  // True when a commit would change the fold given its `committed` cursor.
  bool HasWork(std::optional<uint64_t> committed) const;

  // A copy of the commit for everything pending; does not consume it.
  FoldCommit ToCommit() const {
    FoldCommit commit = pending_;
    Complete(&commit);
    return commit;
  }

  // After a successful commit. The cursor stays: later commits carry it on.
  void Clear() {
    pending_ = FoldCommit();
    bytes_ = 0;
    counts_ = FoldCommit::CountChange();
    all_known_new_ = true;
    counts_known_ = true;
  }

  // Hands the commit for everything pending over (to be written while more
  // arrives), without copying it, leaving an empty batch that keeps the
  // cursor.
  FoldCommit Release() {
    FoldCommit out = std::move(pending_);
    Complete(&out);
    Clear();
    return out;
  }

  // Keeps the map nodes of a released batch that was written (or given
  // back and taken back): new entries take them and their key buffers
  // instead of allocating their own. Only a batch of at most
  // kMaxSpareNodes entries and kMaxSpareValueBytes of values (a run of a
  // first sync holds about 18,000 entries), and one at a time.
  void Recycle(FoldCommit done);
  // Frees the nodes kept (nothing is pending: an idle watch keeps none).
  void DropSpare() { spare_.clear(); }
  static constexpr size_t kMaxSpareNodes = 32768;
  static constexpr size_t kMaxSpareValueBytes = size_t{8} << 20;
  size_t spare_nodes() const { return spare_.size(); }

  // Puts a released batch whose commit failed back under what is pending:
  // everything pending is newer, so a key or metadata field set in both
  // keeps the pending one, and the cursor the higher.
  void TakeBack(FoldCommit older);

 private:
  // Adds the cursor, and the count change when every entry's is known.
  void Complete(FoldCommit* commit) const;

  // Puts `entry` as the key's pending one; returns the entry it replaced,
  // if the key was pending.
  std::optional<Entry> Insert(std::string key, Entry entry);

  FoldCommit pending_;                  // entries and metadata, never a cursor
  std::map<std::string, Entry> spare_;  // nodes to use again (Recycle)
  FoldCommit::CountChange counts_;      // of the entries pending, while counts_known_
  bool all_known_new_ = true;
  bool counts_known_ = true;
  bool uncounted_ = false;
  size_t bytes_ = 0;  // of pending_.entries' keys and values
  std::optional<uint64_t> cursor_;
  int64_t cursor_time_ns_ = 0;
};

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_PENDING_BATCH_H_
