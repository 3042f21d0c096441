#include "artifact/file_ops.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "core/mutation.h"

namespace kvfold::artifact {
namespace {

namespace fs = std::filesystem;

Status Errno(const std::string& what) {
  return Status::IOError(what + ": " + std::strerror(errno));
}

// A file descriptor closed when it goes out of scope.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// What a file of this mode is, for messages.
std::string KindOf(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "an unknown kind of file";
}

// Opens the directory `root`, then each segment of `dirs` ("" for none;
// segments joined by '/') relative to the one above it, never following
// a symbolic link: a segment that is not a directory is Corruption (a
// writer to the location replaced what kvfold made there), so what is
// reached through the result lies inside `root`.
StatusOr<UniqueFd> OpenDirBelow(const std::string& root, std::string_view dirs) {
  UniqueFd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) {
    if (errno == ENOENT) return Status::NotFound(root + " does not exist");
    return Errno("opening " + root);
  }
  std::string walked = root;
  while (!dirs.empty()) {
    const size_t slash = dirs.find('/');
    const std::string segment(dirs.substr(0, slash));
    dirs.remove_prefix(slash == std::string_view::npos ? dirs.size() : slash + 1);
    walked.append("/").append(segment);
    const int next =
        KVFOLD_MUTANT("dir-remove-follows-links")
            ? ::openat(dir.get(), segment.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            : ::openat(dir.get(), segment.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      const int open_errno = errno;
      if (open_errno == ENOENT) return Status::NotFound(walked + " does not exist");
      struct stat st {};
      if ((open_errno == ELOOP || open_errno == ENOTDIR) &&
          ::fstatat(dir.get(), segment.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        return Status::Corruption(walked + " is " + KindOf(st.st_mode) +
                                  ", where kvfold keeps a directory: refused, not followed "
                                  "(another writer to the location replaced it; remove it)");
      }
      errno = open_errno;
      return Errno("opening " + walked);
    }
    dir.reset(next);
  }
  return dir;
}

// `name` split at its last '/': {"a/b", "c"} for "a/b/c", {"", "c"} for "c".
std::pair<std::string_view, std::string> SplitLast(std::string_view name) {
  const size_t slash = name.rfind('/');
  if (slash == std::string_view::npos) return {std::string_view(), std::string(name)};
  return {name.substr(0, slash), std::string(name.substr(slash + 1))};
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(std::string_view bytes) override {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("writing " + path_);
      }
      done += static_cast<size_t>(n);
    }
    return Status::OK();
  }

  Status Sync() override {
    if (::fsync(fd_) != 0) return Errno("fsync " + path_);
    return Status::OK();
  }

  Status Close() override {
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return Errno("closing " + path_);
    return Status::OK();
  }

 private:
  std::string path_;
  int fd_;
};

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }

 private:
  int fd_;
};

