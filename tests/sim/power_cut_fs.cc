#include "sim/power_cut_fs.h"

#include <algorithm>
#include <functional>

namespace kvfold::sim {
namespace {

// "/a/b/c" -> {"a", "b", "c"}; empty and "." segments dropped.
std::optional<std::vector<std::string>> Split(const std::string& path) {
  if (path.empty() || path.front() != '/') return std::nullopt;
  std::vector<std::string> out;
  size_t start = 1;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    const std::string seg = path.substr(start, slash - start);
    if (seg == "..") return std::nullopt;
    if (!seg.empty() && seg != ".") out.push_back(seg);
    start = slash + 1;
  }
  return out;
}

}  // namespace

class PowerCutFs::File final : public artifact::WritableFile {
 public:
  File(PowerCutFs* fs, uint64_t boot, size_t node, std::string path)
      : fs_(fs), boot_(boot), node_(node), path_(std::move(path)) {}

  Status Append(std::string_view bytes) override {
    return Apply("append " + path_, [&](Node& n) { n.data.append(bytes); });
  }
  Status Sync() override {
    std::lock_guard<std::mutex> l(fs_->mu_);
    const std::string what = "fsync " + path_;
    KVFOLD_RETURN_IF_ERROR(fs_->Operation(what));
    if (boot_ != fs_->boot_)
      return Status::IOError(what + ": the file was opened before a power cut");
    return fs_->Sync(node_, what);
  }
  Status Close() override {
    return Apply("close " + path_, [](Node&) {});
  }

 private:
  Status Apply(const std::string& what, const std::function<void(Node&)>& apply) {
    std::lock_guard<std::mutex> l(fs_->mu_);
    KVFOLD_RETURN_IF_ERROR(fs_->Operation(what));
    if (boot_ != fs_->boot_)
      return Status::IOError(what + ": the file was opened before a power cut");
    apply(fs_->nodes_[node_]);
    return Status::OK();
  }

  PowerCutFs* const fs_;
  const uint64_t boot_;
  const size_t node_;
  const std::string path_;
};

PowerCutFs::PowerCutFs() { NewNode(/*is_dir=*/true); }

void PowerCutFs::CutAt(uint64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  cut_at_ = n;
}

void PowerCutFs::FailSyncAt(uint64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  fail_sync_at_ = n;
}

uint64_t PowerCutFs::failed_syncs() const {
  std::lock_guard<std::mutex> l(mu_);
  return failed_syncs_;
}

void PowerCutFs::CutNow() {
  std::lock_guard<std::mutex> l(mu_);
  power_cut_ = true;
}

bool PowerCutFs::power_cut() const {
  std::lock_guard<std::mutex> l(mu_);
  return power_cut_;
}

uint64_t PowerCutFs::operations() const {
  std::lock_guard<std::mutex> l(mu_);
  return operations_;
}

std::string PowerCutFs::Describe(uint64_t n) const {
  std::lock_guard<std::mutex> l(mu_);
  if (n == 0 || n > log_.size()) return "(no operation " + std::to_string(n) + ")";
  return log_[n - 1];
}

void PowerCutFs::Reboot() {
  std::lock_guard<std::mutex> l(mu_);
  for (Node& n : nodes_) {
    n.data = n.clean_data = n.durable_data;
    n.entries = n.clean_entries = n.durable_entries;
  }
  power_cut_ = false;
  cut_at_ = 0;
  ++boot_;
}

Status PowerCutFs::Operation(const std::string& what) {
  ++operations_;
  log_.push_back(what);
  if (operations_ == cut_at_) power_cut_ = true;
  if (power_cut_) return Status::IOError(what + ": the power is cut");
  if (operations_ == fail_sync_at_ && !what.starts_with("fsync")) {
    return Status::IOError(what + ": simulated I/O error");
  }
  return Status::OK();
}

