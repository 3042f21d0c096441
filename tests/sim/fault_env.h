// A fault-injecting file system under the real RocksDB fold: an in-memory
// file system (RocksDB's MemEnv) whose write operations can fail once, kill
// the "process" (every later write fails) with or without tearing the write
// in progress, or cut the power (the restart sees only what was synced).
// It is the seam inside the store: a commit that is not one atomic, synced
// write shows up here and nowhere else.

#ifndef KVFOLD_TESTS_SIM_FAULT_ENV_H_
#define KVFOLD_TESTS_SIM_FAULT_ENV_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace rocksdb {
class Env;
class FileSystem;
}  // namespace rocksdb

namespace kvfold::sim {

enum class EnvFault {
  kNone,
  kError,     // this one write operation fails (IOError); later ones work
  kKill,      // the process dies before this operation: nothing from it on
              // reaches the disk
  kKillTorn,  // dies halfway through this append (half its bytes written)
  kPowerCut,  // dies here, and the restart sees only what was synced
  kSyncLost,  // this sync fails the Linux way (>= 4.13, "fsyncgate"): the
              // file's unsynced bytes are marked clean without reaching the
              // disk, so they stay readable until a power cut, which turns
              // them to zeros, and a later sync succeeds without them. Any
              // other operation fails as kError.
};

const char* EnvFaultName(EnvFault f);

class FaultEnv {
 public:
  FaultEnv();
  ~FaultEnv();
  FaultEnv(const FaultEnv&) = delete;
  FaultEnv& operator=(const FaultEnv&) = delete;

  rocksdb::Env* env() { return env_.get(); }

  // Injects `fault` at the `n`-th write operation (1-based, counted over
  // the whole life of this file system: creates, appends, syncs, renames;
  // RocksDB's own info log is not counted), and at no other.
  void Arm(uint64_t n, EnvFault fault);
  // Injects `fault` at the `n`-th operation too (a schedule of several).
  void Add(uint64_t n, EnvFault fault);
  // No fault fires from now on (those armed and not reached are dropped).
  void Disarm();
  // Whether operation `n` (as counted above) was a sync.
  bool WasSync(uint64_t n) const;
  uint64_t operations() const;
  // How many operations a fault hit (a death counts once).
  uint64_t fired() const;
  bool dead() const;
  // The power goes off now: every later write is lost, and Restart() keeps
  // only what was synced.
  void CutPower();
  // The restart after a death: drops unsynced data after a power cut, then
  // lets writes work again. The dead store must be closed first.
  void Restart();

  // For the file wrappers.
  struct State;

 private:
  std::unique_ptr<rocksdb::Env> mem_;  // RocksDB's in-memory Env
  std::shared_ptr<rocksdb::FileSystem> fs_;
  std::unique_ptr<rocksdb::Env> env_;
  std::shared_ptr<State> state_;
};

}  // namespace kvfold::sim

#endif  // KVFOLD_TESTS_SIM_FAULT_ENV_H_
