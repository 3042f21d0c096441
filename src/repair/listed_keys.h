// The keys a bucket listing named, for membership tests during a repair.
// Holds up to `memory_keys` keys in memory, then spills all of them to a
// temporary RocksDB database, so a listing of any size costs bounded RAM.

#ifndef KVFOLD_REPAIR_LISTED_KEYS_H_
#define KVFOLD_REPAIR_LISTED_KEYS_H_

#include <memory>
#include <set>
#include <string>
#include <string_view>

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

}  // namespace kvfold::repair

#endif  // KVFOLD_REPAIR_LISTED_KEYS_H_
