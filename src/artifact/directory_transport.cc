#include "artifact/directory_transport.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "artifact/pointer_codec.h"
#include "core/pointer_rule.h"

namespace kvfold::artifact {
namespace {

namespace fs = std::filesystem;

Status Errno(const std::string& what) {
  return Status::IOError(what + ": " + std::strerror(errno));
}

Status FsyncPath(const fs::path& p, bool directory) {
  int fd = ::open(p.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return Errno("opening " + p.string() + " to fsync");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Errno("fsync " + p.string());
  return Status::OK();
}

// Writes `bytes` to `target` atomically and durably.
Status WriteAtomically(const fs::path& target, std::string_view bytes) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on
  // `"." + std::string` (GCC bug 105329).
  std::string tmp_name = target.filename().string();
  tmp_name.insert(tmp_name.begin(), '.');
  tmp_name.append(".tmp-").append(std::to_string(rng()));
  const fs::path tmp = target.parent_path() / tmp_name;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return Errno("creating " + tmp.string());
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = Errno("writing " + tmp.string());
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    Status s = Errno("fsync " + tmp.string());
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    Status s = Errno("renaming " + tmp.string() + " to " + target.string());
    ::unlink(tmp.c_str());
    return s;
  }
  return FsyncPath(target.parent_path(), /*directory=*/true);
}

class DirectoryTransport final : public Transport {
 public:
  explicit DirectoryTransport(fs::path root)
      : root_(std::move(root)), location_("dir:" + root_.string()) {}

  const std::string& location() const override { return location_; }

  Status Put(const std::string& name, std::string_view bytes) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    const fs::path target = root_ / name;
    std::error_code ec;
    const bool created = fs::create_directories(target.parent_path(), ec);
    if (ec) return Status::IOError("creating " + target.parent_path().string() + ": " + ec.message());
    if (created) KVFOLD_RETURN_IF_ERROR(FsyncPath(target.parent_path().parent_path(), true));
    return WriteAtomically(target, bytes);
  }

  StatusOr<std::string> Get(const std::string& name) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    return ReadFile(root_ / name);
  }

  Status Remove(const std::string& name) override {
    KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
    const fs::path target = root_ / name;
    std::error_code ec;
    fs::remove(target, ec);
    if (ec) return Status::IOError("removing " + target.string() + ": " + ec.message());
    // Drop directories the removal left empty, up to the root.
    for (fs::path dir = target.parent_path(); dir != root_ && fs::is_empty(dir, ec); dir = dir.parent_path()) {
      fs::remove(dir, ec);
    }
    return Status::OK();
  }

  StatusOr<std::vector<std::string>> List() override {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root_, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (!it->is_regular_file()) continue;
      const std::string rel = fs::relative(it->path(), root_).string();
      if (rel == kPointerName || !ValidateObjectName(rel).ok()) continue;
      if (it->path().filename().string().front() == '.') continue;  // temp files, .lock
      out.push_back(rel);
    }
    if (ec) return Status::IOError("listing " + root_.string() + ": " + ec.message());
    std::sort(out.begin(), out.end());
    return out;
  }

  StatusOr<std::optional<ArtifactPointer>> ReadPointer() override {
    auto bytes = ReadFile(root_ / kPointerName);
    if (bytes.status().IsNotFound()) return std::optional<ArtifactPointer>();
    if (!bytes.ok()) return bytes.status();
    auto p = DecodePointer(*bytes, location_);
    if (!p.ok()) return p.status();
    return std::optional<ArtifactPointer>(*p);
  }

  Status AdvancePointer(const ArtifactPointer& next) override {
    const fs::path lock_path = root_ / ".lock";
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0) return Errno("opening " + lock_path.string());
    // The read-check-write below must not interleave with another exporter's.
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        Status s = Errno("locking " + lock_path.string());
        ::close(fd);
        return s;
      }
    }
    Status s = [&]() -> Status {
      auto current = ReadPointer();
      if (!current.ok()) return current.status();
      KVFOLD_RETURN_IF_ERROR(core::CheckPointerAdvance(*current, next));
      return WriteAtomically(root_ / kPointerName, EncodePointer(next));
    }();
    ::flock(fd, LOCK_UN);
    ::close(fd);
    return s;
  }

 private:
  static StatusOr<std::string> ReadFile(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
      std::error_code ec;
      if (!fs::exists(p, ec)) return Status::NotFound(p.string() + " does not exist");
      return Status::IOError("cannot read " + p.string());
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  fs::path root_;
  std::string location_;
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> OpenDirectoryTransport(const std::string& root,
                                                            bool create_if_missing) {
  std::error_code ec;
  if (create_if_missing) {
    fs::create_directories(root, ec);
    if (ec) return Status::IOError("creating artifact directory " + root + ": " + ec.message());
  } else if (!fs::exists(root, ec)) {
    return Status::NotFound("no artifact directory at " + root);
  }
  if (!fs::is_directory(root, ec)) {
    return Status::InvalidArgument("artifact location " + root + " is not a directory");
  }
  return std::unique_ptr<Transport>(new DirectoryTransport(fs::path(root)));
}

}  // namespace kvfold::artifact
