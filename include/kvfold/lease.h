// A lease in a NATS KV bucket, so that one node per round does a scheduled
// job (an export). Acquiring is a compare-and-swap on the lease key
// (Nats-Expected-Last-Subject-Sequence): of several nodes racing for an
// expired lease exactly one wins.

#ifndef KVFOLD_LEASE_H_
#define KVFOLD_LEASE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "kvfold/connection.h"
#include "kvfold/status.h"

namespace kvfold {

struct LeaseOptions {
  // Told when a lease is taken over from another holder because its expiry
  // lies further ahead than any node sets (a few periods): a squatted
  // lease, or a holder whose clock is far off. Default: none.
  std::function<void(const std::string& line)> warn;
};

class ExportLease {
 public:
  // Connects and creates the KV bucket `lease_bucket` when missing.
  static StatusOr<std::unique_ptr<ExportLease>> Open(const ConnectOptions& connect,
                                                     const std::string& lease_bucket,
                                                     LeaseOptions options = {});
  virtual ~ExportLease() = default;

  // True when `holder` now holds `key` until now + ttl: the key was free,
  // expired, already held by `holder`, or held by another until further
  // ahead than 4 × ttl + 1 minute (no holder sets that: squatted), and no
  // other node won the swap. Nodes that share a lease should share their
  // period too (within a factor of 4).
  // Corruption when the key holds a value that is not a lease (deleting the
  // key frees it); Unavailable when the server does not answer.
  virtual StatusOr<bool> TryAcquire(const std::string& key, const std::string& holder,
                                    std::chrono::milliseconds ttl) = 0;

  // Checks now, without taking or changing `key`, that the server lets
  // this node read and write it: PermissionDenied naming the refused
  // subject when not. An exporter calls it at start, so that missing
  // rights fail there and not at its first round. OK where a lease has
  // nothing to check.
  virtual Status CheckAccess(const std::string& key) {
    (void)key;
    return Status::OK();
  }
};

}  // namespace kvfold

#endif  // KVFOLD_LEASE_H_
