// Audit: does a fold equal its bucket? Online, beside a mirror that keeps
// committing to the fold and writers that keep writing to the bucket.
//
// The audit reads the fold's cursor C first and judges every key in the
// fold's scope whose last write, in the bucket and in the fold, is at or
// below C: the fold must hold it exactly as the bucket's last message says
// (live at that revision, or deleted). A key changed after C, on either
// side, is in flight and is not judged. Revisions are compared; values only
// with AuditOptions::compare_values (a revision names one immutable
// message, so equal revisions with unequal values mean the fold's copy was
// changed: a write path's bug or a disk's fault its checksums missed).
//
// A fold key the bucket holds no message of is judged only where that
// proves something: a phantom where the key listing is the truth and the
// stream still holds everything after C (within the marker window, on a
// bucket with limit markers); kept where the bucket evicts and the key's
// revision is below the first one retained; otherwise its change after C
// is lost to the stream and it counts as in flight (the next mirror
// repairs what the stream lost, as SPEC's repair policies say). So does a
// key whose per-message TTL deadline (Entry::expires_ns) the server's
// clock has passed: the mirror deletes it then.
//
// Cost: one headers-only key listing (as relist), a point lookup in the
// fold per listed key, a walk of the fold's keys, and one read of the
// key's last message per fold key the listing did not name (paced by
// AuditOptions::max_reads_per_second). Memory is bounded: the listing
// spills to disk past `listing_memory_keys` keys.
//
// Thread safety: Audit uses `source` from the calling thread only (give it
// a source of its own, not a running watch's); `fold` may be committed to
// by another thread meanwhile.

#ifndef KVFOLD_AUDIT_H_
#define KVFOLD_AUDIT_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>
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
  // Also compare values: a third pass reads each key's last message with
  // its value (a state-sync delivery of the scope: every value crosses the
  // wire once) and compares it where the fold holds the key live at that
  // very message. The pass ends at the first message after C, or when the
  // server says nothing is pending, or after `values_idle` without a
  // message; a pass cut short compares fewer values (values_compared
  // says how many), never reports a false difference. Default: false.
  bool compare_values = false;
  std::chrono::milliseconds values_idle{5000};
  // Ends the audit early with Cancelled (checked between keys and while
  // paced).
  std::stop_token stop;
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
  kValue,    // both hold it live at the same revision, with other values
             // (AuditOptions::compare_values)
};
std::string_view AuditFindingName(AuditFinding finding);  // "missing", ...

struct AuditReport {
  uint64_t cursor = 0;            // C: the fold's cursor the audit judged at
  uint64_t listing_revision = 0;  // the stream's last sequence before the listing
  uint64_t judged = 0;            // keys judged (equal or divergent)
  uint64_t in_flight = 0;         // keys changed after C (or whose change
                                  // after C the stream lost): not judged
  uint64_t missing = 0;
  uint64_t stale = 0;
  uint64_t phantom = 0;
  uint64_t kept = 0;
  uint64_t value_differs = 0;    // kValue findings
  uint64_t values_compared = 0;  // with compare_values: values compared
  struct Named {
    std::string key;
    AuditFinding finding;
    uint64_t fold_revision = 0;    // 0: the fold has no live entry
    uint64_t bucket_revision = 0;  // 0: the bucket has no message of the key
    friend bool operator==(const Named&, const Named&) = default;
  };
  std::vector<Named> named;  // the first AuditOptions::max_named divergences

  uint64_t divergent() const { return missing + stale + phantom + value_differs; }
};

// What audits found, counted for a metrics registry (PrometheusText in
// kvfold/metrics_text.h renders it): `kvfold mirror --audit-every` counts
// each scheduled audit's outcome here; a service that runs Audit on its own
// schedule fills one the same way.
struct AuditStats {
  uint64_t equal = 0;      // audits that found the fold equal
  uint64_t divergent = 0;  // audits that found a divergence
  uint64_t failed = 0;     // audits that could not judge (an error)
  // Of the last audit that judged (unset before the first one): its
  // report's divergent(), and when it ended (Unix time, seconds).
  std::optional<uint64_t> divergent_keys;
  std::optional<double> last_success_unix_seconds;
};

// Judges `fold` against `source`'s bucket over the fold's recorded scope.
// FailedPrecondition when it cannot judge: a fold without a cursor, of
// another bucket, or of another stream (the bucket was recreated, also
// while the audit ran), or with every key in flight (nothing judged);
// InvalidArgument for a max_reads_per_second between 0 and 0.01;
// Cancelled when stopped; the errors of `source` and `fold` as they come.
// A divergence is a report, not an error.
StatusOr<AuditReport> Audit(BucketSource& source, Fold& fold, const AuditOptions& options = {});

}  // namespace kvfold

#endif  // KVFOLD_AUDIT_H_
