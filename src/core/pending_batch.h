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
// newer and must be skipped.
std::optional<Entry> FoldMessage(const BucketMessage& message,
                                 const std::optional<Entry>& current);

class PendingBatch {
 public:
  // The pending entry for `key`, or nullptr.
  const Entry* Find(const std::string& key) const;

  void Put(const std::string& key, Entry entry);

  // Moves the cursor to `seq` if that is forward.
  void AdvanceTo(uint64_t seq);

  // Metadata (bucket, scope, stream identity) to write with the next commit.
  // Its entries and cursor fields are ignored.
  FoldCommit& meta() { return meta_; }

  size_t changes() const { return entries_.size(); }
  std::optional<uint64_t> cursor() const { return cursor_; }

  // True when a commit would change the fold given its `committed` cursor.
  bool HasWork(std::optional<uint64_t> committed) const;

  // The commit for everything pending.
  FoldCommit ToCommit() const;

  // After a successful commit.
  void Clear() {
    entries_.clear();
    meta_ = FoldCommit();
  }

 private:
  std::map<std::string, Entry> entries_;
  FoldCommit meta_;
  std::optional<uint64_t> cursor_;
};

}  // namespace kvfold::core

#endif  // KVFOLD_CORE_PENDING_BATCH_H_
