// The RocksDB fold backend. Layout: docs/fold-format.md.

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <shared_mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "core/meta_merge.h"
#include "core/mutation.h"
#include "kvfold/fold.h"
#include "store/info_log.h"
#include "store/ingestion_guard.h"
#include "store/record_codec.h"
#include "store/rocks_fold_env.h"

namespace kvfold {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kFormatName = "format";
// Format 2 adds max_revision, which every writer must keep: a build that
// only knows format 1 refuses a format-2 fold rather than writing entries
// above a max_revision it does not update. Format 3 adds deadlines to
// entry records (flags bit 1): a build that only knows format 2 refuses
// such a fold at open instead of failing on the first record it reads.
constexpr std::string_view kFormatValue = "kvfold-fold-3";
// Format 4 is format 3 while the key counts are stale (counts_stale): a
// build that does not know stale counts would count on top of them, and a
// delete could take them below zero and stop its commits, so it refuses
// such a fold at open. A recount or a clear marks the fold format 3 again.
constexpr std::string_view kFormatStaleCounts = "kvfold-fold-4";
constexpr std::string_view kFormatV2 = "kvfold-fold-2";
constexpr std::string_view kFormatV1 = "kvfold-fold-1";
constexpr std::string_view kCursorName = "cursor";
constexpr std::string_view kBucketName = "bucket";
constexpr std::string_view kScopeName = "scope";
constexpr std::string_view kCreatedName = "stream_created";
constexpr std::string_view kLiveName = "live_keys";
constexpr std::string_view kEntriesName = "entries";
constexpr std::string_view kSeedingName = "seeding";
constexpr std::string_view kEvictionName = "eviction_observed";
constexpr std::string_view kLastRepairName = "last_repair";
constexpr std::string_view kMaxRevisionName = "max_revision";
constexpr std::string_view kCursorTimeName = "cursor_time_ns";
constexpr std::string_view kMarkerTtlName = "marker_ttl_ns";
constexpr std::string_view kCountsStaleName = "counts_stale";

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  std::string msg = std::string(what) + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(msg);
  if (s.IsNotFound()) return Status::NotFound(msg);
  return Status::IOError(msg);
}

class RocksFold final : public Fold {
 public:
  RocksFold(std::unique_ptr<store::IngestionGuard> guard, std::unique_ptr<rocksdb::DB> db,
            std::string path, FoldOptions options, std::string secondary_dir, bool format_v1)
      : guard_(std::move(guard)),
        db_(std::move(db)),
        path_(std::move(path)),
        options_(options),
        secondary_dir_(std::move(secondary_dir)),
        format_v1_(format_v1) {}

  ~RocksFold() override {
    if (!options_.read_only && write_error_.empty()) {
      // A clean close leaves nothing to replay: the next open (a resume)
      // costs the same whatever the fold's size. Best effort: the WAL
      // still holds everything if this fails. Not after a failed write:
      // RocksDB then holds a background error, and a flush would only fail
      // after a back-off of a second.
      rocksdb::FlushOptions flush;
      flush.wait = true;
      (void)db_->Flush(flush);
    }
    db_.reset();
    if (!secondary_dir_.empty()) {
      std::error_code ec;
      fs::remove_all(secondary_dir_, ec);
    }
  }

  std::optional<uint64_t> IntProperty(const std::string& name) {
    uint64_t value = 0;
    if (!db_->GetIntProperty(name, &value)) return std::nullopt;
    return value;
  }

  Status Get(std::string_view key, Entry* out) override {
    std::string bytes;
    auto s = db_->Get(rocksdb::ReadOptions(), store::EntryStoreKey(key), &bytes);
    if (s.IsNotFound()) return Status::NotFound(std::string(key));
    if (!s.ok()) return FromRocks(s, "reading key " + std::string(key));
    return store::DecodeEntry(bytes, out);
  }

  Status Scan(std::string_view prefix, bool include_tombstones,
              const std::function<bool(std::string_view, const Entry&)>& fn) override {
    KVFOLD_RETURN_IF_ERROR(CatchUp());
    return ScanAt(rocksdb::ReadOptions(), prefix, include_tombstones, fn);
  }

  Status ScanFrom(std::string_view start_key, bool include_tombstones,
                  const std::function<bool(std::string_view, const Entry&)>& fn) override {
    KVFOLD_RETURN_IF_ERROR(CatchUp());
    return ScanEntries(rocksdb::ReadOptions(), store::EntryStoreKey(start_key),
                       store::EntryStoreKey(""), include_tombstones, fn);
  }

  StatusOr<std::unique_ptr<FoldSnapshot>> Snapshot() override;

  StatusOr<std::unique_ptr<FoldLoader>> NewLoader() override;

  // The loader's Finish: `files` hold the entries staged (`loaded` of them,
  // `live` live, revisions up to `max_revision`), in key order.
  Status FinishLoad(const FoldCommit& commit, const std::vector<std::string>& files,
                    uint64_t loaded, uint64_t live, uint64_t max_revision);

  // Where a loader stages its table files: one at a time (the DB lock keeps
  // writers apart), emptied when a loader starts and ends.
  std::string StagingDir() const { return path_ + "/kvfold-load"; }
  Status ClearStaging();

  Status ScanAt(const rocksdb::ReadOptions& ro, std::string_view prefix, bool include_tombstones,
                const std::function<bool(std::string_view, const Entry&)>& fn) {
    const std::string start = store::EntryStoreKey(prefix);
    return ScanEntries(ro, start, start, include_tombstones, fn);
  }

