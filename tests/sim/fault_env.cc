#include "sim/fault_env.h"

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/system_clock.h>

#include <algorithm>
#include <string_view>
#include <vector>

namespace kvfold::sim {

using rocksdb::FileOptions;
using rocksdb::FSWritableFile;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

const char* EnvFaultName(EnvFault f) {
  switch (f) {
    case EnvFault::kNone:
      return "none";
    case EnvFault::kError:
      return "env-error";
    case EnvFault::kKill:
      return "env-kill";
    case EnvFault::kKillTorn:
      return "env-kill-torn";
    case EnvFault::kPowerCut:
      return "env-power-cut";
    case EnvFault::kSyncLost:
      return "env-sync-lost";
  }
  return "?";
}

struct FaultEnv::State {
  std::mutex mu;
  uint64_t ops = 0;
  uint64_t fired = 0;
  std::map<uint64_t, EnvFault> armed;
  std::vector<uint64_t> syncs;  // the operations that were syncs
  bool dead = false;
  bool power_cut = false;
  struct Size {
    uint64_t written = 0;
    uint64_t synced = 0;
    // Byte ranges [first, second) a failed sync dropped: a power cut
    // turns them to zeros, whatever later syncs said.
    std::vector<std::pair<uint64_t, uint64_t>> lost;
  };
  std::map<std::string, Size> files;

  // What happens to the write operation about to run: kNone goes ahead.
  // Only `counted` operations can be the armed one.
  EnvFault Next(bool counted = true, bool sync = false) {
    if (dead) return EnvFault::kKill;
    if (!counted) return EnvFault::kNone;
    ++ops;
    if (sync) syncs.push_back(ops);
    auto it = armed.find(ops);
    if (it == armed.end() || it->second == EnvFault::kNone) return EnvFault::kNone;
    EnvFault fault = it->second;
    if (fault == EnvFault::kSyncLost && !sync) fault = EnvFault::kError;
    ++fired;
    if (fault == EnvFault::kKill || fault == EnvFault::kKillTorn || fault == EnvFault::kPowerCut) {
      dead = true;
      power_cut = fault == EnvFault::kPowerCut;
    }
    return fault;
  }
};

namespace {

// A write error is reported. A death is not: the process is gone, so
// nothing it does afterwards reaches the disk, and nothing it does matters
// (FaultFold reports the death to the watcher). Reporting it would only
// send RocksDB into its error paths, whose flush retry sleeps a second.
IOStatus Injected(EnvFault f) {
  if (f == EnvFault::kSyncLost) return IOStatus::IOError("simulated fsync error (pages dropped)");
  return f == EnvFault::kError ? IOStatus::IOError("simulated write error") : IOStatus::OK();
}

// What a dead process opens for writing: nothing reaches the disk.
class VoidFile final : public FSWritableFile {
 public:
  IOStatus Append(const Slice&, const IOOptions&, IODebugContext*) override {
    return IOStatus::OK();
  }
  IOStatus Close(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
  IOStatus Flush(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
  IOStatus Sync(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
  uint64_t GetFileSize(const IOOptions&, IODebugContext*) override { return 0; }
};

bool Counted(const std::string& name) {
  const std::string_view base = std::string_view(name).substr(name.rfind('/') + 1);
  return !base.starts_with("LOG") && base != "LOCK";
}

class FaultFile final : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultFile(std::unique_ptr<FSWritableFile> f, std::string name,
            std::shared_ptr<FaultEnv::State> state)
      : FSWritableFileOwnerWrapper(std::move(f)),
        name_(std::move(name)),
        state_(std::move(state)) {}

  IOStatus Append(const Slice& data, const IOOptions& o, IODebugContext* d) override {
    return Write(data, [&](const Slice& s) { return target()->Append(s, o, d); });
  }
  IOStatus Append(const Slice& data, const IOOptions& o, const rocksdb::DataVerificationInfo& v,
                  IODebugContext* d) override {
    return Write(data, [&](const Slice& s) { return target()->Append(s, o, v, d); });
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& o,
                            IODebugContext* d) override {
    return Write(data, [&](const Slice& s) { return target()->PositionedAppend(s, offset, o, d); });
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& o,
                            const rocksdb::DataVerificationInfo& v, IODebugContext* d) override {
    return Write(data,
                 [&](const Slice& s) { return target()->PositionedAppend(s, offset, o, v, d); });
  }
  IOStatus Sync(const IOOptions& o, IODebugContext* d) override {
    return Synced([&] { return target()->Sync(o, d); });
  }
  IOStatus Fsync(const IOOptions& o, IODebugContext* d) override {
    return Synced([&] { return target()->Fsync(o, d); });
  }
  // As a file on disk: a sync may run beside an append (DB::SyncWAL), and
  // both take the state's lock here.
  bool IsSyncThreadSafe() const override { return true; }
  IOStatus Truncate(uint64_t size, const IOOptions& o, IODebugContext* d) override {
    std::lock_guard lock(state_->mu);
    if (state_->dead) return IOStatus::OK();
    auto& sz = state_->files[name_];
    sz.written = size;
    sz.synced = std::min(sz.synced, size);
    for (auto& [from, to] : sz.lost) to = std::min(to, size);
    return target()->Truncate(size, o, d);
  }

 private:
  template <class F>
  IOStatus Write(const Slice& data, F write) {
    std::lock_guard lock(state_->mu);
    const EnvFault f = state_->Next(Counted(name_));
    if (f == EnvFault::kKillTorn && data.size() > 1) {
      const Slice half(data.data(), data.size() / 2);
      if (write(half).ok()) state_->files[name_].written += half.size();
    }
    if (f != EnvFault::kNone) return Injected(f == EnvFault::kSyncLost ? EnvFault::kError : f);
    IOStatus s = write(data);
    if (s.ok()) state_->files[name_].written += data.size();
    return s;
  }
  template <class F>
  IOStatus Synced(F sync) {
    std::lock_guard lock(state_->mu);
    const EnvFault f = state_->Next(Counted(name_), /*sync=*/true);
    if (f == EnvFault::kSyncLost) {
      auto& sz = state_->files[name_];
      if (sz.written > sz.synced) sz.lost.emplace_back(sz.synced, sz.written);
      sz.synced = sz.written;  // clean: no later sync writes them
    }
    if (f != EnvFault::kNone) return Injected(f);
    IOStatus s = sync();
    if (s.ok()) state_->files[name_].synced = state_->files[name_].written;
    return s;
  }

  std::string name_;
  std::shared_ptr<FaultEnv::State> state_;
};

class FaultFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  FaultFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base,
                  std::shared_ptr<FaultEnv::State> state)
      : FileSystemWrapper(base), state_(std::move(state)) {}
  const char* Name() const override { return "KvfoldFaultFileSystem"; }

