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
  // RocksDB's own info log is not counted).
  void Arm(uint64_t n, EnvFault fault);
  uint64_t operations() const;
  // How many operations a fault hit (a death counts once).
  uint64_t fired() const;
  bool dead() const;
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
