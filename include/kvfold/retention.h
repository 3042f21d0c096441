// Retention: what a bucket's limits mean for a fold that fell behind.
//
// Read fresh from the stream on every decision (limits can be edited live).
// The README's "Repair policies" says what each class means for repair.
// All functions here are pure and thread-safe.

#ifndef KVFOLD_RETENTION_H_
#define KVFOLD_RETENTION_H_

#include <cstdint>
#include <string>

#include "kvfold/bucket.h"

namespace kvfold {

struct Retention {
  // The bucket can remove a key's current value without a trace: discard=old
  // under max_msgs or max_bytes, or max_age without limit markers.
  // (discard=new rejects writes instead; the per-key history limit drops
  // only superseded revisions.) An expiry, a per-message TTL or max_age on
  // a bucket with limit markers, is a delete, not an eviction: the key
  // leaves the truth and the key listing alike.
  bool evicts_current_values = false;
  // What evicts: "volume" or "unmarked age"; "" when nothing does.
  std::string eviction_cause;
  // The first revision the stream still holds (state.first_seq).
  uint64_t first_retained_revision = 0;
  // The bucket evicts current values and has evicted something already:
  // the fold must record the eviction memo.
  bool has_evicted = false;
  // A key listing is the truth: every live key is listed and every
  // unlisted key is deleted. True when the bucket does not evict current
  // values, or it has never evicted anything (first_seq <= 1), and the
  // fold has never observed eviction.
  bool listing_is_truth = false;
};

// Classifies `stream` for a fold whose eviction memo is `eviction_observed`.
Retention ClassifyRetention(const StreamState& stream, bool eviction_observed);

// "evicts current values (max_msgs 3000, discard old), first retained 1234",
// for messages and logs.
std::string DescribeRetention(const StreamState& stream, const Retention& retention);

}  // namespace kvfold

#endif  // KVFOLD_RETENTION_H_