  // Entries from store key `seek` on, while their store keys start with
  // `within`, in key order.
  Status ScanEntries(const rocksdb::ReadOptions& ro, const std::string& seek,
                     const std::string& within, bool include_tombstones,
                     const std::function<bool(std::string_view, const Entry&)>& fn) {
    rocksdb::ReadOptions scanning = ro;
    // A fold opened for scans (an export, a seed's check) reads each block
    // once: putting it in the cache would only evict the one before.
    scanning.fill_cache = ro.fill_cache && options_.keep_table_filters_in_memory;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(scanning));
    Entry entry;
    for (it->Seek(seek); it->Valid(); it->Next()) {
      const rocksdb::Slice k = it->key();
      if (!k.starts_with(within)) break;
      KVFOLD_RETURN_IF_ERROR(
          store::DecodeEntry(std::string_view(it->value().data(), it->value().size()), &entry));
      if (entry.deleted && !include_tombstones) continue;
      if (!fn(std::string_view(k.data() + 1, k.size() - 1), entry)) break;
    }
    if (!it->status().ok()) return FromRocks(it->status(), "scanning the fold");
    return Status::OK();
  }

  StatusOr<FoldMeta> ReadMeta() override {
    KVFOLD_RETURN_IF_ERROR(CatchUp());
    rocksdb::ReadOptions ro;
    const rocksdb::Snapshot* snap = db_->GetSnapshot();
    ro.snapshot = snap;
    auto meta = ReadMetaAt(ro);
    db_->ReleaseSnapshot(snap);
    return meta;
  }

  Status Recount() override {
    if (options_.read_only) {
      return Status::FailedPrecondition("fold " + path_ + " is open read-only");
    }
    if (!write_error_.empty()) return Stopped();
    auto current = ReadMetaAt(rocksdb::ReadOptions());
    if (!current.ok()) return current.status();
    if (!current->counts_stale) return Status::OK();
    FoldMeta meta = *current;
    KVFOLD_RETURN_IF_ERROR(CountEntries(&meta.live_keys, &meta.entries));
    meta.counts_stale = false;
    rocksdb::WriteBatch batch;
    PutChangedMeta(*current, meta, /*counts_changed=*/true, &batch);
    return Write(&batch, options_.sync);
  }

  // Counts every entry and the live ones among them, the key range split
  // at table file boundaries over up to two threads: a recount runs once a
  // catch-up is done, when the server has stopped sending.
  Status CountEntries(uint64_t* live, uint64_t* entries);

  Status Commit(const FoldCommit& commit) override {
    if (options_.read_only) {
      return Status::FailedPrecondition("fold " + path_ + " is open read-only");
    }
    if (!write_error_.empty()) return Stopped();
    auto current = ReadMetaAt(rocksdb::ReadOptions());
    if (!current.ok()) return current.status();
    const FoldMeta& before = *current;
    FoldMeta meta = before;
    KVFOLD_RETURN_IF_ERROR(core::MergeCommitMeta(commit, &meta));
    // Where nothing can be staged (a staging directory that cannot be
    // emptied), the run goes in as any batch: nothing was applied yet.
    const bool ingest = commit.new_keys || (commit.bulk && commit.counts && !commit.clear_entries);
    if (ingest && !commit.entries.empty() && StartStaging().ok()) {
      return CommitByIngestion(commit, before, meta);
    }
    rocksdb::WriteBatch batch;
    if (commit.clear_entries) {
      const std::string begin(1, store::kEntryTag), end(1, static_cast<char>(store::kEntryTag + 1));
      auto s = batch.DeleteRange(begin, end);
      if (!s.ok()) return FromRocks(s, "clearing fold " + path_);
      meta.live_keys = meta.entries = meta.max_revision = 0;
      meta.counts_stale = false;
    } else if (commit.uncounted && !commit.entries.empty() && meta.entries > 0) {
      meta.counts_stale = true;  // with this commit's entries, in one write
    }
    KVFOLD_RETURN_IF_ERROR(PutEntries(commit, &meta, &batch));
    if (commit.counts && !meta.counts_stale) {
      KVFOLD_RETURN_IF_ERROR(store::ApplyCountChange(*commit.counts, &meta));
    }
    if (KVFOLD_MUTANT("fold-uncounted-unmarked")) {  // the planted bug: skipped, not recorded
      meta.counts_stale = before.counts_stale;
    }
    const bool cursor_moved = meta.cursor != before.cursor;
    if (cursor_moved && KVFOLD_MUTANT("fold-cursor-own-write")) {
      rocksdb::WriteBatch first;  // the planted bug: the cursor ahead of its entries
      first.Put(store::MetaStoreKey(kCursorName), store::EncodeU64(*meta.cursor));
      KVFOLD_RETURN_IF_ERROR(Write(&first, options_.sync));
    } else if (cursor_moved) {
      batch.Put(store::MetaStoreKey(kCursorName), store::EncodeU64(*meta.cursor));
    }
    PutChangedMeta(before, meta, commit.clear_entries || !commit.entries.empty() || commit.counts,
                   &batch);
    return Write(&batch, options_.sync && !KVFOLD_MUTANT("fold-skip-wal-sync"));
  }

  // A commit of new keys (a run of a first state sync) or a bulk one (a
  // restore's chunk): its entries in one table file and its metadata in
  // another, linked in by one ingestion, which RocksDB records in one
  // manifest write: the cursor lands with its run or not at all, and the
  // entries skip the log and the memtables. A held key's new record is
  // newer than the old (a file that overlaps gets a sequence number above
  // everything before it).
  Status CommitByIngestion(const FoldCommit& commit, const FoldMeta& before, FoldMeta meta) {
    if (!meta.counts_stale) KVFOLD_RETURN_IF_ERROR(store::ApplyCountChange(*commit.counts, &meta));
    const std::string file = StagingDir() + "/run-" + std::to_string(++staged_) + ".sst";
    const rocksdb::Options options = db_->GetOptions();
    rocksdb::SstFileWriter writer(rocksdb::EnvOptions(options), options);
    auto s = writer.Open(file);
    // One pass, with one key and one record buffer for the whole run.
    std::string store_key(1, store::kEntryTag), record;
    for (auto it = commit.entries.begin(); s.ok() && it != commit.entries.end(); ++it) {
      meta.max_revision = std::max(meta.max_revision, it->second.revision);
      store_key.resize(1);
      store_key.append(it->first);
      store::EncodeEntryTo(it->second, &record);
      s = writer.Put(store_key, record);
    }
    if (s.ok()) s = writer.Finish();  // synced
    if (!s.ok()) return FromRocks(s, "staging a run of fold " + path_);
    rocksdb::WriteBatch meta_batch;
    PutMetaAndCursor(before, meta, /*counts_changed=*/true, &meta_batch);
    if (KVFOLD_MUTANT("fold-ingest-cursor-apart")) {  // the planted bug: cursor before its run
      KVFOLD_RETURN_IF_ERROR(Write(&meta_batch, options_.sync));
      meta_batch.Clear();
    }
    return IngestStaged({file}, meta_batch);
  }

  // Links `files` (staged table files of entries, in key order) and the
  // puts and deletes of `meta_batch` in by one ingestion; a failure stops
  // the fold as a failed write does. The staging directory is emptied.
  Status IngestStaged(std::vector<std::string> files, const rocksdb::WriteBatch& meta_batch);

  // Empties the staging directory and makes sure it exists. Before every
  // run: a staged name left behind (a delete that failed after the last
  // ingestion) is a hard link to a table of the fold, which writing a new
  // file of that name would overwrite.
  Status StartStaging() {
    KVFOLD_RETURN_IF_ERROR(ClearStaging());
    auto s = db_->GetEnv()->CreateDirIfMissing(StagingDir());
    if (!s.ok()) return FromRocks(s, "creating " + StagingDir());
    return Status::OK();
  }

  // Puts the commit's entries into `batch`, counting them into `meta`:
  // from the entries they replace, read in one batched read (keys come
  // sorted; bloom filters answer for new keys), unless the commit brings
  // its count change or cleared the fold, or the counts are stale (an
  // uncounted commit: Recount makes them exact).
  Status PutEntries(const FoldCommit& commit, FoldMeta* meta, rocksdb::WriteBatch* batch) {
    if (commit.entries.empty()) return Status::OK();
    std::vector<std::string> store_keys;
    store_keys.reserve(commit.entries.size());
    for (const auto& kv : commit.entries) store_keys.push_back(store::EntryStoreKey(kv.first));
    std::vector<rocksdb::Slice> slices(store_keys.begin(), store_keys.end());
    std::vector<rocksdb::PinnableSlice> before(store_keys.size());
    std::vector<rocksdb::Status> got(store_keys.size());
    const bool count = !meta->counts_stale;
    const bool read_before = count && !commit.clear_entries && !commit.counts;
    if (read_before) {
      db_->MultiGet(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), slices.size(),
                    slices.data(), before.data(), got.data(), /*sorted_input=*/true);
    }
    size_t i = 0;
    Entry previous;
    std::string record;
    for (const auto& [key, entry] : commit.entries) {
      if (read_before) {
        const rocksdb::Status& g = got[i];
        if (!g.ok() && !g.IsNotFound()) return FromRocks(g, "reading key " + key);
        if (g.ok()) {
          KVFOLD_RETURN_IF_ERROR(
              store::DecodeEntry(std::string_view(before[i].data(), before[i].size()), &previous));
        }
        store::CountReplacement(g.ok() ? &previous : nullptr, entry, meta);
      } else if (count && !commit.counts) {
        store::CountReplacement(nullptr, entry, meta);  // after a clear every key is new
      }
      if (!KVFOLD_MUTANT("fold-max-revision-stale")) {
        meta->max_revision = std::max(meta->max_revision, entry.revision);
      }
      store::EncodeEntryTo(entry, &record);
      batch->Put(slices[i], record);
      ++i;
    }
    return Status::OK();
  }

  // PutChangedMeta with the cursor, where it moved: the metadata of an
  // ingestion, which goes in one table file of its own.
  static void PutMetaAndCursor(const FoldMeta& before, const FoldMeta& meta, bool counts_changed,
                               rocksdb::WriteBatch* batch) {
    if (meta.cursor != before.cursor) {
      batch->Put(store::MetaStoreKey(kCursorName), store::EncodeU64(*meta.cursor));
    }
    PutChangedMeta(before, meta, counts_changed, batch);
  }

  // Puts what the merge changed into `batch` (the cursor aside); the rest
  // stays as it is. The counts when `counts_changed`.
  static void PutChangedMeta(const FoldMeta& before, const FoldMeta& meta, bool counts_changed,
                             rocksdb::WriteBatch* batch) {
    auto put = [batch](std::string_view name, const std::string& v) {
      batch->Put(store::MetaStoreKey(name), v);
    };
    auto put_or_delete = [&](std::string_view name, bool present, const std::string& v) {
      if (present) {
        put(name, v);
      } else {
        batch->Delete(store::MetaStoreKey(name));
      }
    };
    if (meta.cursor_time_ns != before.cursor_time_ns) {
      put_or_delete(kCursorTimeName, meta.cursor_time_ns != 0,
                    store::EncodeU64(static_cast<uint64_t>(meta.cursor_time_ns)));
    }
    if (meta.marker_ttl_ns != before.marker_ttl_ns) {
      put(kMarkerTtlName, store::EncodeU64(static_cast<uint64_t>(meta.marker_ttl_ns)));
    }
    if (meta.bucket != before.bucket) put(kBucketName, meta.bucket);
    if (meta.scope != before.scope && meta.scope) {
      put(kScopeName, store::EncodeStringList(*meta.scope));
    }
    if (meta.stream_created != before.stream_created) put(kCreatedName, meta.stream_created);
    if (meta.seeding != before.seeding) {
      put_or_delete(kSeedingName, !meta.seeding.empty(), meta.seeding);
    }
    // The memo's value is its cause ("1", before causes: unknown).
    if (meta.eviction_observed != before.eviction_observed ||
        meta.eviction_cause != before.eviction_cause) {
      put_or_delete(
          kEvictionName, meta.eviction_observed,
          meta.eviction_cause.empty() ? std::string(kEvictionCauseUnknown) : meta.eviction_cause);
    }
    if (meta.last_repair != before.last_repair) put(kLastRepairName, meta.last_repair);
    if (meta.counts_stale != before.counts_stale) {
      put_or_delete(kCountsStaleName, meta.counts_stale, "1");
      put(kFormatName, std::string(meta.counts_stale ? kFormatStaleCounts : kFormatValue));
    }
    if (counts_changed) {
      put(kLiveName, store::EncodeU64(meta.live_keys));
      put(kEntriesName, store::EncodeU64(meta.entries));
      put(kMaxRevisionName, store::EncodeU64(meta.max_revision));
    }
  }

  // A failed write stops the fold (fail-stop): no later commit and no
  // flush on close. Linux reports a failed fsync once and marks the pages
  // it could not write clean, so a retry on this handle could succeed on
  // top of a log whose tail never reached the disk, and acknowledge
  // changes a power cut then takes away. A reopen recovers from what is
  // durable instead.
  Status Write(rocksdb::WriteBatch* batch, bool sync) {
    rocksdb::WriteOptions wo;
    wo.sync = sync;
    auto s = db_->Write(wo, batch);
    if (!s.ok()) {
      write_error_ = s.ToString();
      return Stopped();
    }
    return Status::OK();
  }

  Status Stopped() const {
    return Status::IOError(
        "committing to fold " + path_ + ": " + write_error_ +
        "; the fold takes no more writes until it is reopened (after a failed write or fsync "
        "only a restart, which recovers from what is durable, can go on safely)");
  }

  StatusOr<FoldMeta> ReadMetaAt(const rocksdb::ReadOptions& ro);
  rocksdb::DB* db() { return db_.get(); }

 private:
  Status CatchUp() {
    if (!options_.read_only) return Status::OK();
    auto s = db_->TryCatchUpWithPrimary();
    if (!s.ok()) return FromRocks(s, "following fold " + path_);
    return Status::OK();
  }

  // Under db_ (declared first: it outlives the database): null for a
  // read-only follower, which ingests nothing.
  std::unique_ptr<store::IngestionGuard> guard_;
  std::unique_ptr<rocksdb::DB> db_;
  std::string path_;
  FoldOptions options_;
  std::string secondary_dir_;  // removed on close
  // A format-1 fold read as it is: whatever max_revision it holds, a build
  // that did not keep it may have written after.
  bool format_v1_;
  std::string write_error_;      // the failed write that stopped the fold; empty: none
  uint64_t staged_ = 0;          // table files staged: each gets a name of its own
  std::shared_mutex ingesting_;  // held by an ingestion; a snapshot waits for it
};

