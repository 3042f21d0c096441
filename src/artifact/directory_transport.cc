#include "artifact/directory_transport.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include "artifact/file_ops.h"
#include "artifact/pointer_codec.h"
#include "core/mutation.h"
#include "core/pointer_rule.h"

namespace kvfold::artifact {
namespace {

namespace fs = std::filesystem;

// Another exporter holds the pointer's lock for a read and a write; one
// held longer is held by something else, and the round fails (and the
// mirror's shutdown never waits on it) rather than waiting forever.
constexpr std::chrono::milliseconds kPointerLockTimeout{10000};

// Makes the directories in `created` durable: each is an entry of its
// parent, durable once the parent is synced. Syncing only the innermost
// one's parent (as once done) let a power cut take away a new location, or
// a nested object's outer directory, with everything stored below it.
Status SyncCreated(FileOps& ops, const std::vector<std::string>& created) {
  if (KVFOLD_MUTANT("dir-skip-created-dir-fsync")) return Status::OK();
  for (const std::string& dir : created) {
    // A relative one-part location ("dir:arts") lives in the working directory.
    const fs::path parent = fs::path(dir).parent_path();
    KVFOLD_RETURN_IF_ERROR(ops.SyncDir(parent.empty() ? "." : parent.string()));
  }
  return Status::OK();
}

// Creates `dir` and its missing parents durably. When a sync fails, the
// directories this call made are removed again (deepest first, best
// effort): Linux marks a directory's pages clean after a failed fsync, so
// an entry left in place would show to the next attempt, which would find
// nothing to create and nothing to sync, yet it would never reach the disk.
Status CreateDirsDurably(FileOps& ops, const std::string& dir) {
  std::vector<std::string> created;
  KVFOLD_RETURN_IF_ERROR(ops.CreateDirs(dir, &created));
  Status s = SyncCreated(ops, created);
  if (!s.ok() && !KVFOLD_MUTANT("dir-keep-dirs-after-failed-sync")) {
    for (auto it = created.rbegin(); it != created.rend(); ++it) (void)ops.Remove(*it);
  }
  return s;
}

// Writes `bytes` to `target` atomically and durably.
Status WriteAtomically(FileOps& ops, const fs::path& target, std::string_view bytes) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on
  // `"." + std::string` (GCC bug 105329).
  std::string tmp_name = target.filename().string();
  tmp_name.insert(tmp_name.begin(), '.');
  tmp_name.append(".tmp-").append(std::to_string(rng()));
  const std::string tmp = (target.parent_path() / tmp_name).string();
  auto file = ops.NewFile(tmp);
  if (!file.ok()) return file.status();
  Status s = (*file)->Append(bytes);
  // Without it the rename could reach the disk before the data does: a
  // power cut would leave the target empty or torn.
  if (s.ok() && !KVFOLD_MUTANT("dir-skip-file-fsync")) s = (*file)->Sync();
  (void)(*file)->Close();  // after a good fsync, close has nothing left to report
  if (s.ok()) s = ops.Rename(tmp, target.string());
  if (!s.ok()) {
    (void)ops.Remove(tmp);
    return s;
  }
  // Without it a power cut could bring back the old target (or none).
  if (KVFOLD_MUTANT("dir-skip-dir-fsync")) return Status::OK();
  return ops.SyncDir(target.parent_path().string());
}

class DirectoryTransport final : public Transport {
 public:
  DirectoryTransport(FileOps* ops, fs::path root)
      : ops_(ops), root_(std::move(root)), location_("dir:" + root_.string()) {}

  const std::string& location() const override { return location_; }

  Status Put(const std::string& name, std::string_view bytes) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    const fs::path target = root_ / name;
    KVFOLD_RETURN_IF_ERROR(CreateDirsDurably(*ops_, target.parent_path().string()));
    return WriteAtomically(*ops_, target, bytes);
  }

