// The value of an export lease key: {"holder":"…","expires_unix_ms":N}.

#ifndef KVFOLD_NATS_LEASE_RECORD_H_
#define KVFOLD_NATS_LEASE_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "kvfold/status.h"

namespace kvfold::nats {

struct LeaseRecord {
  std::string holder;
  int64_t expires_unix_ms = 0;
};

std::string EncodeLeaseRecord(const LeaseRecord& lease);

enum class LeaseState {
  kFree,         // expired, or held by the asker
  kHeld,         // another holder's, for at most a few periods more
  kImplausible,  // another holder's, expiring further ahead than any node
                 // sets: squatted (or a clock far off); taken over
};
// How `lease` stands for `asker` at `now_ms`, asking for `ttl`: a holder sets
// now + its own period, so an expiry beyond kMaxLeasePeriods of `ttl` (plus
// kLeaseClockSkew for clocks that differ) is no holder's.
inline constexpr int kMaxLeasePeriods = 4;
inline constexpr int64_t kLeaseClockSkewMs = 60'000;
LeaseState StateOf(const LeaseRecord& lease, const std::string& asker, int64_t now_ms,
                   int64_t ttl_ms);

// Corruption naming `what` when `data` is not a JSON object with a string
// "holder" and an integer "expires_unix_ms".
StatusOr<LeaseRecord> DecodeLeaseRecord(std::string_view data, const std::string& what);

}  // namespace kvfold::nats

#endif  // KVFOLD_NATS_LEASE_RECORD_H_