// Holds a RocksDB snapshot: entries, cursor and metadata as of one sequence.
// A secondary (read-only) instance has no snapshots, but it changes only
// when it catches up with the primary, which a FoldSnapshot never asks for,
// so its plain view is already consistent.
class RocksFoldSnapshot final : public FoldSnapshot {
 public:
  RocksFoldSnapshot(RocksFold& fold, const rocksdb::Snapshot* snap) : fold_(fold), snap_(snap) {
    ro_.snapshot = snap_;
  }
  ~RocksFoldSnapshot() override {
    if (snap_ != nullptr) fold_.db()->ReleaseSnapshot(snap_);
  }
  Status Init() {
    auto m = fold_.ReadMetaAt(ro_);
    if (!m.ok()) return m.status();
    meta_ = std::move(m).value();
    return Status::OK();
  }
  const FoldMeta& meta() const override { return meta_; }
  Status Scan(std::string_view prefix, bool include_tombstones,
              const std::function<bool(std::string_view, const Entry&)>& fn) override {
    return fold_.ScanAt(ro_, prefix, include_tombstones, fn);
  }

 private:
  RocksFold& fold_;
  const rocksdb::Snapshot* snap_;
  rocksdb::ReadOptions ro_;
  FoldMeta meta_;
};

StatusOr<std::unique_ptr<FoldSnapshot>> RocksFold::Snapshot() {
  KVFOLD_RETURN_IF_ERROR(CatchUp());
  const rocksdb::Snapshot* taken = nullptr;
  if (!options_.read_only) {
    std::shared_lock not_ingesting(ingesting_);
    taken = db_->GetSnapshot();
  }
  auto snap = std::make_unique<RocksFoldSnapshot>(*this, taken);
  KVFOLD_RETURN_IF_ERROR(snap->Init());
  return std::unique_ptr<FoldSnapshot>(std::move(snap));
}

