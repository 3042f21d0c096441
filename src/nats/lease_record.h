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

// Corruption naming `what` when `data` is not a JSON object with a string
// "holder" and an integer "expires_unix_ms".
StatusOr<LeaseRecord> DecodeLeaseRecord(std::string_view data, const std::string& what);

}  // namespace kvfold::nats

#endif  // KVFOLD_NATS_LEASE_RECORD_H_
