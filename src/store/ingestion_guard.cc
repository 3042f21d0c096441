#include "store/ingestion_guard.h"

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include <mutex>
#include <set>
#include <string>

#include "core/mutation.h"

namespace kvfold::store {

struct IngestionGuard::State {
  std::mutex mu;
  bool ingesting = false;
  std::set<std::string> linked;  // or copied, by the running ingestion
};

namespace {

class GuardFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  GuardFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base,
                  std::shared_ptr<IngestionGuard::State> state)
      : FileSystemWrapper(base), state_(std::move(state)) {}
  const char* Name() const override { return "KvfoldIngestionGuard"; }

  // Where a link fails (another file system, none supported), RocksDB
  // copies the file instead: a file created during the ingestion is one.
  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* d) override {
    {
      std::lock_guard lock(state_->mu);
      if (state_->ingesting) state_->linked.insert(f);
    }
    return target()->NewWritableFile(f, o, r, d);
  }
  rocksdb::IOStatus LinkFile(const std::string& from, const std::string& to,
                             const rocksdb::IOOptions& o, rocksdb::IODebugContext* d) override {
    rocksdb::IOStatus s = target()->LinkFile(from, to, o, d);
    std::lock_guard lock(state_->mu);
    if (state_->ingesting) state_->linked.insert(to);
    return s;
  }
  rocksdb::IOStatus DeleteFile(const std::string& f, const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* d) override {
    {
      std::lock_guard lock(state_->mu);
      if (state_->ingesting && state_->linked.count(f) &&
          !KVFOLD_MUTANT("ingest-failure-deletes-links")) {
        return rocksdb::IOStatus::OK();  // kept: the next open decides
      }
    }
    return target()->DeleteFile(f, o, d);
  }

 private:
  std::shared_ptr<IngestionGuard::State> state_;
};

// The base Env (its clock, threads and everything else) with the guard's
// file system.
class GuardEnv final : public rocksdb::EnvWrapper {
 public:
  GuardEnv(rocksdb::Env* base, std::shared_ptr<rocksdb::FileSystem> fs) : EnvWrapper(base) {
    file_system_ = std::move(fs);
  }
  const char* Name() const override { return "KvfoldIngestionGuardEnv"; }
};

}  // namespace

IngestionGuard::IngestionGuard(rocksdb::Env* base) : state_(std::make_shared<State>()) {
  if (base == nullptr) base = rocksdb::Env::Default();
  env_ = std::make_unique<GuardEnv>(
      base, std::make_shared<GuardFileSystem>(base->GetFileSystem(), state_));
}

IngestionGuard::~IngestionGuard() = default;

rocksdb::Env* IngestionGuard::env() { return env_.get(); }

IngestionGuard::Ingesting::Ingesting(IngestionGuard& guard) : guard_(guard) {
  std::lock_guard lock(guard_.state_->mu);
  guard_.state_->ingesting = true;
  guard_.state_->linked.clear();
}

IngestionGuard::Ingesting::~Ingesting() {
  std::lock_guard lock(guard_.state_->mu);
  guard_.state_->ingesting = false;
  guard_.state_->linked.clear();
}

}  // namespace kvfold::store