// Stages entries in table files of about the size compactions write, so
// the fold they land in looks like one compacted to the bottom.
class RocksFoldLoader final : public FoldLoader {
 public:
  explicit RocksFoldLoader(RocksFold& fold)
      : fold_(fold), options_(fold.db()->GetOptions()), dir_(fold.StagingDir()) {}
  ~RocksFoldLoader() override {
    writer_.reset();  // an unfinished table file is abandoned
    (void)fold_.ClearStaging();
  }

  Status Add(std::string_view key, const Entry& entry) override {
    if (finished_) return Status::FailedPrecondition("the fold loader has finished");
    if (loaded_ > 0 && key <= last_key_) {
      return Status::InvalidArgument("fold loader keys must ascend: \"" + std::string(key) +
                                     "\" after \"" + last_key_ + "\"");
    }
    if (writer_ && writer_->FileSize() >= options_.target_file_size_base) {
      KVFOLD_RETURN_IF_ERROR(CloseFile());
    }
    if (!writer_) KVFOLD_RETURN_IF_ERROR(OpenFile());
    auto s = writer_->Put(store::EntryStoreKey(key), store::EncodeEntry(entry));
    if (!s.ok()) return FromRocks(s, "staging key " + std::string(key));
    last_key_.assign(key);
    ++loaded_;
    if (!entry.deleted) ++live_;
    max_revision_ = std::max(max_revision_, entry.revision);
    if (KVFOLD_MUTANT("loader-ingest-early")) {  // the planted bug: visible before Finish
      KVFOLD_RETURN_IF_ERROR(CloseFile());
      auto in =
          fold_.db()->IngestExternalFile({files_.back()}, rocksdb::IngestExternalFileOptions());
      if (!in.ok()) return FromRocks(in, "ingesting");
      files_.pop_back();
    }
    return Status::OK();
  }

  Status Finish(const FoldCommit& commit) override {
    if (finished_) return Status::FailedPrecondition("the fold loader has finished");
    finished_ = true;
    if (writer_) KVFOLD_RETURN_IF_ERROR(CloseFile());
    KVFOLD_RETURN_IF_ERROR(fold_.FinishLoad(commit, files_, loaded_, live_, max_revision_));
    // Ingested files are hard links: the fold keeps its own.
    (void)fold_.ClearStaging();
    return Status::OK();
  }

