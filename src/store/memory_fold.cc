// A fold in memory: same contract as the RocksDB one, for tests and
// simulation.

#include <algorithm>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "core/meta_merge.h"
#include "core/mutation.h"
#include "kvfold/fold.h"
#include "store/record_codec.h"

namespace kvfold {
namespace {

class MemoryFold final : public Fold {
 public:
  Status Get(std::string_view key, Entry* out) override {
    std::lock_guard lock(mu_);
    auto it = entries_.find(std::string(key));
    if (it == entries_.end()) return Status::NotFound(std::string(key));
    *out = it->second;
    return Status::OK();
  }

  Status Scan(std::string_view prefix, bool include_tombstones,
              const std::function<bool(std::string_view, const Entry&)>& fn) override {
    std::map<std::string, Entry, std::less<>> view;
    {
      std::lock_guard lock(mu_);
      for (auto it = entries_.lower_bound(prefix);
           it != entries_.end() && it->first.starts_with(prefix); ++it) {
        view.insert(*it);
      }
    }
    for (const auto& [key, entry] : view) {
      if (entry.deleted && !include_tombstones) continue;
      if (!fn(key, entry)) break;
    }
    return Status::OK();
  }

  Status ScanFrom(std::string_view start_key, bool include_tombstones,
                  const std::function<bool(std::string_view, const Entry&)>& fn) override {
    std::vector<std::pair<std::string, Entry>> view;
    {
      std::lock_guard lock(mu_);
      for (auto it = entries_.lower_bound(start_key); it != entries_.end(); ++it) {
        view.emplace_back(*it);
      }
    }
    for (const auto& [key, entry] : view) {
      if (entry.deleted && !include_tombstones) continue;
      if (!fn(key, entry)) break;
    }
    return Status::OK();
  }

  StatusOr<std::unique_ptr<FoldSnapshot>> Snapshot() override {
    std::lock_guard lock(mu_);
    return std::unique_ptr<FoldSnapshot>(new Copy(entries_, Shown()));
  }

  StatusOr<FoldMeta> ReadMeta() override {
    std::lock_guard lock(mu_);
    return Shown();
  }

  Status Recount() override {
    std::lock_guard lock(mu_);
    stale_.reset();
    return Status::OK();
  }

  Status Commit(const FoldCommit& commit) override {
    std::lock_guard lock(mu_);
    FoldMeta merged = meta_;
    KVFOLD_RETURN_IF_ERROR(core::MergeCommitMeta(commit, &merged));
    if (commit.counts) {
      // Checked against what this fold would count itself, so a caller's
      // wrong view shows in every test that uses it.
      FoldMeta expected = meta_;
      if (commit.clear_entries) expected.live_keys = expected.entries = 0;
      FoldMeta claimed = expected;
      for (const auto& [key, entry] : commit.entries) {
        auto it = commit.clear_entries ? entries_.end() : entries_.find(key);
        if (commit.new_keys && it != entries_.end()) {
          return Status::Internal("a commit of new keys brings key " + key +
                                  ", which the fold holds");
        }
        store::CountReplacement(it == entries_.end() ? nullptr : &it->second, entry, &expected);
      }
      KVFOLD_RETURN_IF_ERROR(store::ApplyCountChange(*commit.counts, &claimed));
      if (claimed.live_keys != expected.live_keys || claimed.entries != expected.entries) {
        return Status::Internal("a commit's count change does not match the fold");
      }
    }
    if (commit.clear_entries) {
      entries_.clear();
      meta_.live_keys = meta_.entries = meta_.max_revision = 0;
      stale_.reset();
    } else if (commit.uncounted && !commit.entries.empty() && meta_.entries > 0 && !stale_) {
      stale_ = std::make_pair(meta_.live_keys, meta_.entries);  // as RocksDB's fold leaves them
    }
    for (const auto& [key, entry] : commit.entries) {
      auto it = entries_.find(key);
      store::CountReplacement(it == entries_.end() ? nullptr : &it->second, entry, &meta_);
      entries_[key] = entry;
      if (!KVFOLD_MUTANT("fold-max-revision-stale")) {
        meta_.max_revision = std::max(meta_.max_revision, entry.revision);
      }
    }
    // The counts are this fold's own; every other field is the merge's.
    merged.live_keys = meta_.live_keys;
    merged.entries = meta_.entries;
    merged.max_revision = meta_.max_revision;
    meta_ = std::move(merged);
    return Status::OK();
  }

 private:
  // The metadata as a reader sees it: with stale counts, those from
  // before the first uncounted commit (this fold keeps exact ones too).
  FoldMeta Shown() const {
    FoldMeta m = meta_;
    if (stale_) {
      m.live_keys = stale_->first;
      m.entries = stale_->second;
      m.counts_stale = true;
    }
    return m;
  }

  // A snapshot of a memory fold is a copy: fine for tests and simulation.
  class Copy final : public FoldSnapshot {
   public:
    Copy(std::map<std::string, Entry, std::less<>> entries, FoldMeta meta)
        : entries_(std::move(entries)), meta_(std::move(meta)) {}
    const FoldMeta& meta() const override { return meta_; }
    Status Scan(std::string_view prefix, bool include_tombstones,
                const std::function<bool(std::string_view, const Entry&)>& fn) override {
      for (auto it = entries_.lower_bound(prefix);
           it != entries_.end() && it->first.starts_with(prefix); ++it) {
        if (it->second.deleted && !include_tombstones) continue;
        if (!fn(it->first, it->second)) break;
      }
      return Status::OK();
    }

   private:
    std::map<std::string, Entry, std::less<>> entries_;
    FoldMeta meta_;
  };

  std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;
  // While the counts are stale: live keys and entries as shown.
  std::optional<std::pair<uint64_t, uint64_t>> stale_;
  FoldMeta meta_ = [] {
    FoldMeta m;
    m.max_revision = 0;  // a new fold holds nothing
    return m;
  }();
};

}  // namespace

std::unique_ptr<Fold> NewMemoryFold() { return std::make_unique<MemoryFold>(); }

}  // namespace kvfold