class PosixOps final : public FileOps {
 public:
  StatusOr<std::unique_ptr<WritableFile>> NewFile(const std::string& path) override {
    // 0666: the umask alone decides who may read an artifact (and the
    // values in it), as it does for any file a tool creates.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) return Errno("creating " + path);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return Errno("renaming " + from + " to " + to);
    return Status::OK();
  }

  Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return Errno("opening " + dir + " to fsync");
    const int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) return Errno("fsync " + dir);
    return Status::OK();
  }

  Status CreateDirs(const std::string& dir, std::vector<std::string>* created) override {
    std::vector<fs::path> missing;  // innermost first
    std::error_code ec;
    for (fs::path p = fs::path(dir);; p = p.parent_path()) {
      const bool exists = fs::exists(p, ec);
      if (ec) return Status::IOError("creating " + dir + ": " + ec.message());
      if (exists) break;
      missing.push_back(p);
      if (p.parent_path().empty() || p == p.parent_path()) break;
    }
    if (missing.empty() && !fs::is_directory(dir, ec)) {
      return Status::IOError("creating " + dir + ": " +
                             std::make_error_code(std::errc::not_a_directory).message());
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      // false without an error: another process created it meanwhile.
      if (fs::create_directory(*it, ec)) created->push_back(it->string());
      if (ec) return Status::IOError("creating " + it->string() + ": " + ec.message());
    }
    return Status::OK();
  }

  Status Remove(const std::string& path) override {
    std::error_code ec;
    if (fs::remove(path, ec)) return Status::OK();
    if (ec) return Status::IOError("removing " + path + ": " + ec.message());
    return Status::NotFound(path + " does not exist");
  }

  Status RemoveBelow(const std::string& root, const std::string& name) override {
    const auto [dirs, leaf] = SplitLast(name);
    auto dir = OpenDirBelow(root, dirs);
    if (!dir.ok()) return dir.status();
    const std::string path = root + "/" + name;
    struct stat st {};
    if (::fstatat(dir->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return Status::NotFound(path + " does not exist");
      return Errno("reading the status of " + path);
    }
    // Never follows the last segment either: a link is removed, not its target.
    if (::unlinkat(dir->get(), leaf.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0) {
      if (errno == ENOENT) return Status::NotFound(path + " does not exist");
      return Errno("removing " + path);
    }
    return Status::OK();
  }

  StatusOr<std::string> ReadFile(const std::string& root, const std::string& name,
                                 uint64_t max_bytes) override {
    const auto [dirs, leaf] = SplitLast(name);
    auto dir = OpenDirBelow(root, dirs);
    if (!dir.ok()) return dir.status();
    const std::string path = root + "/" + name;
    UniqueFd fd(::openat(dir->get(), leaf.c_str(),
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat st {};
    if (fd.get() < 0) {
      const int open_errno = errno;
      if (open_errno == ENOENT) return Status::NotFound(path + " does not exist");
      if (open_errno == ELOOP &&
          ::fstatat(dir->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        return Status::Corruption(path + " is " + KindOf(st.st_mode) +
                                  ", where kvfold keeps a regular file: refused, not followed");
      }
      errno = open_errno;
      return Errno("opening " + path);
    }
    if (::fstat(fd.get(), &st) != 0) return Errno("reading the status of " + path);
    if (!S_ISREG(st.st_mode) && !KVFOLD_MUTANT("dir-read-any-kind")) {
      return Status::Corruption(path + " is " + KindOf(st.st_mode) +
                                ", where kvfold keeps a regular file: refused unread");
    }
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size > max_bytes) {
      return Status::Corruption(path + " is " + std::to_string(size) + " bytes, more than the " +
                                std::to_string(max_bytes) + " expected of it: refused unread");
    }
    // Exactly the size seen, and then the end of the file: never more.
    std::string out(size, '\0');
    size_t done = 0;
    char past_end;
    while (true) {
      const bool at_end = done == out.size();
      const ssize_t n = at_end ? ::read(fd.get(), &past_end, 1)
                               : ::read(fd.get(), out.data() + done, out.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("reading " + path);
      }
      if (n == 0 && at_end) return out;
      if (n == 0 || at_end) {
        return Status::Corruption(path + " changed size while read (" + std::to_string(size) +
                                  " bytes at first): refused");
      }
      done += static_cast<size_t>(n);
    }
  }

  StatusOr<std::vector<std::string>> ListFiles(const std::string& dir) override {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      // A link is not followed: an object is a file kvfold wrote there.
      std::error_code kind_ec;
      if (it->symlink_status(kind_ec).type() != fs::file_type::regular) continue;
      out.push_back(fs::relative(it->path(), dir).string());
    }
    if (ec) return Status::IOError("listing " + dir + ": " + ec.message());
    return out;
  }

  StatusOr<FileKind> Kind(const std::string& path) override {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (st.type() == fs::file_type::not_found) return FileKind::kMissing;
    if (ec) return Status::IOError("reading the status of " + path + ": " + ec.message());
    if (fs::is_directory(st)) return FileKind::kDirectory;
    if (fs::is_regular_file(st)) return FileKind::kFile;
    return FileKind::kOther;
  }

  StatusOr<std::unique_ptr<FileLock>> LockFile(const std::string& path,
                                               std::chrono::milliseconds timeout) override {
    // Never through a link: another writer to the location could point it
    // anywhere, and O_CREAT would make the file there. Mode as NewFile's:
    // under umask 002 a group of exporters can all open it to lock it.
    const int flags =
        O_RDWR | O_CREAT | O_CLOEXEC | (KVFOLD_MUTANT("dir-lock-follows-link") ? 0 : O_NOFOLLOW);
    const int fd = ::open(path.c_str(), flags, 0666);
    if (fd < 0) {
      struct stat st {};
      if (errno == ELOOP && ::lstat(path.c_str(), &st) == 0) {
        return Status::Corruption(path + " is " + KindOf(st.st_mode) +
                                  ", where kvfold keeps its lock file: refused, not followed "
                                  "(another writer to the location replaced it; remove it)");
      }
      return Errno("opening " + path);
    }
    // Polled, not blocking: flock has no timeout, and anyone who can open
    // the file can hold it forever.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::milliseconds(1);
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(50));
      } else if (errno != EINTR) {
        Status s =
            errno == EWOULDBLOCK
                ? Status::Unavailable(
                      "another process has held the lock " + path + " for over " +
                      std::to_string(timeout.count()) +
                      " ms (a pointer swap takes milliseconds): find it with `fuser " + path + "`")
                : Errno("locking " + path);
        ::close(fd);
        return s;
      }
    }
    return std::unique_ptr<FileLock>(new PosixFileLock(fd));
  }
};

}  // namespace

FileOps* PosixFileOps() {
  static FileOps* const ops = new PosixOps();
  return ops;
}

}  // namespace kvfold::artifact