 private:
  Status OpenFile() {
    char name[32];
    std::snprintf(name, sizeof(name), "/%06zu.sst", files_.size() + 1);
    open_ = dir_ + name;
    writer_ = std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(options_), options_);
    auto s = writer_->Open(open_);
    if (!s.ok()) return FromRocks(s, "staging " + open_);
    return Status::OK();
  }

  // Finishes (and syncs) the file being written.
  Status CloseFile() {
    auto s = writer_->Finish();
    writer_.reset();
    if (!s.ok()) return FromRocks(s, "staging " + open_);
    files_.push_back(open_);
    return Status::OK();
  }

  RocksFold& fold_;
  rocksdb::Options options_;
  std::string dir_;
  std::unique_ptr<rocksdb::SstFileWriter> writer_;
  std::string open_;  // the file writer_ writes
  std::vector<std::string> files_;
  std::string last_key_;
  uint64_t loaded_ = 0, live_ = 0, max_revision_ = 0;
  bool finished_ = false;
};

// The puts and deletes of a write batch, by key.
class SortedOps final : public rocksdb::WriteBatch::Handler {
 public:
  rocksdb::Status PutCF(uint32_t, const rocksdb::Slice& key, const rocksdb::Slice& value) override {
    ops[key.ToString()] = value.ToString();
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t, const rocksdb::Slice& key) override {
    ops[key.ToString()] = std::nullopt;
    return rocksdb::Status::OK();
  }
  std::map<std::string, std::optional<std::string>> ops;  // nullopt: a delete
};

Status RocksFold::ClearStaging() {
  rocksdb::Env* env = db_->GetEnv();
  const std::string dir = StagingDir();
  if (env->FileExists(dir).IsNotFound()) return Status::OK();
  std::vector<std::string> names;
  auto s = env->GetChildren(dir, &names);
  for (const auto& n : names) {
    if (s.ok() && n != "." && n != "..") s = env->DeleteFile(dir + "/" + n);
  }
  if (s.ok()) s = env->DeleteDir(dir);
  if (!s.ok()) return FromRocks(s, "clearing " + dir);
  return Status::OK();
}

StatusOr<std::unique_ptr<FoldLoader>> RocksFold::NewLoader() {
  if (options_.read_only) {
    return Status::FailedPrecondition("fold " + path_ + " is open read-only");
  }
  if (!write_error_.empty()) return Stopped();
  // What a loader killed midway staged.
  KVFOLD_RETURN_IF_ERROR(ClearStaging());
  auto s = db_->GetEnv()->CreateDirIfMissing(StagingDir());
  if (!s.ok()) return FromRocks(s, "creating " + StagingDir());
  return std::unique_ptr<FoldLoader>(new RocksFoldLoader(*this));
}

Status RocksFold::FinishLoad(const FoldCommit& commit, const std::vector<std::string>& files,
                             uint64_t loaded, uint64_t live, uint64_t max_revision) {
  if (!write_error_.empty()) return Stopped();
  if (!commit.entries.empty() || commit.clear_entries || commit.counts) {
    return Status::InvalidArgument(
        "a fold loader's commit brings no entries, clear_entries or counts of its own");
  }
  auto current = ReadMetaAt(rocksdb::ReadOptions());
  if (!current.ok()) return current.status();
  const FoldMeta& before = *current;
  if (before.entries != 0) {
    return Status::FailedPrecondition("a fold loader fills an empty fold; fold " + path_ +
                                      " holds " + std::to_string(before.entries) + " entries");
  }
  FoldMeta meta = before;
  KVFOLD_RETURN_IF_ERROR(core::MergeCommitMeta(commit, &meta));
  meta.live_keys = live;
  meta.entries = loaded;
  meta.max_revision = std::max(meta.max_revision, max_revision);
  rocksdb::WriteBatch batch;
  PutMetaAndCursor(before, meta, loaded > 0, &batch);
  if (files.empty()) return Write(&batch, options_.sync);
  return IngestStaged(files, batch);
}

Status RocksFold::CountEntries(uint64_t* live, uint64_t* entries) {
  const std::string begin(1, store::kEntryTag), end(1, static_cast<char>(store::kEntryTag + 1));
  // The middle of the table files' first keys: about half the entries on
  // each side (the catch-up's newest, in the memtable, fall anywhere).
  std::vector<std::string> firsts;
  std::vector<rocksdb::LiveFileMetaData> files;
  db_->GetLiveFilesMetaData(&files);
  for (const auto& f : files) {
    if (f.smallestkey > begin && f.smallestkey < end) firsts.push_back(f.smallestkey);
  }
  std::vector<std::string> bounds = {begin};
  if (firsts.size() >= 2) {
    std::nth_element(firsts.begin(), firsts.begin() + firsts.size() / 2, firsts.end());
    bounds.push_back(firsts[firsts.size() / 2]);
  }
  bounds.push_back(end);
  const rocksdb::Snapshot* snap = db_->GetSnapshot();
  struct Part {
    uint64_t live = 0, entries = 0;
    Status status;
  };
  std::vector<Part> parts(bounds.size() - 1);
  auto count = [&](size_t i) {
    rocksdb::ReadOptions ro;
    ro.snapshot = snap;
    ro.fill_cache = false;  // one pass: caching it would only evict the catch-up's blocks
    const rocksdb::Slice upper(bounds[i + 1]);
    ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    Part& p = parts[i];
    for (it->Seek(bounds[i]); it->Valid(); it->Next()) {
      bool deleted = false;
      p.status = store::DecodeTombstoneFlag(
          std::string_view(it->value().data(), it->value().size()), &deleted);
      if (!p.status.ok()) return;
      ++p.entries;
      if (!deleted || KVFOLD_MUTANT("fold-recount-tombstones-live")) ++p.live;
    }
    if (!it->status().ok()) p.status = FromRocks(it->status(), "recounting fold " + path_);
  };
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < parts.size(); ++i) helpers.emplace_back(count, i);
  count(0);
  for (auto& t : helpers) t.join();
  // A snapshot held on would make every later ingestion number its files.
  if (!KVFOLD_MUTANT("recount-keep-snapshot")) db_->ReleaseSnapshot(snap);
  *live = *entries = 0;
  for (const Part& p : parts) {
    KVFOLD_RETURN_IF_ERROR(p.status);
    *live += p.live;
    *entries += p.entries;
  }
  return Status::OK();
}

