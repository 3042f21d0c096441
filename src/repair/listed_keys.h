// The keys a bucket listing named, for membership tests during a repair.
// Holds up to `memory_keys` keys in memory, then spills all of them to a
// temporary RocksDB database, so a listing of any size costs bounded RAM.

#ifndef KVFOLD_REPAIR_LISTED_KEYS_H_
#define KVFOLD_REPAIR_LISTED_KEYS_H_

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "kvfold/bucket.h"
#include "kvfold/status.h"

namespace rocksdb {
class DB;
}

namespace kvfold::repair {

class ListedKeys {
 public:
  // `spill_dir`: where the temporary database goes ("" = the system's
  // temporary directory); removed when this object is destroyed.
  ListedKeys(size_t memory_keys, std::string spill_dir);
  ~ListedKeys();
  ListedKeys(const ListedKeys&) = delete;
  ListedKeys& operator=(const ListedKeys&) = delete;

  Status Add(std::string_view key);
  StatusOr<bool> Contains(std::string_view key);
  size_t size() const { return count_; }
  bool spilled() const { return db_ != nullptr; }

 private:
  Status Spill();

  size_t memory_keys_;
  std::string spill_parent_;
  std::string spill_path_;
  std::set<std::string, std::less<>> memory_;
  std::unique_ptr<rocksdb::DB> db_;
  size_t count_ = 0;
};

// Whether `key`, which a live fold entry holds, is live in the bucket: named
// by the listing, or (a listing races writes: a key rewritten while it ran
// may be missing) its latest message is a put. When it is not, the revision
// its delete takes is at least `listing_revision`, and at least the
// revision of the delete marker the stream still holds.
//
// Where retention evicts (a restore), "no message" can also mean "evicted
// while we looked": with `retained_from` set, the stream is read again after
// the last message was, and unless it still retains every sequence from
// `retained_from` (the artifact's cursor + 1) the answer proves nothing and
// the result is FailedPrecondition (the restore tries again, with a newer
// artifact if this one has fallen out of retention).
StatusOr<bool> LiveInBucket(BucketSource& source, ListedKeys& listed, const std::string& key,
                            uint64_t listing_revision, uint64_t* delete_revision,
                            std::optional<uint64_t> retained_from = std::nullopt);

}  // namespace kvfold::repair

#endif  // KVFOLD_REPAIR_LISTED_KEYS_H_
