#include "core/pending_batch.h"

#include "core/mutation.h"

namespace kvfold::core {

std::optional<Entry> FoldMessage(const BucketMessage& message,
                                 const std::optional<Entry>& current) {
  if (current && message.seq <= current->revision &&
      !KVFOLD_MUTANT("fold-message-ignore-revision")) {
    return std::nullopt;
  }
  Entry next;
  next.revision = message.seq;
  next.deleted = message.op != Op::kPut;
  if (!next.deleted) next.value = message.value;
  return next;
}

const Entry* PendingBatch::Find(const std::string& key) const {
  auto it = commit_.entries.find(key);
  return it == commit_.entries.end() ? nullptr : &it->second;
}

void PendingBatch::Put(const std::string& key, Entry entry) {
  commit_.entries.insert_or_assign(key, std::move(entry));
}

void PendingBatch::AdvanceTo(uint64_t seq) {
  if (!commit_.cursor || seq > *commit_.cursor) commit_.cursor = seq;
}

void PendingBatch::TakeBack(FoldCommit older) {
  for (auto& [key, entry] : older.entries) commit_.entries.try_emplace(key, std::move(entry));
  auto keep = [](auto& mine, auto& theirs) {
    if (!mine) mine = std::move(theirs);
  };
  keep(commit_.bucket, older.bucket);
  keep(commit_.scope, older.scope);
  keep(commit_.stream_created, older.stream_created);
  keep(commit_.seeding, older.seeding);
  keep(commit_.eviction_observed, older.eviction_observed);
  keep(commit_.last_repair, older.last_repair);
  if (older.cursor && (!commit_.cursor || *older.cursor > *commit_.cursor)) {
    commit_.cursor = older.cursor;
  }
}

bool PendingBatch::HasWork(std::optional<uint64_t> committed) const {
  const auto& c = commit_.cursor;
  if (c && (!committed || *c > *committed)) return true;
  // Anything besides the cursor (already committed) is work.
  return !commit_.entries.empty() || commit_.clear_entries || commit_.bucket ||
         commit_.scope || commit_.stream_created || commit_.seeding ||
         commit_.eviction_observed || commit_.last_repair;
}

}  // namespace kvfold::core
