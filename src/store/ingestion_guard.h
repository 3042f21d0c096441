// Keeps the table files an ingestion links into a fold when the ingestion
// fails. Why: RocksDB deletes them on any failure, also when what failed
// was the sync of the manifest record naming them, a record that may still
// reach the disk (a failed fsync does not say the write did not land). The
// next open would then find the fold naming table files that are gone and
// refuse it. With the files kept, the next open decides: the ones the
// manifest names stay, the others RocksDB removes as obsolete.

#ifndef KVFOLD_STORE_INGESTION_GUARD_H_
#define KVFOLD_STORE_INGESTION_GUARD_H_

#include <memory>

namespace rocksdb {
class Env;
}

namespace kvfold::store {

class IngestionGuard {
 public:
  // Wraps `base` (the default Env when nullptr), which must outlive it.
  explicit IngestionGuard(rocksdb::Env* base);
  ~IngestionGuard();
  IngestionGuard(const IngestionGuard&) = delete;
  IngestionGuard& operator=(const IngestionGuard&) = delete;

  // The Env to open the fold's database on; it outlives the database.
  rocksdb::Env* env();

  // While one is alive, a file linked in is never deleted. One ingestion
  // at a time (the fold's one writer).
  class Ingesting {
   public:
    explicit Ingesting(IngestionGuard& guard);
    ~Ingesting();
    Ingesting(const Ingesting&) = delete;
    Ingesting& operator=(const Ingesting&) = delete;

   private:
    IngestionGuard& guard_;
  };

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::unique_ptr<rocksdb::Env> env_;
};

}  // namespace kvfold::store

#endif  // KVFOLD_STORE_INGESTION_GUARD_H_