Status PowerCutFs::Sync(size_t node, const std::string& what) {
  Node& n = nodes_[node];
  if (operations_ == fail_sync_at_) {
    // The pages are marked clean: what the disk holds for them stays as
    // it was, and no later sync writes them.
    ++failed_syncs_;
    n.clean_data = n.data;
    n.clean_entries = n.entries;
    return Status::IOError(what + ": Input/output error (simulated; the dirty pages are dropped)");
  }
  // Data: files are only appended to, so what changed is the tail past the
  // clean prefix; the rest of the disk's copy (zeros where a failed sync
  // dropped pages of a grown file) stays.
  const size_t clean = std::min(n.clean_data.size(), n.data.size());
  size_t same = 0;
  while (same < clean && n.clean_data[same] == n.data[same]) ++same;
  std::string disk = n.durable_data;
  disk.resize(n.data.size(), '\0');
  for (size_t i = same; i < n.data.size(); ++i) {
    if (i >= n.clean_data.size() || n.clean_data[i] != n.data[i]) disk[i] = n.data[i];
  }
  n.durable_data = std::move(disk);
  n.clean_data = n.data;
  // Entries: each one that differs from the clean view is written.
  for (const auto& [name, child] : n.entries) {
    auto c = n.clean_entries.find(name);
    if (c == n.clean_entries.end() || c->second != child) n.durable_entries[name] = child;
  }
  for (const auto& [name, child] : n.clean_entries) {
    if (!n.entries.contains(name)) n.durable_entries.erase(name);
  }
  n.clean_entries = n.entries;
  return Status::OK();
}

std::optional<size_t> PowerCutFs::Lookup(const std::string& path) const {
  auto segs = Split(path);
  if (!segs) return std::nullopt;
  size_t at = 0;
  for (const std::string& seg : *segs) {
    const Node& n = nodes_[at];
    if (!n.is_dir) return std::nullopt;
    auto it = n.entries.find(seg);
    if (it == n.entries.end()) return std::nullopt;
    at = it->second;
  }
  return at;
}

StatusOr<PowerCutFs::Place> PowerCutFs::Parent(const std::string& path) const {
  auto segs = Split(path);
  if (!segs || segs->empty()) return Status::InvalidArgument("no parent for \"" + path + "\"");
  std::string dir = "/";
  for (size_t i = 0; i + 1 < segs->size(); ++i) dir += (*segs)[i] + "/";
  auto d = Lookup(dir);
  if (!d) return Status::NotFound(dir + " does not exist");
  if (!nodes_[*d].is_dir) return Status::IOError(dir + " is not a directory");
  return Place{*d, segs->back()};
}

size_t PowerCutFs::NewNode(bool is_dir) {
  nodes_.emplace_back();
  nodes_.back().is_dir = is_dir;
  return nodes_.size() - 1;
}

StatusOr<std::unique_ptr<artifact::WritableFile>> PowerCutFs::NewFile(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  KVFOLD_RETURN_IF_ERROR(Operation("create " + path));
  auto place = Parent(path);
  if (!place.ok()) return place.status();
  if (nodes_[place->dir].entries.contains(place->name)) {
    return Status::IOError("creating " + path + ": File exists");
  }
  const size_t node = NewNode(/*is_dir=*/false);
  nodes_[place->dir].entries[place->name] = node;
  return std::unique_ptr<artifact::WritableFile>(new File(this, boot_, node, path));
}

Status PowerCutFs::Rename(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> l(mu_);
  KVFOLD_RETURN_IF_ERROR(Operation("rename " + from + " -> " + to));
  auto src = Parent(from);
  if (!src.ok()) return src.status();
  auto dst = Parent(to);
  if (!dst.ok()) return dst.status();
  auto it = nodes_[src->dir].entries.find(src->name);
  if (it == nodes_[src->dir].entries.end()) return Status::NotFound(from + " does not exist");
  const size_t node = it->second;
  auto old = nodes_[dst->dir].entries.find(dst->name);
  if (old != nodes_[dst->dir].entries.end() && nodes_[old->second].is_dir) {
    return Status::IOError("renaming " + from + " to " + to + ": Is a directory");
  }
  nodes_[src->dir].entries.erase(it);
  nodes_[dst->dir].entries[dst->name] = node;
  return Status::OK();
}

Status PowerCutFs::SyncDir(const std::string& dir) {
  std::lock_guard<std::mutex> l(mu_);
  KVFOLD_RETURN_IF_ERROR(Operation("fsync dir " + dir));
  auto d = Lookup(dir);
  if (!d || !nodes_[*d].is_dir) {
    return Status::IOError("opening " + dir +
                           " to fsync: " + (d ? "Not a directory" : "No such file or directory"));
  }
  return Sync(*d, "fsync dir " + dir);
}