  IOStatus NewWritableFile(const std::string& f, const FileOptions& o,
                           std::unique_ptr<FSWritableFile>* r, IODebugContext* d) override {
    {
      std::lock_guard lock(state_->mu);
      EnvFault fault = state_->Next(Counted(f));
      if (fault == EnvFault::kSyncLost) fault = EnvFault::kError;
      if (fault == EnvFault::kError) return Injected(fault);
      if (fault != EnvFault::kNone) {
        *r = std::make_unique<VoidFile>();
        return IOStatus::OK();
      }
      state_->files[f] = {};
    }
    std::unique_ptr<FSWritableFile> file;
    IOStatus s = target()->NewWritableFile(f, o, &file, d);
    if (s.ok()) *r = std::make_unique<FaultFile>(std::move(file), f, state_);
    return s;
  }
  IOStatus ReopenWritableFile(const std::string& f, const FileOptions& o,
                              std::unique_ptr<FSWritableFile>* r, IODebugContext* d) override {
    {
      std::lock_guard lock(state_->mu);
      if (state_->dead) {
        *r = std::make_unique<VoidFile>();
        return IOStatus::OK();
      }
    }
    std::unique_ptr<FSWritableFile> file;
    IOStatus s = target()->ReopenWritableFile(f, o, &file, d);
    if (s.ok()) *r = std::make_unique<FaultFile>(std::move(file), f, state_);
    return s;
  }
  IOStatus ReuseWritableFile(const std::string&, const std::string&, const FileOptions&,
                             std::unique_ptr<FSWritableFile>*, IODebugContext*) override {
    return IOStatus::NotSupported("the simulated file system does not recycle files");
  }
  IOStatus RenameFile(const std::string& from, const std::string& to, const IOOptions& o,
                      IODebugContext* d) override {
    std::lock_guard lock(state_->mu);
    EnvFault fault = state_->Next();
    if (fault == EnvFault::kSyncLost) fault = EnvFault::kError;
    if (fault != EnvFault::kNone) return Injected(fault);
    IOStatus s = target()->RenameFile(from, to, o, d);
    if (s.ok()) {
      auto it = state_->files.find(from);
      if (it != state_->files.end()) {
        state_->files[to] = it->second;
        state_->files.erase(it);
      }
    }
    return s;
  }
  // A hard link (what an ingestion of staged table files makes) is a
  // write operation of the directory like a rename, and may fail or die.
  IOStatus LinkFile(const std::string& from, const std::string& to, const IOOptions& o,
                    IODebugContext* d) override {
    std::lock_guard lock(state_->mu);
    EnvFault fault = state_->Next();
    if (fault == EnvFault::kSyncLost) fault = EnvFault::kError;
    if (fault != EnvFault::kNone) return Injected(fault);
    IOStatus s = target()->LinkFile(from, to, o, d);
    if (s.ok()) {
      auto it = state_->files.find(from);
      if (it != state_->files.end()) state_->files[to] = it->second;
    }
    return s;
  }
  IOStatus DeleteFile(const std::string& f, const IOOptions& o, IODebugContext* d) override {
    std::lock_guard lock(state_->mu);
    if (state_->dead) return IOStatus::OK();
    state_->files.erase(f);
    return target()->DeleteFile(f, o, d);
  }

