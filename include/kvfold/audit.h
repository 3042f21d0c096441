// Audit: does a fold equal its bucket? Online, beside a mirror that keeps
// committing to the fold and writers that keep writing to the bucket.
//
// The audit reads the fold's cursor C first and judges every key in the
// fold's scope whose last write, in the bucket and in the fold, is at or
// below C: the fold must hold it exactly as the bucket's last message says
// (live at that revision, or deleted). A key changed after C, on either
// side, is in flight and is not judged. Revisions are compared, values are
// not: a revision names one immutable message, and a value corrupted on
// disk is what the fold's checksums catch (docs/cli.md, "audit").
//
// Cost: one headers-only key listing (as relist), a point lookup in the
// fold per listed key, a walk of the fold's keys, and one headers-only
// read of the bucket per key that looks different (paced by
// AuditOptions::max_reads_per_second). Memory is bounded: the listing
// spills to disk past `listing_memory_keys` keys.
//
// Thread safety: Audit uses `source` from the calling thread only (give it
// a source of its own, not a running watch's); `fold` may be committed to
// by another thread meanwhile.

#ifndef KVFOLD_AUDIT_H_
#define KVFOLD_AUDIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvfold/bucket.h"
#include "kvfold/fold.h"
#include "kvfold/status.h"

namespace kvfold {

struct AuditOptions {
  // Keys of the listing held in memory before it spills to a temporary
  // database under `spill_dir` ("" = the system's temporary directory).
  size_t listing_memory_keys = 1'000'000;
  std::string spill_dir;
  // At most this many of the bucket reads that confirm a difference per
  // second (0: unpaced), so an audit of a damaged fold spares the server.
  double max_reads_per_second = 0;
  // How many divergent keys the report names (all are counted).
  size_t max_named = 20;
};

// How a key differs. The first three are divergences.
enum class AuditFinding {
  kMissing,  // the bucket holds it live, the fold does not
  kStale,    // both hold it live, at different revisions
  kPhantom,  // the fold holds it live; the bucket deleted it, or holds no
             // message of it where the key listing is the truth
  kKept,     // the fold holds it live and the bucket no longer holds any
             // message of it, where the bucket evicts current values: the
             // fold keeps what the stream lost (not a divergence)
};
std::string_view AuditFindingName(AuditFinding finding);  // "missing", ...

struct AuditReport {
  uint64_t cursor = 0;            // C: the fold's cursor the audit judged at
  uint64_t listing_revision = 0;  // the stream's last sequence before the listing
  uint64_t judged = 0;            // keys judged (equal or divergent)
  uint64_t in_flight = 0;         // keys changed after C: not judged
  uint64_t missing = 0;
  uint64_t stale = 0;
  uint64_t phantom = 0;
  uint64_t kept = 0;
  struct Named {
    std::string key;
    AuditFinding finding;
    uint64_t fold_revision = 0;    // 0: the fold has no live entry
    uint64_t bucket_revision = 0;  // 0: the bucket has no message of the key
    friend bool operator==(const Named&, const Named&) = default;
  };
  std::vector<Named> named;  // the first AuditOptions::max_named divergences

  uint64_t divergent() const { return missing + stale + phantom; }
};

// Judges `fold` against `source`'s bucket over the fold's recorded scope.
// FailedPrecondition when it cannot judge: a fold without a cursor, of
// another bucket, or of another stream (the bucket was recreated); the
// errors of `source` and `fold` as they come. A divergence is a report,
// not an error.
StatusOr<AuditReport> Audit(BucketSource& source, Fold& fold, const AuditOptions& options = {});

}  // namespace kvfold

#endif  // KVFOLD_AUDIT_H_