Status RocksFold::IngestStaged(std::vector<std::string> files,
                               const rocksdb::WriteBatch& meta_batch) {
  // The metadata goes in a table file of its own, after the entries' in
  // key order ('m' > 'e'), so one ingestion makes everything visible at
  // once: RocksDB records it in one manifest write.
  SortedOps sorted;
  auto s = meta_batch.Iterate(&sorted);
  if (!s.ok()) return FromRocks(s, "staging the metadata of fold " + path_);
  if (!sorted.ops.empty()) {
    const rocksdb::Options options = db_->GetOptions();
    rocksdb::SstFileWriter writer(rocksdb::EnvOptions(options), options);
    const std::string meta_file = StagingDir() + "/meta-" + std::to_string(++staged_) + ".sst";
    s = writer.Open(meta_file);
    for (const auto& [key, value] : sorted.ops) {
      if (s.ok()) s = value ? writer.Put(key, *value) : writer.Delete(key);
    }
    if (s.ok()) s = writer.Finish();
    if (!s.ok()) return FromRocks(s, "staging the metadata of fold " + path_);
    files.push_back(meta_file);
  }
  // RocksDB syncs an ingestion's manifest write whatever the fold's sync
  // option; a commit before it, in the log, is synced first, or a power
  // cut could keep the run without it (an older commit lost under a newer).
  if (!options_.sync && !KVFOLD_MUTANT("fold-ingest-before-log-synced")) {
    s = db_->SyncWAL();
    if (!s.ok()) {
      write_error_ = s.ToString();  // a failed fsync: stop, as Write does
      return Stopped();
    }
  }
  rocksdb::IngestExternalFileOptions ingest;
  ingest.move_files = true;           // hard links: the staged files are the fold's
  ingest.write_global_seqno = false;  // no write into a linked file
  {
    store::IngestionGuard::Ingesting ingesting(*guard_);
    // RocksDB gives a file that overlaps nothing sequence number 0 (every
    // snapshot sees it) unless a snapshot exists when it decides; one taken
    // while the manifest is written would then see the run's entries
    // without its cursor and counts (the metadata file, overlapping, gets
    // a number above it). Snapshots wait for the ingestion instead: one
    // held across it would make RocksDB number every file and rewrite them
    // all later to clear the numbers (20% more CPU in a first sync).
    std::unique_lock exclusive(ingesting_);
    s = db_->IngestExternalFile(files, ingest);
  }
  if (!s.ok()) {
    // As a failed write: stop (see Write).
    write_error_ = s.ToString();
    return Stopped();
  }
  // Ingested files are hard links: the fold keeps its own.
  (void)ClearStaging();
  return Status::OK();
}

StatusOr<FoldMeta> RocksFold::ReadMetaAt(const rocksdb::ReadOptions& ro) {
  FoldMeta meta;
  std::string v;
  auto read = [&](std::string_view name, bool* found) -> Status {
    auto s = db_->Get(ro, store::MetaStoreKey(name), &v);
    *found = s.ok();
    if (s.ok() || s.IsNotFound()) return Status::OK();
    return FromRocks(s, "reading fold metadata " + std::string(name));
  };
  bool found = false;
  KVFOLD_RETURN_IF_ERROR(read(kCursorName, &found));
  if (found) {
    uint64_t c = 0;
    KVFOLD_RETURN_IF_ERROR(store::DecodeU64(v, &c));
    meta.cursor = c;
  }
  KVFOLD_RETURN_IF_ERROR(read(kBucketName, &found));
  if (found) meta.bucket = v;
  KVFOLD_RETURN_IF_ERROR(read(kScopeName, &found));
  if (found) {
    std::vector<std::string> scope;
    KVFOLD_RETURN_IF_ERROR(store::DecodeStringList(v, &scope));
    meta.scope = std::move(scope);
  }
  KVFOLD_RETURN_IF_ERROR(read(kCreatedName, &found));
  if (found) meta.stream_created = v;
  KVFOLD_RETURN_IF_ERROR(read(kLiveName, &found));
  if (found) KVFOLD_RETURN_IF_ERROR(store::DecodeU64(v, &meta.live_keys));
  KVFOLD_RETURN_IF_ERROR(read(kEntriesName, &found));
  if (found) KVFOLD_RETURN_IF_ERROR(store::DecodeU64(v, &meta.entries));
  KVFOLD_RETURN_IF_ERROR(read(kSeedingName, &found));
  if (found) meta.seeding = v;
  KVFOLD_RETURN_IF_ERROR(read(kEvictionName, &found));
  meta.eviction_observed = found;
  if (found) meta.eviction_cause = v == "1" || v.empty() ? std::string(kEvictionCauseUnknown) : v;
  KVFOLD_RETURN_IF_ERROR(read(kLastRepairName, &found));
  if (found) meta.last_repair = v;
  KVFOLD_RETURN_IF_ERROR(read(kMaxRevisionName, &found));
  if (found && !format_v1_) KVFOLD_RETURN_IF_ERROR(store::DecodeU64(v, &meta.max_revision));
  KVFOLD_RETURN_IF_ERROR(read(kCursorTimeName, &found));
  if (found) {
    uint64_t t = 0;
    KVFOLD_RETURN_IF_ERROR(store::DecodeU64(v, &t));
    meta.cursor_time_ns = static_cast<int64_t>(t);
  }
  KVFOLD_RETURN_IF_ERROR(read(kMarkerTtlName, &found));
  if (found) {
    uint64_t t = 0;
    KVFOLD_RETURN_IF_ERROR(store::DecodeU64(v, &t));
    meta.marker_ttl_ns = static_cast<int64_t>(t);
  }
  KVFOLD_RETURN_IF_ERROR(read(kCountsStaleName, &found));
  meta.counts_stale = found;
  return meta;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// True when `dir` holds RocksDB's LOCK and otherwise only files RocksDB
// writes while creating a database before CURRENT exists: what a writer
// killed mid-creation leaves. Strict names, so a directory of someone's
// *.log files is never taken for one.
bool OnlyCreationLeftovers(const std::string& dir) {
  std::error_code ec;
  bool lock = false;
  bool only_log = true;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::string_view n = name;
    if (n.ends_with(".dbtmp")) n.remove_suffix(6);
    const bool numbered = [&] {
      for (std::string_view prefix : {"LOG.old.", "MANIFEST-", "OPTIONS-"}) {
        if (n.starts_with(prefix)) return AllDigits(n.substr(prefix.size()));
      }
      return n.ends_with(".log") && AllDigits(n.substr(0, n.size() - 4));
    }();
    lock = lock || name == "LOCK";
    // The info log is opened before RocksDB (store/info_log.h).
    only_log = only_log && (name == "LOG" || name == "LOG.old");
    const bool leftover = name == "LOCK" || name == "LOG" || name == "LOG.old" ||
                          name == "IDENTITY" || numbered || AllDigits(n);  // <number>.dbtmp
    if (!leftover || !e.is_regular_file(ec)) return false;
  }
  return !ec && (lock || only_log);
}

