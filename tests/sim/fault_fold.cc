#include "sim/fault_fold.h"

namespace kvfold::sim {
namespace {
Status Dead() { return Status::IOError("simulated crash: the process is gone"); }
}  // namespace

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kNone:
      return "none";
    case Fault::kFailBefore:
      return "fail-before";
    case Fault::kFailAfter:
      return "fail-after";
    case Fault::kCrashBefore:
      return "crash-before";
    case Fault::kCrashAfter:
      return "crash-after";
    case Fault::kTorn:
      return "torn";
  }
  return "?";
}

Status FaultFold::Get(std::string_view key, Entry* out) {
  if (Died()) return Dead();
  return inner_->Get(key, out);
}

Status FaultFold::Scan(std::string_view prefix, bool include_tombstones,
                       const std::function<bool(std::string_view, const Entry&)>& fn) {
  if (Died()) return Dead();
  return inner_->Scan(prefix, include_tombstones, fn);
}

Status FaultFold::ScanFrom(std::string_view start_key, bool include_tombstones,
                           const std::function<bool(std::string_view, const Entry&)>& fn) {
  if (Died()) return Dead();
  return inner_->ScanFrom(start_key, include_tombstones, fn);
}

StatusOr<FoldMeta> FaultFold::ReadMeta() {
  if (Died()) return Dead();
  return inner_->ReadMeta();
}

StatusOr<std::unique_ptr<FoldSnapshot>> FaultFold::Snapshot() {
  if (Died()) return Dead();
  return inner_->Snapshot();
}

FoldCommit FaultFold::Misremembered(const FoldCommit& commit) const {
  FoldCommit out = commit;
  auto it = out.entries.find(misremember_);
  if (it != out.entries.end()) ++it->second.revision;
  return out;
}

namespace {

// A loader that misremembers one key's revision, as FaultFold::Commit.
class MisrememberingLoader final : public FoldLoader {
 public:
  MisrememberingLoader(std::unique_ptr<FoldLoader> inner, std::string key)
      : inner_(std::move(inner)), key_(std::move(key)) {}
  Status Add(std::string_view key, const Entry& entry) override {
    Entry stored = entry;
    if (key == key_) ++stored.revision;
    return inner_->Add(key, stored);
  }
  Status Finish(const FoldCommit& commit) override { return inner_->Finish(commit); }

 private:
  std::unique_ptr<FoldLoader> inner_;
  std::string key_;
};

}  // namespace

StatusOr<std::unique_ptr<FoldLoader>> FaultFold::NewLoader() {
  // Commit faults need commits: no loader, unless a loader's write is to
  // be misremembered.
  if (misremember_.empty()) return std::unique_ptr<FoldLoader>();
  auto inner = inner_->NewLoader();
  if (!inner.ok() || !*inner) return inner;
  return std::unique_ptr<FoldLoader>(
      std::make_unique<MisrememberingLoader>(std::move(inner).value(), misremember_));
}

Status FaultFold::Recount() {
  if (Died()) return Dead();
  // A store that fails every write fails this one too.
  if (fail_all_) return fail_all_with_;
  Status s = inner_->Recount();
  if (Died()) return Dead();
  return s;
}

Status FaultFold::Commit(const FoldCommit& given) {
  if (Died()) return Dead();
  const FoldCommit misremembered = misremember_.empty() ? FoldCommit() : Misremembered(given);
  const FoldCommit& commit = misremember_.empty() ? given : misremembered;
  ++attempts_;
  if (fail_all_) {
    ++fired_;
    return fail_all_with_;
  }
  auto armed = armed_.find(attempts_);
  if (armed == armed_.end() || armed->second == Fault::kNone) {
    Status s = inner_->Commit(commit);
    if (Died()) return Dead();  // the process died inside the store
    return s;
  }
  ++fired_;
  switch (armed->second) {
    case Fault::kNone:
      return inner_->Commit(commit);
    case Fault::kFailBefore:
      return Status::IOError("simulated transient failure before the write");
    case Fault::kFailAfter:
      KVFOLD_RETURN_IF_ERROR(inner_->Commit(commit));
      return Status::IOError("simulated transient failure after the write");
    case Fault::kCrashBefore:
      crashed_ = true;
      return Dead();
    case Fault::kCrashAfter:
      KVFOLD_RETURN_IF_ERROR(inner_->Commit(commit));
      crashed_ = true;
      return Dead();
    case Fault::kTorn: {
      // The data reached the disk, the metadata (cursor, identity, markers)
      // did not.
      FoldCommit entries_only;
      entries_only.clear_entries = commit.clear_entries;
      entries_only.entries = commit.entries;
      entries_only.counts = commit.counts;
      entries_only.uncounted = commit.uncounted;
      KVFOLD_RETURN_IF_ERROR(inner_->Commit(entries_only));
      crashed_ = true;
      return Dead();
    }
  }
  return Status::Internal("unknown fault");
}

}  // namespace kvfold::sim
