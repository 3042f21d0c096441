// A file system in memory that models the page cache, under the directory
// transport (artifact/file_ops.h): what a power cut keeps is only what was
// synced. A file's data is durable once the file is fsynced; a directory's
// entries (a file created or removed, a rename, a directory made) once the
// directory is fsynced, and until then a reboot shows its old entries. The
// power can be cut at the N-th operation: that operation and every later
// one fail, open files included, until Reboot() brings back the durable
// state. A missing fsync in the transport shows up here and nowhere else.
//
// An fsync can also fail the way Linux (>= 4.13) fails it: the error is
// reported once, the dirty pages (a file's data, a directory's entries)
// are marked clean though they never reached the disk, so they stay
// visible until a reboot and a later fsync succeeds without them
// ("fsyncgate"). A transport that retries and trusts what it sees after
// such a failure shows up here.

#ifndef KVFOLD_TESTS_SIM_POWER_CUT_FS_H_
#define KVFOLD_TESTS_SIM_POWER_CUT_FS_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "artifact/file_ops.h"

namespace kvfold::sim {

class PowerCutFs final : public artifact::FileOps {
 public:
  // An empty root directory "/", durable. Paths must be absolute.
  PowerCutFs();

  // Cuts the power at operation `n` (1-based, counted over the life of this
  // file system: every call of FileOps and of its files is one operation,
  // and each directory CreateDirs makes one more). 0: never.
  void CutAt(uint64_t n);
  // Cuts the power now (before the next operation).
  void CutNow();
  // Fails the fsync (of a file or a directory) at operation `n` the Linux
  // way (see above); any other operation at `n` fails plainly. 0: never.
  void FailSyncAt(uint64_t n);
  // How many syncs failed that way.
  uint64_t failed_syncs() const;
  bool power_cut() const;
  uint64_t operations() const;
  // What operation `n` was, for messages ("rename /a/.x.tmp-1 -> /a/x").
  std::string Describe(uint64_t n) const;
  // Power back on: every file and directory as last synced. Files opened
  // before stay dead; transports on this file system must be reopened.
  void Reboot();

  StatusOr<std::unique_ptr<artifact::WritableFile>> NewFile(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status SyncDir(const std::string& dir) override;
  Status CreateDirs(const std::string& dir, std::vector<std::string>* created) override;
  Status Remove(const std::string& path) override;
  Status RemoveBelow(const std::string& root, const std::string& name) override;
  StatusOr<std::string> ReadFile(const std::string& root, const std::string& name,
                                 uint64_t max_bytes) override;
  StatusOr<std::vector<std::string>> ListFiles(const std::string& dir) override;
  StatusOr<artifact::FileKind> Kind(const std::string& path) override;
  StatusOr<std::unique_ptr<artifact::FileLock>> LockFile(const std::string& path,
                                                         std::chrono::milliseconds) override;

 private:
  class File;

  // A file or a directory. The page cache holds `data` and `entries`; the
  // disk holds `durable_data` and `durable_entries`. `clean_*` is what the
  // page cache believes the disk holds: a sync writes only what differs
  // from it. It equals the disk's copy until a sync fails.
  struct Node {
    bool is_dir = false;
    std::string data, durable_data, clean_data;
    std::map<std::string, size_t> entries, durable_entries, clean_entries;  // name -> node
  };
  struct Place {
    size_t dir;
    std::string name;
  };

  // Counts one operation; IOError when the power is (or now goes) off.
  Status Operation(const std::string& what);
  // A sync of `node`, counted by the caller: writes what changed since the
  // page cache was last clean, or, at the failing operation, marks it
  // clean and fails.
  Status Sync(size_t node, const std::string& what);
  std::optional<size_t> Lookup(const std::string& path) const;
  // The directory that holds `path`, and the last name of `path`.
  StatusOr<Place> Parent(const std::string& path) const;
  // Invalidates references into nodes_.
  size_t NewNode(bool is_dir);

  mutable std::mutex mu_;    // export publishes from a worker thread
  std::vector<Node> nodes_;  // [0] is "/"; nodes are never freed
  uint64_t operations_ = 0;
  uint64_t cut_at_ = 0;
  uint64_t fail_sync_at_ = 0;
  uint64_t failed_syncs_ = 0;
  bool power_cut_ = false;
  uint64_t boot_ = 0;
  std::vector<std::string> log_;  // log_[n - 1] describes operation n
};

}  // namespace kvfold::sim

#endif  // KVFOLD_TESTS_SIM_POWER_CUT_FS_H_
