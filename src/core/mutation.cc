#include "core/mutation.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kvfold::core {
namespace {

// Every mutation point in the code base; scripts/mutations.sh runs each.
constexpr const char* kKnown[] = {
    "window-skip-check",            // watcher: no window check at a session's start
    "window-ignore-identity",       // window: a recreated stream passes
    "window-ignore-first-seq",      // window: evicted history passes
    "window-trust-lagging-view",    // watcher: a lagging replica's head is taken for a reset
    "lagging-since-never-cleared",  // watcher: a second lagging episode inherits the first's wait
    "reanchor-keep-memo",  // watcher: after a rebuild the old stream's eviction memo stays in force
    "window-lagging-below-received-only",  // watcher: a head below a relist's floor is a reset
    "window-ignore-marker-window",         // watcher: a cursor older than the marker TTL resumes
    "floor-ignore-marker-window",          // watcher: a stretch read after the marker TTL passes
    "anchor-skip-refresh",          // watcher: an idle cursor's new anchor never reaches the fold
    "marker-ttl-raise-at-once",     // marker TTL: a raise counts for markers written before it
    "marker-ttl-keep-first-wait",   // marker TTL: a second change does not restart the wait
    "meta-marker-ttl-off-ignored",  // stores: a commit of marker TTL 0 keeps the old TTL
    "seed-drop-anchor",             // seed: the seeded fold's cursor has no anchor
    "floor-skip-midwatch",          // watcher: the mid-watch floor check never trips
    "watch-keep-delivery-after-move",  // watcher: a session goes on after a read moved the source
    "watch-keep-delivery-after-start-move",  // watcher: a delivery's start check moved the source
    "delivery-forget-stranded-consumer",     // delivery: an unanswered consumer delete is dropped
    "delivery-status-by-header",             // delivery: any Status header is the server's status
    "bucket-keep-stranded-consumers",        // bucket: stranded consumers are never deleted again
    "probe-ignore-in-flight",                // catch-up proof: cursor jumps over messages in flight
    "probe-quiet-stretch-verified",  // probe: a quiet stretch counts as proven before a floor check
    "batch-drop-on-failure",         // watcher: a failed commit loses its batch
    "batch-ignore-bytes",            // watcher: a batch commits by its count alone
    "pipeline-keep-spare-when-idle",  // commit pipeline: an idle watch keeps the spare nodes
    "fold-uncounted-unmarked",        // fold: an uncounted commit leaves counts_stale unset
    "fold-recount-tombstones-live",   // fold: a recount counts tombstones as live keys
    "watch-recount-skipped",          // watcher: a catch-up's stale counts are never recounted
    "watch-recount-before-flush",     // watcher: the recount runs beside batches in flight
    "watch-forget-stale-fold",        // watcher: a counted catch-up forgets the fold is stale
    "exact-counts-skip-tombstones",   // readers: a stale fold is counted without its tombstones
    "commit-before-frontier-proof",   // watcher: a batch is handed over before its frontier proof
    "audit-judge-in-flight",          // audit: a key listed after the cursor is judged
    "audit-no-message-is-kept",       // audit: no message is taken for eviction on any bucket
    "audit-skip-fold-pass",           // audit: fold keys the listing did not name go unjudged
    "audit-trust-lost-tail",  // audit: no message is a phantom though the stream lost what came
                              // after the cursor
    "audit-ignore-values",    // audit: compare_values never reports a value that differs
    "repair-skip-flush",      // watcher: repairs without flushing what was received
    "drain-apply-unchecked",  // watcher: the drain before a repair skips the roll-up check
    "repair-recreated-keeps-old-memo",  // watcher: a recreated stream inherits the eviction memo
    "repair-rebase-drops-memo-of-same-stream",  // watcher: a reset stream loses its memo
    "watch-read-only-when-idle",                // watcher: a busy delivery never reads the stream
    "retention-listing-always-truth",           // retention: a listing is trusted after eviction
    "choose-relist-on-evicting",  // policy: relist runs where the listing is not truth
    "restore-ignore-identity",    // restore: an artifact of another stream is used
    "restore-ignore-scope",       // restore: an artifact of a narrower scope is used
    "restore-ignore-ahead",       // restore: a stale artifact is used
    "restore-ignore-retention",   // restore: an artifact outside retention is used
    "restore-ignore-head",        // restore: an artifact beyond the stream's last sequence is used
    "restore-ignore-marker-window",       // restore: an artifact older than the marker TTL is used
    "restore-ignore-quiet-head",          // restore: an artifact at the stream's head must be young
    "restore-wait-unpaced",               // restore: a wait for an artifact looks every 10 ms
    "retention-expiry-evicts",            // retention: a TTL or marked max_age counts as eviction
    "retention-trust-head-under-never",   // retention: first_seq 1 on unmarked age + TTL: no
                                          // eviction
    "relist-keep-old-anchor",             // relist: the cursor keeps its anchor from before
    "restore-artifact-always-wins",       // restore: an older artifact entry replaces a newer one
    "restore-delete-listed",              // restore: a key the bucket lists live is deleted
    "repair-never-deletes",               // relist/restore: unlisted keys are kept
    "relist-skip-recheck",                // relist: retention is not read again after the listing
    "repair-skip-last-check",             // relist/restore: a key the listing raced is deleted
    "repair-delete-at-listing-revision",  // relist/restore: a raced delete's tombstone predates it
    "restore-ignore-artifact-scope",      // restore: a wider artifact's keys outside the scope land
    "commit-failures-never-reset",        // watcher: separated commit failures count as consecutive
    "commit-retry-internal",              // commit retry: an Internal error (a bug) is retried
    "restore-skip-recheck-after-last",    // restore: a key evicted while checked is deleted
    "watch-trust-unanchored",             // watcher: a fold with data and no cursor is trusted
    "restore-cursor-every-chunk",         // restore: the cursor moves before the final commit
    "restore-skip-verify-pass",           // restore: writes before the whole artifact verified
    "restore-skip-listing",               // restore: a fold-only key is judged without the listing
    "restore-skip-check-after-listing",   // restore: the artifact is not checked again after it
    "restore-verify-order-per-chunk",     // restore: key order is checked within chunks only
    "walker-next-page-after-scope",       // repair: a page starts after the last key in scope
    "fold-cursor-backward",               // stores: the cursor may move backward
    "fold-message-ignore-revision",       // core: an older message overwrites a newer entry
    "pending-counts-past-unknown",        // batch: counts stated past an unread entry before
    "pending-counts-from-caller",         // batch: a pending key counts from the caller's entry
    "apply-skip-read",                    // watcher: folds without reading at or below max_revision
    "watch-new-keys-past-sync",        // watcher: a state sync's later messages count as new keys
    "quiet-any-scope",                 // watcher: heartbeats skip idle reads of a scoped delivery
    "ready-ignore-read-age",           // readiness: a watch cut off from the server stays ready
    "ready-caught-up-through-repair",  // readiness: caught_up survives a repair's start
    "ready-target-below-cursor",       // readiness: a head read below the cursor is caught up
    "fold-max-revision-stale",         // stores: a commit does not raise max_revision
    "fold-keep-format-2",              // stores: a writer leaves a format-2 fold's marker
    "fold-cursor-own-write",           // rocks fold: the cursor is written before its entries
    "fold-ingest-cursor-apart",        // rocks fold: a run's cursor is written before the run
    "ingest-failure-deletes-links",    // rocks fold: a failed ingestion deletes its links
    "fold-skip-wal-sync",              // rocks fold: a commit returns before its WAL is synced
    "recount-keep-snapshot",           // rocks fold: a recount never releases its snapshot
    "filters-cache-small-shards",      // rocks fold: the filters' cache in 16 small shards
    "delta-verify-first-window-only",  // delta delivery: later windows taken as verified
    "fold-ingest-before-log-synced",   // rocks fold: unsynced, a run outruns the log before it
    "seed-skip-verify-pass",           // seed: writes before the whole artifact verified
    "seed-cursor-every-commit",        // seed: cursor set before the final commit
    "seed-skip-readback",              // seed: what it wrote is not checked against the digest
    "fold-digest-ignored",             // artifact reads: the manifest's fold digest is not compared
    "loader-ingest-early",             // fold loader: staged entries visible before Finish
    "pointer-any-direction",           // pointer rule: the pointer may move backward
    "manifest-skip-checksum",          // manifest frame: checksum not checked
    "chunk-skip-sha256",               // chunk reader: SHA-256 not checked
    "repair-hook-before-reads",  // relist/restore: the hook sees a change before its batch's reads
    "export-drop-odd-keys",      // export: a key that is no valid KV key is left out
    "pointer-keep-beyond-head",  // pointer rule: a pointer beyond the stream's head stays
    "pointer-keep-invalid",      // pointer rule: a pointer naming no valid artifact stays
    "export-trust-pointer",      // export: a pointer ahead of the fold is taken unchecked
    "reader-trust-pointer",      // restore/seed: a pointer disagreeing with its manifest is taken
    "floor-jump-verified",       // floor guard: a jump in sequences counts as proven
    "floor-relist-floor-on-evicting",  // floor guard: the relist floor stands on an evicting bucket
    "deadlines-ignored",               // watch: a TTL without limit markers never deletes its key
    "expire-by-server-clock",  // watch: deadlines pass by the server's clock, not the fold's anchor
    "expire-unchecked",        // watch: a due deadline deletes the key whatever rewrote it since
    "expire-assume-history-one",  // watch: an expiry deletes, never uncovers an older message
    "expire-no-recheck",   // watch: a key the server holds past its deadline is never read again
    "expire-drop-unread",  // watch: keys whose read at their deadline failed are dropped
    "deadlines-kept-after-repair",  // watch: the deadline queue is not read again after a repair
    "markers-on-forget-earlier-deadlines",  // watch: markers turned on drop earlier deadlines
    "expire-uncover-at-old-revision",       // watch: an uncovered message folds at its lower seq
    "rebase-keep-deadline",                 // repair: a rebased entry keeps its old-stream deadline
    "expire-by-received-anchor",  // watch: deadlines pass by received's anchor (a relist moves it)
    "audit-uncovered-stale",      // audit: a fold holding an uncovered message counts as stale
    "audit-judge-expired",        // audit: a key past its TTL deadline counts as a phantom
    "reattest-never",        // export: an unchanged fold is exported in full, never re-attested
    "reattest-skip-digest",  // export: re-attests without comparing the fold digest
    "reattest-cursor-record-changed",  // export: a record at the latest cursor counts as changed
    "reattest-skip-chunks-listed",     // export: re-attests an artifact without its chunks listed
    "exporter-trust-needs-sign-key",   // export: trusted keys count only beside a signing key
    "prune-attested-by-latest-only",   // prune: keeps what only the latest re-attestation names
    "reattest-memo-of-latest",       // export: a re-attestation takes the attested artifact's memo
    "reader-owner-prefix-loose",     // read: chunks under any id the owner's begins with
    "reattest-untrusted",            // export: re-attests an artifact no key it trusts signed
    "reader-trust-attested-chunks",  // reader: a re-attestation may name any chunk
    "prune-drop-attested",           // prune: an artifact a kept re-attestation names is removed
    "export-trust-attested-chunks",  // export: a re-attestation whose chunks are gone stays latest
    "lease-trust-far-expiry",        // lease: a lease expiring years ahead is honoured
    "s3-bare-404-no-bucket",         // S3: a bare 404 to HEAD of the bucket counts as no bucket
    "object-meta-any-nuid",          // object store: a meta's nuid goes into subjects unchecked
    "dir-remove-follows-links",  // directory transport: a removal follows a directory swapped for
                                 // a link
    "prune-trust-unverified",    // prune: a manifest no trusted key signed decides a removal
    "manifest-skip-size-cap",    // manifest frame: a frame of 2 GiB or more reaches the parser
    "dir-read-any-kind",         // directory transport: a FIFO or a device is read as an object
    "s3-read-past-max",          // S3: a body larger than the reader takes is read whole
    "dir-lock-follows-link",     // directory transport: .lock is opened through a link
    "sign-key-any-mode",         // signer: a private key others can read is used
    "export-round-unsigned",     // scheduled export: the round's artifact ignores sign_key_file
    // Caught by the live tests only (tests/live/delivery_gap_live_test.cc):
    "delivery-ignore-gap",            // ordered delivery: a skipped consumer sequence passes
    "delivery-ignore-heartbeat-gap",  // ordered delivery: a heartbeat's last sequence is ignored
    "delivery-ignore-rollup-skip",    // watcher: a purge the server jumped to is folded
    "delta-tail-past-head",           // resume: the consumer after a delta read starts a
                                      // sequence late
    "delta-skip-unproven",            // resume: "no message" from the store skips to the head
    "delta-verify-never",             // resume: a delta's replies are used unverified
    // (tests/live/cli_live_test.cc: the metrics port's peers, secrets given as flags):
    "metrics-thread-pool",     // metrics server: connections share httplib's thread pool
    "metrics-any-method",      // metrics server: methods but GET and HEAD reach httplib's routing
    "cli-quiet-secret-flags",  // CLI: a password or token given as a flag goes unmentioned
    // (tests/live/watch_live_test.cc, a limit marker published by hand):
    "last-of-key-ignore-marker",  // nats bucket: a key's last message that is a marker reads as a
                                  // put
    // (tests/live/delivery_gap_live_test.cc, a close within a retry wait):
    "bucket-close-within-wait",  // bucket: closing skips the stranded consumers' last try
    // (tests/live/watch_live_test.cc, a delivery opened by hand):
    "slow-consumer-unreported",  // connection: a slow consumer waits for the next full check
    "delivery-heard-never-set",  // ordered delivery: silence counts from the consumer's creation
    // (tests/live/s3_live_test.cc, through the fault proxy):
    "s3-complete-error-body-ok",      // S3: a completion answered 200 with an error body passes
    "s3-reload-keeps-session-token",  // S3: a credential reload keeps the old session token
    // (tests/live/transport_live_test.cc):
    "obj-read-past-max",  // object store: an object larger than the reader takes is read whole
    // Caught by the power-cut simulation (tests/sim/power_cut_test.cc):
    "dir-skip-file-fsync",  // directory transport: renames an object before its data is synced
    "dir-skip-dir-fsync",   // directory transport: a rename is not made durable
    "dir-skip-created-dir-fsync",  // directory transport: a directory it creates is not made
                                   // durable
    "dir-pointer-trust-cache",     // directory transport: a pointer an earlier attempt left in the
                                   // page cache (its directory fsync failed) is taken as durable
    "dir-keep-dirs-after-failed-sync",  // directory transport: a directory whose creation was not
                                        // made durable is left for the next attempt to trust
};

const char* Active() {
  static const char* active = [] {
    const char* v = std::getenv("KVFOLD_MUTATION");
    if (v == nullptr || *v == '\0') return static_cast<const char*>(nullptr);
    for (const char* k : kKnown) {
      if (std::strcmp(k, v) == 0) return k;
    }
    std::fprintf(stderr, "KVFOLD_MUTATION=%s names no mutation point\n", v);
    std::abort();
  }();
  return active;
}

}  // namespace

bool MutationActive(const char* name) {
  const char* active = Active();
  return active != nullptr && std::strcmp(active, name) == 0;
}

}  // namespace kvfold::core
