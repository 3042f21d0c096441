#include "repair/listed_keys.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>

#include "core/mutation.h"
#include "store/info_log.h"

namespace kvfold::repair {

namespace fs = std::filesystem;

ListedKeys::ListedKeys(size_t memory_keys, std::string spill_dir)
    : memory_keys_(memory_keys), spill_parent_(std::move(spill_dir)) {}

ListedKeys::~ListedKeys() {
  db_.reset();
  if (!spill_path_.empty()) {
    std::error_code ec;
    fs::remove_all(spill_path_, ec);
  }
}

Status ListedKeys::Spill() {
  std::error_code ec;
  const fs::path parent =
      spill_parent_.empty() ? fs::temp_directory_path(ec) : fs::path(spill_parent_);
  std::string tmpl = (parent / "kvfold-listing-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    return Status::IOError("cannot create a directory under " + parent.string() +
                           " to spill a key listing");
  }
  spill_path_ = tmpl;
  rocksdb::Options o;
  o.create_if_missing = true;
  o.info_log = store::NewFoldInfoLog(spill_path_);  // survives a full disk, as the fold's
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(o, spill_path_, &raw);
  if (!s.ok())
    return Status::IOError("opening a key-listing spill at " + spill_path_ + ": " + s.ToString());
  db_.reset(raw);
  rocksdb::WriteBatch batch;
  for (const auto& k : memory_) batch.Put(k, "");
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;  // scratch data: a crash re-runs the whole repair
  s = db_->Write(wo, &batch);
  if (!s.ok()) return Status::IOError("spilling a key listing: " + s.ToString());
  memory_.clear();
  return Status::OK();
}

Status ListedKeys::Add(std::string_view key) {
  if (db_ == nullptr) {
    if (memory_.emplace(key).second) ++count_;
    if (memory_.size() > memory_keys_) return Spill();
    return Status::OK();
  }
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  auto s = db_->Put(wo, rocksdb::Slice(key.data(), key.size()), "");
  if (!s.ok()) return Status::IOError("spilling a key listing: " + s.ToString());
  ++count_;  // a listing names each key once
  return Status::OK();
}

StatusOr<bool> ListedKeys::Contains(std::string_view key) {
  if (db_ == nullptr) return memory_.find(key) != memory_.end();
  std::string v;
  auto s = db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key.data(), key.size()), &v);
  if (s.IsNotFound()) return false;
  if (!s.ok()) return Status::IOError("reading a spilled key listing: " + s.ToString());
  return true;
}

StatusOr<bool> LiveInBucket(BucketSource& source, ListedKeys& listed, const std::string& key,
                            uint64_t listing_revision, uint64_t* delete_revision,
                            std::optional<uint64_t> retained_from) {
  *delete_revision = listing_revision;
  auto named = listed.Contains(key);
  if (!named.ok()) return named.status();
  if (*named) return true;
  auto last = source.LastOfKey(key);
  if (!last.ok()) return last.status();
  if (*last && (*last)->op == Op::kPut && !KVFOLD_MUTANT("repair-skip-last-check")) return true;
  if (*last && !KVFOLD_MUTANT("repair-delete-at-listing-revision")) {
    *delete_revision = std::max(listing_revision, (*last)->seq);
  }
  if (retained_from && !KVFOLD_MUTANT("restore-skip-recheck-after-last")) {
    // Read after the last message: retention only moves forward, so if it
    // still holds everything from `retained_from`, so it did then.
    auto state = source.ReadStream();
    if (!state.ok()) return state.status();
    if (state->first_seq > *retained_from) {
      return Status::FailedPrecondition("retention passed sequence " +
                                        std::to_string(*retained_from) + " (first retained " +
                                        std::to_string(state->first_seq) + ") while key " + key +
                                        " was checked: its absence proves nothing");
    }
  }
  return false;
}

}  // namespace kvfold::repair