  StatusOr<std::string> Get(const std::string& name, uint64_t max_bytes) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    return ops_->ReadFile(root_.string(), name, max_bytes);
  }

  // Below the root nothing is followed: another writer to the location can
  // swap a directory for a link between a prune's listing and its removals.
  Status Remove(const std::string& name) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    Status s = ops_->RemoveBelow(root_.string(), name);
    if (!s.ok() && !s.IsNotFound()) return s.WithContext(location_);
    // Drop directories the removal left empty, up to the root (removing a
    // directory that is not empty fails).
    for (fs::path dir = fs::path(name).parent_path();
         !dir.empty() && ops_->RemoveBelow(root_.string(), dir.string()).ok();
         dir = dir.parent_path()) {
    }
    return Status::OK();
  }

  StatusOr<std::vector<std::string>> List() override {
    auto files = ops_->ListFiles(root_.string());
    if (!files.ok()) return files.status();
    std::vector<std::string> out;
    for (std::string& rel : *files) {
      if (rel == kPointerName || !ValidateObjectName(rel).ok()) continue;
      if (fs::path(rel).filename().string().front() == '.') continue;  // temp files, .lock
      out.push_back(std::move(rel));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  StatusOr<std::optional<ArtifactPointer>> ReadPointer() override {
    auto bytes = ops_->ReadFile(root_.string(), kPointerName, kMaxPointerBytes);
    if (bytes.status().IsNotFound()) return std::optional<ArtifactPointer>();
    if (!bytes.ok()) return bytes.status();
    auto p = DecodePointer(*bytes, location_);
    if (!p.ok()) return p.status();
    return std::optional<ArtifactPointer>(*p);
  }

  Status AdvancePointer(const ArtifactPointer& next) override {
    // The read-check-write below must not interleave with another exporter's.
    auto lock = ops_->LockFile((root_ / ".lock").string(), kPointerLockTimeout);
    if (!lock.ok()) return lock.status();
    auto current = ReadPointer();
    if (!current.ok()) return current.status();
    Status advance = core::CheckPointerAdvance(*current, next);
    if (advance.IsAlreadyExists() && *current && (*current)->cursor == next.cursor &&
        !KVFOLD_MUTANT("dir-pointer-trust-cache")) {
      // A pointer at this very cursor may be one an earlier attempt renamed
      // into place before its directory fsync failed: Linux then marks the
      // directory's pages clean, so the rename shows here but never reaches
      // the disk, and no later fsync writes it. Write it again, so that
      // the answer vouches for a pointer that is durable.
      KVFOLD_RETURN_IF_ERROR(
          WriteAtomically(*ops_, root_ / kPointerName, EncodePointer(**current)));
    }
    KVFOLD_RETURN_IF_ERROR(advance);
    return WriteAtomically(*ops_, root_ / kPointerName, EncodePointer(next));
  }

 private:
  FileOps* const ops_;
  fs::path root_;
  std::string location_;
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> OpenDirectoryTransportOn(FileOps* ops, const std::string& root,
                                                              bool create_if_missing) {
  if (create_if_missing) {
    KVFOLD_RETURN_IF_ERROR(CreateDirsDurably(*ops, root).WithContext("artifact directory"));
  }
  auto kind = ops->Kind(root);
  if (!kind.ok()) return kind.status();
  if (*kind == FileKind::kMissing) return Status::NotFound("no artifact directory at " + root);
  if (*kind != FileKind::kDirectory) {
    return Status::InvalidArgument("artifact location " + root + " is not a directory");
  }
  return std::unique_ptr<Transport>(new DirectoryTransport(ops, fs::path(root)));
}

StatusOr<std::unique_ptr<Transport>> OpenDirectoryTransport(const std::string& root,
                                                            bool create_if_missing) {
  return OpenDirectoryTransportOn(PosixFileOps(), root, create_if_missing);
}

}  // namespace kvfold::artifact