bool HasLz4() {
  const auto supported = rocksdb::GetSupportedCompressions();
  return std::find(supported.begin(), supported.end(), rocksdb::kLZ4Compression) != supported.end();
}

// Refuses a directory that holds files but no RocksDB database, so a typo
// in --fold never scribbles into an unrelated directory.
Status CheckDirectory(const std::string& path, const FoldOptions& options) {
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (!exists) {
    if (options.read_only || !options.create_if_missing) {
      return Status::NotFound("no fold at " + path + " (the directory does not exist)");
    }
    return Status::OK();
  }
  if (!fs::is_directory(path, ec)) {
    return Status::InvalidArgument(path + " is not a directory");
  }
  const bool has_db = fs::exists(fs::path(path) / "CURRENT", ec);
  if (has_db) return Status::OK();
  if (options.read_only) {
    return Status::NotFound("no fold at " + path + " (no RocksDB database in the directory)");
  }
  // A creation cut short is finished by the next writer; RocksDB's own
  // lock still keeps two writers apart.
  if (!fs::is_empty(path, ec) && !OnlyCreationLeftovers(path)) {
    return Status::FailedPrecondition(
        path +
        " is not empty and holds no fold; point --fold at an empty or "
        "new directory");
  }
  return Status::OK();
}

// Upgrades a format-1 fold: records max_revision from one scan of the
// entries, together with the new format marker, in one write.
Status UpgradeFromFormat1(rocksdb::DB* db, const std::string& path) {
  uint64_t max = 0;
  const std::string tag(1, store::kEntryTag);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  Entry entry;
  for (it->Seek(tag); it->Valid() && it->key().starts_with(tag); it->Next()) {
    KVFOLD_RETURN_IF_ERROR(
        store::DecodeEntry(std::string_view(it->value().data(), it->value().size()), &entry));
    max = std::max(max, entry.revision);
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scanning fold " + path);
  rocksdb::WriteBatch upgrade;
  upgrade.Put(store::MetaStoreKey(kMaxRevisionName), store::EncodeU64(max));
  upgrade.Put(store::MetaStoreKey(kFormatName), std::string(kFormatValue));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  auto s = db->Write(wo, &upgrade);
  if (!s.ok()) return FromRocks(s, "upgrading fold " + path + " to " + std::string(kFormatValue));
  return Status::OK();
}

// How many table files a writer keeps open. RocksDB's default (-1) opens
// every one of them at start: a 10M-key fold of some 600 files took 260 ms
// to open and 140 ms to close, for a resume that reads a hundred keys. A
// finite limit opens a file when it is first read and closes the least
// recently read beyond it; half the process's descriptors leaves the rest
// to the connection, the log and the caller.
int WriterTableFileLimit() {
  rlimit files{};
  uint64_t soft = 1024;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    soft = files.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(files.rlim_cur);
  }
  return static_cast<int>(std::clamp<uint64_t>(soft / 2, 64, 65536));
}

}  // namespace

std::optional<uint64_t> store::RocksIntProperty(Fold& fold, const std::string& name) {
  auto* rocks = dynamic_cast<RocksFold*>(&fold);
  if (rocks == nullptr) return std::nullopt;
  return rocks->IntProperty(name);
}

StatusOr<std::unique_ptr<Fold>> OpenRocksFold(const std::string& path, const FoldOptions& options) {
  return store::OpenRocksFoldOnEnv(path, options, nullptr);
}