  // Cuts every file back to what was synced, and zeros what a failed sync
  // dropped.
  void DropUnsynced() {
    std::lock_guard lock(state_->mu);
    for (auto& [name, size] : state_->files) {
      if (size.written == size.synced && size.lost.empty()) continue;
      std::unique_ptr<rocksdb::FSSequentialFile> in;
      if (!target()->NewSequentialFile(name, FileOptions(), &in, nullptr).ok()) continue;
      std::string kept(size.synced, '\0');
      Slice got;
      (void)in->Read(size.synced, IOOptions(), &got, kept.data(), nullptr);
      kept.resize(got.size());
      if (got.data() != kept.data()) kept.assign(got.data(), got.size());
      for (const auto& [from, to] : size.lost) {
        for (uint64_t i = from; i < to && i < kept.size(); ++i) kept[i] = '\0';
      }
      size.lost.clear();
      std::unique_ptr<FSWritableFile> out;
      if (!target()->NewWritableFile(name, FileOptions(), &out, nullptr).ok()) continue;
      (void)out->Append(Slice(kept), IOOptions(), nullptr);
      (void)out->Close(IOOptions(), nullptr);
      size.written = size.synced = kept.size();
    }
  }

 private:
  std::shared_ptr<FaultEnv::State> state_;
};

// RocksDB backs off a second after a failed background flush; the
// simulation's time does not pass while it waits.
class InstantSleepClock final : public rocksdb::SystemClockWrapper {
 public:
  using SystemClockWrapper::SystemClockWrapper;
  const char* Name() const override { return "KvfoldInstantSleepClock"; }
  void SleepForMicroseconds(int) override {}
};

class SimEnv final : public rocksdb::EnvWrapper {
 public:
  explicit SimEnv(std::unique_ptr<rocksdb::Env> composite) : EnvWrapper(std::move(composite)) {
    system_clock_ = std::make_shared<InstantSleepClock>(target()->GetSystemClock());
  }
  const char* Name() const override { return "KvfoldSimEnv"; }
  void SleepForMicroseconds(int) override {}
};

}  // namespace

FaultEnv::FaultEnv()
    : mem_(rocksdb::NewMemEnv(rocksdb::Env::Default())), state_(std::make_shared<State>()) {
  fs_ = std::make_shared<FaultFileSystem>(mem_->GetFileSystem(), state_);
  env_ = std::make_unique<SimEnv>(rocksdb::NewCompositeEnv(fs_));
}

FaultEnv::~FaultEnv() = default;

void FaultEnv::Disarm() {
  std::lock_guard lock(state_->mu);
  state_->armed.clear();
}

void FaultEnv::Arm(uint64_t n, EnvFault fault) {
  std::lock_guard lock(state_->mu);
  state_->armed.clear();
  state_->armed[n] = fault;
}

void FaultEnv::Add(uint64_t n, EnvFault fault) {
  std::lock_guard lock(state_->mu);
  state_->armed[n] = fault;
}

bool FaultEnv::WasSync(uint64_t n) const {
  std::lock_guard lock(state_->mu);
  return std::binary_search(state_->syncs.begin(), state_->syncs.end(), n);
}

uint64_t FaultEnv::operations() const {
  std::lock_guard lock(state_->mu);
  return state_->ops;
}

uint64_t FaultEnv::fired() const {
  std::lock_guard lock(state_->mu);
  return state_->fired;
}

bool FaultEnv::dead() const {
  std::lock_guard lock(state_->mu);
  return state_->dead;
}

void FaultEnv::CutPower() {
  std::lock_guard lock(state_->mu);
  state_->dead = state_->power_cut = true;
}

void FaultEnv::Restart() {
  bool cut;
  {
    std::lock_guard lock(state_->mu);
    cut = state_->power_cut;
  }
  if (cut) static_cast<FaultFileSystem*>(fs_.get())->DropUnsynced();
  std::lock_guard lock(state_->mu);
  state_->dead = state_->power_cut = false;
}

}  // namespace kvfold::sim
