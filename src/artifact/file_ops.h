// The file operations the directory transport makes, behind a seam: the
// product runs on PosixFileOps(); the power-cut simulation
// (tests/sim/power_cut_fs.h) runs the same transport on a file system that
// loses whatever was not fsynced, so a missing fsync shows up as a test
// failure instead of not at all.
//
// Paths are absolute or relative file system paths as the transport forms
// them. Thread safety: the transport uses one FileOps from one thread at a
// time (export's chunk worker included); implementations need no more.

#ifndef KVFOLD_ARTIFACT_FILE_OPS_H_
#define KVFOLD_ARTIFACT_FILE_OPS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvfold/status.h"

namespace kvfold::artifact {

// A file being written. Nothing in it is durable before Sync().
class WritableFile {
 public:
  WritableFile() = default;
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;
  virtual ~WritableFile() = default;  // closes the file if Close() was not called

  virtual Status Append(std::string_view bytes) = 0;
  // fsync: the file's data is durable once this returns OK (its name is
  // not: that takes a SyncDir of its directory).
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
};

// An exclusive lock on a file, held until destroyed.
class FileLock {
 public:
  FileLock() = default;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  virtual ~FileLock() = default;
};

enum class FileKind { kMissing, kFile, kDirectory, kOther };

class FileOps {
 public:
  FileOps() = default;
  FileOps(const FileOps&) = delete;
  FileOps& operator=(const FileOps&) = delete;
  virtual ~FileOps() = default;

  // Creates the file `path`, which must not exist yet (O_CREAT | O_EXCL).
  virtual StatusOr<std::unique_ptr<WritableFile>> NewFile(const std::string& path) = 0;
  // Atomically replaces `to` (if any) with `from`. Durable only once both
  // directories are synced.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // fsync of a directory: makes the creations, renames and removals of its
  // entries so far durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  // Creates `dir` and its missing parents. Appends each directory this call
  // created to *created, outermost first; each is durable only once its
  // parent is synced.
  virtual Status CreateDirs(const std::string& dir, std::vector<std::string>* created) = 0;
  // Removes a file or an empty directory. NotFound when there is none;
  // IOError for a directory that is not empty. For paths the transport
  // made itself (its temporary files and new directories).
  virtual Status Remove(const std::string& path) = 0;
  // Removes `name` (segments joined by '/': a file, a symbolic link or an
  // empty directory) below the directory `root`, never following a
  // symbolic link on the way: each directory of `name` is opened relative
  // to the one above it without following a link (`root` itself may be
  // one), and the last segment is unlinked, not followed. A directory that
  // another writer to the location swapped for a link to elsewhere is
  // Corruption, and nothing outside `root` is touched. NotFound when there
  // is none; IOError for a directory that is not empty.
  virtual Status RemoveBelow(const std::string& root, const std::string& name) = 0;
  // The whole regular file `name` below the directory `root`, reached as
  // RemoveBelow reaches it (no symbolic link followed) and opened without
  // waiting (O_NONBLOCK: a FIFO would wait for a writer). Corruption,
  // unread, when it is anything but a regular file (a link, a FIFO, a
  // device) or larger than `max_bytes`. NotFound when there is none.
  virtual StatusOr<std::string> ReadFile(const std::string& root, const std::string& name,
                                         uint64_t max_bytes) = 0;
  // Every regular file below `dir`, at any depth, as a path relative to
  // `dir`, in no particular order. Symbolic links are neither listed nor
  // followed.
  virtual StatusOr<std::vector<std::string>> ListFiles(const std::string& dir) = 0;
  virtual StatusOr<FileKind> Kind(const std::string& path) = 0;
  // Creates `path` if missing and takes an exclusive lock on it (flock),
  // waiting up to `timeout` for another holder to release it; Unavailable
  // after that.
  virtual StatusOr<std::unique_ptr<FileLock>> LockFile(const std::string& path,
                                                       std::chrono::milliseconds timeout) = 0;
};

// The real file system. Process-wide, never destroyed.
FileOps* PosixFileOps();

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_FILE_OPS_H_