StatusOr<std::unique_ptr<Fold>> store::OpenRocksFoldOnEnv(const std::string& path,
                                                          const FoldOptions& options,
                                                          rocksdb::Env* env) {
  if (env != nullptr && options.read_only) {
    return Status::InvalidArgument("a read-only fold follows a directory on disk; no Env");
  }
  // The directory checks are about the real disk; an Env's paths are its own.
  if (env == nullptr) KVFOLD_RETURN_IF_ERROR(CheckDirectory(path, options));
  rocksdb::Options ro;
  std::unique_ptr<IngestionGuard> guard;
  if (!options.read_only) {
    guard = std::make_unique<IngestionGuard>(env);
    ro.env = guard->env();
  }
  if (env != nullptr) {
    // A simulated Env reopens a small fold thousands of times: loading its
    // tables inline spares the 16 threads each open would start and stop.
    ro.max_file_opening_threads = 1;
  }
  ro.create_if_missing = options.create_if_missing && !options.read_only;
  // A writer's LOG through a writer that survives a full disk (a reader,
  // a secondary instance, logs into its own directory; a simulated Env
  // keeps RocksDB's own).
  if (env == nullptr && !options.read_only) ro.info_log = store::NewFoldInfoLog(path);
  ro.IncreaseParallelism(2);
  ro.keep_log_file_num = 4;
  // Whole-key bloom filters, in the memtable and in every table: most keys
  // a watcher or a commit asks about on catch-up are new, and a filter
  // answers "absent" without searching.
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.whole_key_filtering = true;
  if (!options.keep_table_filters_in_memory) {
    // Through the cache, at high priority, within RocksDB's usual 8 MiB:
    // an export's or a seed's memory then grows far less with the fold.
    // Two shards of 4 MiB (not RocksDB's 16 of 512 KiB): a block larger
    // than its shard, the filter of a table of some 400k keys, would be
    // dropped as soon as it is read, and read again for every lookup.
    table.cache_index_and_filter_blocks = true;
    table.cache_index_and_filter_blocks_with_high_priority = true;
    table.block_cache = KVFOLD_MUTANT("filters-cache-small-shards")
                            ? rocksdb::NewLRUCache(size_t{8} << 20)
                            : rocksdb::NewLRUCache(size_t{8} << 20, /*num_shard_bits=*/1);
  }
  ro.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  ro.memtable_whole_key_filtering = true;
  ro.memtable_prefix_bloom_size_ratio = 0.02;
  // Memtables bound the writer's memory (up to two of them) and what a
  // restart after a crash replays from the write-ahead log.
  ro.write_buffer_size = options.memtable_bytes;
  ro.max_write_buffer_number = 2;
  // Keys arrive in random order, so every L0 file overlaps all of L1, and
  // each L0 -> L1 compaction rewrites L1 whole: with RocksDB's 256 MiB L1
  // a 10M-key catch-up spent a third of its CPU there (cost growing with
  // the square of the fold). A small L1 of small files bounds that
  // rewrite, and moves from L1 down take a slice of the key space each.
  ro.max_bytes_for_level_base = uint64_t{64} << 20;
  ro.target_file_size_base = uint64_t{8} << 20;
  // LZ4 costs less CPU than the default Snappy in flushes, compactions and
  // reads, for about the same size; tables written with either stay
  // readable.
  if (HasLz4()) ro.compression = rocksdb::kLZ4Compression;
  ro.max_open_files = WriterTableFileLimit();
  rocksdb::DB* raw = nullptr;
  std::string secondary_dir;
  rocksdb::Status s;
  if (options.read_only) {
    // A secondary instance follows a primary another process may be
    // writing, without taking its lock; it needs its own directory for logs.
    std::string tmpl = (fs::temp_directory_path() / "kvfold-reader-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      return Status::IOError("cannot create a temporary directory to follow " + path);
    }
    secondary_dir = tmpl;
    ro.max_open_files = -1;
    s = rocksdb::DB::OpenAsSecondary(ro, path, secondary_dir, &raw);
  } else {
    s = rocksdb::DB::Open(ro, path, &raw);
  }
  if (!s.ok()) {
    if (!secondary_dir.empty()) {
      std::error_code ec;
      fs::remove_all(secondary_dir, ec);
    }
    if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
      return Status::FailedPrecondition(
          "fold " + path + " is in use by another writer (" + s.ToString() +
          "); use `kvfold status` or `kvfold dump` to read it while it runs");
    }
    return FromRocks(s, "opening fold " + path);
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string format;
  bool format_v1 = false;
  auto fs_status = db->Get(rocksdb::ReadOptions(), store::MetaStoreKey(kFormatName), &format);
  if (fs_status.IsNotFound()) {
    // A database without the marker is either one a writer has just created
    // (empty: the marker is its first write) or not a fold at all.
    std::unique_ptr<rocksdb::Iterator> any(db->NewIterator(rocksdb::ReadOptions()));
    any->SeekToFirst();
    if (any->Valid()) {
      return Status::Corruption("fold " + path +
                                " holds a RocksDB database that is not a kvfold "
                                "fold (no format marker)");
    }
    if (!any->status().ok()) return FromRocks(any->status(), "opening fold " + path);
    if (options.read_only) {
      return Status::NotFound("fold " + path +
                              " is being created by its writer and holds "
                              "nothing yet; try again in a moment");
    }
    rocksdb::WriteOptions wo;
    wo.sync = true;
    rocksdb::WriteBatch init;
    init.Put(store::MetaStoreKey(kFormatName), std::string(kFormatValue));
    init.Put(store::MetaStoreKey(kMaxRevisionName), store::EncodeU64(0));
    fs_status = db->Write(wo, &init);
    if (!fs_status.ok()) return FromRocks(fs_status, "initializing fold " + path);
  } else if (!fs_status.ok()) {
    return FromRocks(fs_status, "opening fold " + path);
  } else if (format == kFormatV1) {
    // Readers take it as it is (max_revision unknown); a writer upgrades it.
    if (!options.read_only) KVFOLD_RETURN_IF_ERROR(UpgradeFromFormat1(db.get(), path));
    format_v1 = options.read_only;
  } else if (format == kFormatV2) {
    // Its records hold no deadlines: readers take it as it is; a writer,
    // which may write some, marks it format 3 first.
    if (!options.read_only && !KVFOLD_MUTANT("fold-keep-format-2")) {
      rocksdb::WriteOptions wo;
      wo.sync = true;
      fs_status = db->Put(wo, store::MetaStoreKey(kFormatName), std::string(kFormatValue));
      if (!fs_status.ok()) {
        return FromRocks(fs_status, "upgrading fold " + path + " to " + std::string(kFormatValue));
      }
    }
  } else if (format != kFormatValue && format != kFormatStaleCounts) {
    return Status::Corruption("fold " + path + " has format \"" + format +
                              "\"; this build reads \"" + std::string(kFormatV1) + "\", \"" +
                              std::string(kFormatV2) + "\", \"" + std::string(kFormatValue) +
                              "\" and \"" + std::string(kFormatStaleCounts) + "\"");
  }
  auto fold = std::make_unique<RocksFold>(std::move(guard), std::move(db), path, options,
                                          std::move(secondary_dir), format_v1);
  // What a loader killed midway staged: its hard links would keep table
  // files alive that the fold has since compacted away. Best effort: it
  // only costs disk, and the next loader clears it or fails naming it.
  if (!options.read_only) (void)fold->ClearStaging();
  return std::unique_ptr<Fold>(std::move(fold));
}

}  // namespace kvfold