Status PowerCutFs::CreateDirs(const std::string& dir, std::vector<std::string>* created) {
  std::lock_guard<std::mutex> l(mu_);
  KVFOLD_RETURN_IF_ERROR(Operation("create dirs " + dir));
  auto segs = Split(dir);
  if (!segs) return Status::InvalidArgument("not an absolute path: " + dir);
  size_t at = 0;
  std::string path;
  for (const std::string& seg : *segs) {
    path += "/" + seg;
    auto it = nodes_[at].entries.find(seg);
    if (it != nodes_[at].entries.end()) {
      if (!nodes_[it->second].is_dir)
        return Status::IOError("creating " + path + ": Not a directory");
      at = it->second;
      continue;
    }
    KVFOLD_RETURN_IF_ERROR(Operation("mkdir " + path));
    const size_t node = NewNode(/*is_dir=*/true);
    nodes_[at].entries[seg] = node;
    created->push_back(path);
    at = node;
  }
  return Status::OK();
}

Status PowerCutFs::Remove(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  KVFOLD_RETURN_IF_ERROR(Operation("remove " + path));
  auto place = Parent(path);
  if (!place.ok()) return place.status();
  auto it = nodes_[place->dir].entries.find(place->name);
  if (it == nodes_[place->dir].entries.end()) return Status::NotFound(path + " does not exist");
  if (nodes_[it->second].is_dir && !nodes_[it->second].entries.empty()) {
    return Status::IOError("removing " + path + ": Directory not empty");
  }
  nodes_[place->dir].entries.erase(it);
  return Status::OK();
}

// This file system has no symbolic links: nothing to refuse on the way.
Status PowerCutFs::RemoveBelow(const std::string& root, const std::string& name) {
  return Remove(root + "/" + name);
}

StatusOr<std::string> PowerCutFs::ReadFile(const std::string& root, const std::string& name,
                                           uint64_t max_bytes) {
  const std::string path = root + "/" + name;
  std::lock_guard<std::mutex> l(mu_);
  KVFOLD_RETURN_IF_ERROR(Operation("read " + path));
  auto node = Lookup(path);
  if (!node) return Status::NotFound(path + " does not exist");
  if (nodes_[*node].is_dir) return Status::IOError("cannot read " + path);
  if (nodes_[*node].data.size() > max_bytes) {
    return Status::Corruption(path + " is " + std::to_string(nodes_[*node].data.size()) +
                              " bytes, more than the " + std::to_string(max_bytes) +
                              " expected of it: refused unread");
  }
  return nodes_[*node].data;
}

StatusOr<std::vector<std::string>> PowerCutFs::ListFiles(const std::string& dir) {
  std::lock_guard<std::mutex> l(mu_);
  KVFOLD_RETURN_IF_ERROR(Operation("list " + dir));
  auto d = Lookup(dir);
  if (!d || !nodes_[*d].is_dir) return Status::IOError("listing " + dir + ": No such directory");
  std::vector<std::string> out;
  std::function<void(size_t, const std::string&)> walk = [&](size_t at, const std::string& prefix) {
    for (const auto& [name, node] : nodes_[at].entries) {
      if (nodes_[node].is_dir) {
        walk(node, prefix + name + "/");
      } else {
        out.push_back(prefix + name);
      }
    }
  };
  walk(*d, "");
  return out;
}

StatusOr<artifact::FileKind> PowerCutFs::Kind(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  KVFOLD_RETURN_IF_ERROR(Operation("stat " + path));
  auto node = Lookup(path);
  if (!node) return artifact::FileKind::kMissing;
  return nodes_[*node].is_dir ? artifact::FileKind::kDirectory : artifact::FileKind::kFile;
}

StatusOr<std::unique_ptr<artifact::FileLock>> PowerCutFs::LockFile(const std::string& path,
                                                                   std::chrono::milliseconds) {
  std::lock_guard<std::mutex> l(mu_);
  KVFOLD_RETURN_IF_ERROR(Operation("lock " + path));
  auto place = Parent(path);
  if (!place.ok()) return place.status();
  if (!nodes_[place->dir].entries.contains(place->name)) {
    const size_t node = NewNode(/*is_dir=*/false);
    nodes_[place->dir].entries[place->name] = node;
  }
  // One transport at a time uses this file system: the lock is never contended.
  return std::make_unique<artifact::FileLock>();
}

}  // namespace kvfold::sim
