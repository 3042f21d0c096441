#include "core/pending_batch.h"

#include <algorithm>
#include <iterator>

#include "core/count_change.h"
#include "core/mutation.h"

namespace kvfold::core {

std::optional<Entry> FoldMessage(const BucketMessage& message, const std::optional<Entry>& current,
                                 std::string* value_from) {
  if (current && message.seq <= current->revision &&
      !KVFOLD_MUTANT("fold-message-ignore-revision")) {
    return std::nullopt;
  }
  Entry next;
  next.revision = message.seq;
  next.deleted = message.op != Op::kPut;
  if (!next.deleted) {
    next.value = value_from != nullptr ? std::move(*value_from) : message.value;
    next.expires_ns = message.expires_ns;
  }
  return next;
}

const Entry* PendingBatch::Find(const std::string& key) const {
  auto it = pending_.entries.find(key);
  return it == pending_.entries.end() ? nullptr : &it->second;
}

std::optional<Entry> PendingBatch::Insert(std::string key, Entry entry) {
  auto& entries = pending_.entries;
  bytes_ += key.size() + entry.value.size();
  // One search per message, none where keys come in ascending order (a
  // first sync of a bucket written in key order, a repair's walk).
  auto at = entries.end();
  if (!entries.empty() && !(std::prev(entries.end())->first < key)) {
    at = entries.lower_bound(key);
    if (at != entries.end() && at->first == key) {
      bytes_ -= at->first.size() + at->second.value.size();
      std::optional<Entry> replaced = std::move(at->second);
      at->second = std::move(entry);
      return replaced;
    }
  }
  if (spare_.empty()) {
    entries.emplace_hint(at, std::move(key), std::move(entry));
  } else {
    auto node = spare_.extract(spare_.begin());
    node.key().assign(key);  // in the buffer it has, when long enough
    node.mapped() = std::move(entry);
    entries.insert(at, std::move(node));
  }
  return std::nullopt;
}

void PendingBatch::Put(std::string key, Entry entry, bool known_new) {
  const FoldCommit::CountChange change = core::CountChangeOf(nullptr, entry);
  const bool inserted = !Insert(std::move(key), std::move(entry));
  // A key put twice was not new the second time, whatever the caller says.
  if (known_new && inserted) {
    core::AddCountChange(change, &counts_);
  } else {
    all_known_new_ = false;
    if (!KVFOLD_MUTANT("pending-counts-past-unknown")) counts_known_ = false;
  }
}

void PendingBatch::PutOver(std::string key, Entry entry, const std::optional<Entry>& before) {
  const bool deleted = entry.deleted;
  const std::optional<Entry> replaced = Insert(std::move(key), std::move(entry));
  // What this batch already changed for the key counts from its own entry.
  const std::optional<Entry>& was =
      replaced && !KVFOLD_MUTANT("pending-counts-from-caller") ? replaced : before;
  core::AddCountChange(core::CountChangeOf(was ? &*was : nullptr, Entry{0, deleted, "", 0}),
                       &counts_);
  all_known_new_ = false;
}

void PendingBatch::Complete(FoldCommit* commit) const {
  commit->cursor = cursor_;
  if (cursor_) commit->cursor_time_ns = cursor_time_ns_;
  if (commit->entries.empty() || commit->clear_entries || commit->counts) return;
  if (!counts_known_) {
    commit->uncounted = uncounted_;
    return;
  }
  commit->counts = counts_;
  commit->new_keys = all_known_new_;
}

void PendingBatch::AdvanceTo(uint64_t seq, int64_t anchor_ns) {
  if (!cursor_ || seq > *cursor_) {
    cursor_ = seq;
    cursor_time_ns_ = anchor_ns;
  } else if (seq == *cursor_) {
    cursor_time_ns_ = std::max(cursor_time_ns_, anchor_ns);
  }
}

void PendingBatch::Recycle(FoldCommit done) {
  // A bounded batch only. Its values stay until their nodes are taken:
  // freed one at a time between the allocations of new ones they are
  // cheap, freed all at once here they cost the first sync 16% more CPU
  // (malloc's per-thread cache overflows).
  if (!spare_.empty() || done.entries.size() > kMaxSpareNodes) return;
  size_t value_bytes = 0;
  for (const auto& [key, entry] : done.entries) value_bytes += entry.value.size();
  if (value_bytes > kMaxSpareValueBytes) return;
  spare_ = std::move(done.entries);
}

void PendingBatch::TakeBack(FoldCommit older) {
  // The failed batch's keys are no longer new to what is pending (and its
  // stated counts go with it): let the store count them all.
  all_known_new_ = false;
  counts_known_ = false;
  older.counts.reset();
  for (auto& [key, entry] : older.entries) {
    const size_t size = key.size() + entry.value.size();
    if (pending_.entries.try_emplace(key, std::move(entry)).second) bytes_ += size;
  }
  auto keep = [](auto& mine, auto& theirs) {
    if (!mine) mine = std::move(theirs);
  };
  keep(pending_.bucket, older.bucket);
  keep(pending_.scope, older.scope);
  keep(pending_.stream_created, older.stream_created);
  keep(pending_.seeding, older.seeding);
  keep(pending_.eviction_observed, older.eviction_observed);
  keep(pending_.eviction_cause, older.eviction_cause);
  keep(pending_.last_repair, older.last_repair);
  keep(pending_.marker_ttl_ns, older.marker_ttl_ns);
  if (older.cursor && (!cursor_ || *older.cursor > *cursor_)) {
    cursor_ = older.cursor;
    cursor_time_ns_ = older.cursor_time_ns.value_or(0);
  } else if (older.cursor && *older.cursor == *cursor_) {
    cursor_time_ns_ = std::max(cursor_time_ns_, older.cursor_time_ns.value_or(0));
  }
}

bool PendingBatch::HasWork(std::optional<uint64_t> committed) const {
  if (!pending_.empty()) return true;
  return cursor_ && (!committed || *cursor_ > *committed);
}

}  // namespace kvfold::core
