// A fault-injecting wrapper around a real Fold: fails or "crashes" at a
// chosen commit, before or after the inner store applied it.

#ifndef KVFOLD_TESTS_SIM_FAULT_FOLD_H_
#define KVFOLD_TESTS_SIM_FAULT_FOLD_H_

#include <atomic>
#include <functional>
#include <map>

#include "kvfold/fold.h"

namespace kvfold::sim {

enum class Fault {
  kNone,
  kFailBefore,   // transient: the commit is not applied, reports IOError
  kFailAfter,    // transient: the commit is applied, still reports IOError
  kCrashBefore,  // the process dies before the commit reaches the store
  kCrashAfter,   // the process dies right after the store applied it
  kTorn,         // the entries are durable but not the cursor (nor any
                 // metadata), then it dies
};

const char* FaultName(Fault f);

class FaultFold final : public Fold {
 public:
  explicit FaultFold(Fold& inner) : inner_(&inner) {}
  // The process restarted on a reopened store.
  void Reattach(Fold& inner) {
    inner_ = &inner;
    crashed_ = false;
  }

  // Injects `fault` at the `n`-th commit attempt (1-based), and only there.
  void Arm(int n, Fault fault) {
    armed_.clear();
    Add(n, fault);
  }
  // Injects `fault` at the `n`-th attempt too (a schedule of several).
  void Add(int n, Fault fault) { armed_[n] = fault; }
  // Every commit attempt from now on fails before applying.
  void FailEveryCommit() {
    FailEveryCommitWith(Status::IOError("simulated persistent store failure"));
  }
  // ... with `why`.
  void FailEveryCommitWith(Status why) {
    fail_all_ = true;
    fail_all_with_ = std::move(why);
  }
  void StopFailing() { fail_all_ = false; }
  // Every write of `key` from now on, by a commit or a loader, stores it
  // at its revision plus one and reports success: a silent fault of the
  // disk or of the write path, which only reading back can tell.
  void MisrememberRevisionOf(std::string key) { misremember_ = std::move(key); }

  // Asked before and after each call: true once the process died under
  // the store (a FaultEnv death), which this wrapper then reports.
  void SetDeathCheck(std::function<bool()> dead) { dead_ = std::move(dead); }

  int attempts() const { return attempts_; }
  bool crashed() const { return crashed_; }
  // How many commit attempts a fault hit.
  int fired() const { return fired_; }

  Status Get(std::string_view key, Entry* out) override;
  Status Scan(std::string_view prefix, bool include_tombstones,
              const std::function<bool(std::string_view, const Entry&)>& fn) override;
  Status ScanFrom(std::string_view start_key, bool include_tombstones,
                  const std::function<bool(std::string_view, const Entry&)>& fn) override;
  StatusOr<FoldMeta> ReadMeta() override;
  StatusOr<std::unique_ptr<FoldSnapshot>> Snapshot() override;
  Status Commit(const FoldCommit& commit) override;
  Status Recount() override;
  StatusOr<std::unique_ptr<FoldLoader>> NewLoader() override;

 private:
  // `commit` as the store keeps it (MisrememberRevisionOf).
  FoldCommit Misremembered(const FoldCommit& commit) const;
  std::string misremember_;
  Fold* inner_;
  std::map<int, Fault> armed_;
  std::function<bool()> dead_;
  bool Died() {
    if (!crashed_ && dead_ && dead_()) crashed_ = true;
    return crashed_;
  }
  bool fail_all_ = false;
  Status fail_all_with_;
  // Commit runs on the watcher's committer thread while it reads.
  std::atomic<int> attempts_{0};
  std::atomic<bool> crashed_{false};
  std::atomic<int> fired_{0};
};

}  // namespace kvfold::sim

#endif  // KVFOLD_TESTS_SIM_FAULT_FOLD_H_
