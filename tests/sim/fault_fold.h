// A fault-injecting wrapper around a real Fold: fails or "crashes" at a
// chosen commit, before or after the inner store applied it.

#ifndef KVFOLD_TESTS_SIM_FAULT_FOLD_H_
#define KVFOLD_TESTS_SIM_FAULT_FOLD_H_

#include <atomic>

#include "kvfold/fold.h"

namespace kvfold::sim {

enum class Fault {
  kNone,
  kFailBefore,   // transient: the commit is not applied, reports IOError
  kFailAfter,    // transient: the commit is applied, still reports IOError
  kCrashBefore,  // the process dies before the commit reaches the store
  kCrashAfter,   // the process dies right after the store applied it
};

const char* FaultName(Fault f);

class FaultFold final : public Fold {
 public:
  explicit FaultFold(Fold& inner) : inner_(inner) {}

  // Injects `fault` at the `n`-th commit attempt (1-based).
  void Arm(int n, Fault fault) {
    armed_at_ = n;
    fault_ = fault;
  }
  // Every commit attempt from now on fails before applying.
  void FailEveryCommit() { fail_all_ = true; }

  int attempts() const { return attempts_; }
  bool crashed() const { return crashed_; }

  Status Get(std::string_view key, Entry* out) override;
  Status Scan(std::string_view prefix, bool include_tombstones,
              const std::function<bool(std::string_view, const Entry&)>& fn) override;
  Status ScanFrom(std::string_view start_key, bool include_tombstones,
                  const std::function<bool(std::string_view, const Entry&)>& fn) override;
  StatusOr<FoldMeta> ReadMeta() override;
  StatusOr<std::unique_ptr<FoldSnapshot>> Snapshot() override;
  Status Commit(const FoldCommit& commit) override;

 private:
  Fold& inner_;
  int armed_at_ = 0;
  Fault fault_ = Fault::kNone;
  bool fail_all_ = false;
  // Commit runs on the watcher's committer thread while it reads.
  std::atomic<int> attempts_{0};
  std::atomic<bool> crashed_{false};
};

}  // namespace kvfold::sim

#endif  // KVFOLD_TESTS_SIM_FAULT_FOLD_H_
