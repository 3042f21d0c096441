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
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void PendingBatch::Put(const std::string& key, Entry entry) {
  entries_[key] = std::move(entry);
}

void PendingBatch::AdvanceTo(uint64_t seq) {
  if (!cursor_ || seq > *cursor_) cursor_ = seq;
}

bool PendingBatch::HasWork(std::optional<uint64_t> committed) const {
  if (!entries_.empty() || !meta_.empty()) return true;
  return cursor_ && (!committed || *cursor_ > *committed);
}

FoldCommit PendingBatch::ToCommit() const {
  FoldCommit commit = meta_;
  commit.entries = entries_;
  commit.cursor = cursor_;
  return commit;
}

}  // namespace kvfold::core
