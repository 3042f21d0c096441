// The fold: the local materialization of a bucket's state within a scope.
//
// A fold maps key -> (revision, value) for live keys and key -> (revision,
// deleted) for tombstones, so that a key's revision never goes backward even
// across a delete. Beside the entries it keeps metadata: the cursor (the
// stream sequence the fold has applied through), the bucket, the scope and
// the identity of the stream it came from.
//
// Every change reaches the store through Commit(), which writes the entries
// and the new metadata in one atomic batch: a reader or a restart sees all of
// a commit or none of it.
//
// Thread safety: the read methods (Get, Scan, ScanFrom, Snapshot,
// ReadMeta) may be called from any number of threads, also while one thread
// commits. Commit needs external synchronization: one writer at a time.

#ifndef KVFOLD_FOLD_H_
#define KVFOLD_FOLD_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvfold/status.h"

namespace kvfold {

// One key's state in the fold.
struct Entry {
  uint64_t revision = 0;  // stream sequence of the write that made this state
  bool deleted = false;   // a tombstone: the key was deleted or purged
  std::string value;      // empty for tombstones
  // When the message's per-message TTL (its Nats-TTL header) removes it
  // from the stream: its stored time plus the TTL, by the server's clock
  // (nanoseconds since the Unix epoch). 0: no deadline. Live entries only.
  int64_t expires_ns = 0;

  friend bool operator==(const Entry&, const Entry&) = default;
};

// The fold's metadata. Fields are unset until the first mirror records them.
// The eviction memo's cause when it is not known: recorded by a kvfold
// that counted expiries (per-message TTL, marked max_age) as evictions.
inline constexpr std::string_view kEvictionCauseUnknown = "unknown";

struct FoldMeta {
  std::optional<uint64_t> cursor;                 // applied through this sequence
  std::string bucket;                             // "" until recorded
  std::optional<std::vector<std::string>> scope;  // disjoint prefixes
  std::string stream_created;                     // stream identity (creation time)
  uint64_t live_keys = 0;                         // entries that are not tombstones
  uint64_t entries = 0;                           // live keys + tombstones
  // live_keys and entries are as they were before an uncounted commit
  // (FoldCommit::uncounted: a large catch-up, not yet finished): every
  // commit since left them be, until Fold::Recount or a clear_entries. They
  // never read 0 while the fold holds an entry. A watch recounts once
  // caught up; `kvfold status` and an export count for themselves meanwhile.
  bool counts_stale = false;
  // Set while a seed is applying artifact chunks (entries without a cursor
  // yet): the artifact id, so a re-run can finish the same seed.
  std::string seeding;
  // A seed stopped part way: a watch refuses the fold until a seed of the
  // same artifact (or one that discards it) finishes.
  bool unfinished_seed() const { return !cursor && !seeding.empty(); }
  // The eviction memo (README, "Repair policies"): set once this fold has seen its bucket
  // evict current values, and never cleared. A key that aged out stays
  // missing from key listings even after the limit is removed, so a listing
  // is never taken for the truth again.
  bool eviction_observed = false;
  // What the memo saw: "volume" (discard old under max_msgs or max_bytes)
  // or "unmarked age" (max_age without limit markers); kEvictionCauseUnknown
  // for a memo recorded before kvfold told expiries from evictions, which an
  // expiry alone may have set. "" without a memo.
  std::string eviction_cause;
  // One line on the last repair (policy, outcome, numbers, UTC time), for
  // `kvfold status`. "" when none ran.
  std::string last_repair;
  // An upper bound on every entry's revision: the highest revision a commit
  // has written (a clear resets it). A writer folding a message above it
  // knows without a read that nothing stored is newer. UINT64_MAX when
  // unknown (the default, so a Fold implementation that does not keep it
  // is never trusted; a format-1 fold opened read-only).
  uint64_t max_revision = UINT64_MAX;
  // The cursor's anchor: a server time (ns since the Unix epoch) at or
  // before which the stream had stored every message after the cursor
  // never; 0 when unknown. On a bucket with limit markers (nats-server
  // 2.11+) a cursor is resumable only while the server's clock is within
  // the marker TTL of it (README, "Repair policies").
  int64_t cursor_time_ns = 0;
  // The limit-marker TTL (ns) the cursor's window is measured with: the
  // bucket's, except that a raise counts only once the anchor passed it
  // (markers written before keep the old TTL). 0: none seen.
  int64_t marker_ttl_ns = 0;

  friend bool operator==(const FoldMeta&, const FoldMeta&) = default;
};

// What one Commit writes: entries (each replaces the key's record) and the
// metadata fields that are set. Unset fields keep their stored value.
struct FoldCommit {
  // Remove every entry (live keys and tombstones) before writing `entries`,
  // in the same atomic write. Metadata stays unless set here. Used to
  // discard an unfinished seed. Default: false.
  bool clear_entries = false;
  std::map<std::string, Entry> entries;
  std::optional<uint64_t> cursor;
  // The anchor of `cursor` (FoldMeta::cursor_time_ns). A commit that moves
  // the cursor without one leaves the time unknown (0).
  std::optional<int64_t> cursor_time_ns;
  std::optional<int64_t> marker_ttl_ns;  // FoldMeta::marker_ttl_ns
  std::optional<std::string> bucket;
  std::optional<std::vector<std::string>> scope;
  std::optional<std::string> stream_created;
  std::optional<std::string> seeding;  // "" clears it
  // true sets the memo, which is permanent; false clears it only together
  // with `rebase` (a fold rebuilt against a recreated stream).
  std::optional<bool> eviction_observed;
  // With eviction_observed true: what was seen (FoldMeta::eviction_cause);
  // unset records kEvictionCauseUnknown. A memo keeps its first cause.
  std::optional<std::string> eviction_cause;
  std::optional<std::string> last_repair;
  // What this commit changes FoldMeta::live_keys and ::entries by (after a
  // clear_entries), for a caller that knows every key's entry before the
  // commit (a repair walking the fold, a seed into an empty one, a watch
  // that read each key to show its apply hook the previous revision): the store
  // then skips reading them. Unset: the store reads them. A wrong value
  // corrupts the counts; the memory fold checks it and refuses a mismatch.
  struct CountChange {
    int64_t live_keys = 0;
    int64_t entries = 0;
  };
  std::optional<CountChange> counts;
  // Every entry is a key the fold holds no record of, and `counts` says so
  // (a first state sync into an empty fold): the RocksDB fold then writes
  // the entries as a table file and links it in (SST ingestion) together
  // with the metadata and cursor, in one atomic step, instead of through
  // its log and memtables. Requires `counts`; refused with clear_entries or
  // rebase. A key the fold does hold breaks the counts, as a wrong
  // `counts` does; the memory fold checks it and refuses. Default: false.
  bool new_keys = false;
  // The entries are many and `counts` is set (a chunk of a restore): as for
  // new_keys, the RocksDB fold may write them as a table file linked in
  // with the metadata by one ingestion, but the keys may be held, and are
  // replaced as by any commit. A hint: without `counts`, or with
  // clear_entries, the commit goes through the log. Default: false.
  bool bulk = false;
  // Do not count the entries (a hint): the store skips reading each key's
  // entry before and sets FoldMeta::counts_stale with the commit, leaving
  // live_keys and entries as they were, for Recount to make exact (a
  // commit into a fold whose counts are stale is never counted). For a
  // catch-up that rewrites a large share of the fold, where one Recount at
  // its end reads less than a read per key. A fold that holds no entry
  // counts anyway (its emptiness stays known), as does a Fold
  // implementation that does not defer counts. InvalidArgument with
  // counts, new_keys, bulk or clear_entries. Default: false.
  bool uncounted = false;
  // Lets the cursor move backward, together with a new stream_created: a
  // fold rebuilt against a recreated stream starts that stream's sequences
  // over. Default: false (a lower cursor is refused).
  bool rebase = false;

  bool empty() const {
    return !clear_entries && entries.empty() && !cursor && !cursor_time_ns && !marker_ttl_ns &&
           !bucket && !scope && !stream_created && !seeding && !eviction_observed &&
           !eviction_cause && !last_repair && !counts && !new_keys && !bulk && !uncounted;
  }
};

// A consistent, read-only view of a fold: metadata and entries as of one
// moment, unaffected by later commits. Safe to use from one thread at a
// time; may outlive later commits but not the Fold it came from.
class FoldSnapshot {
 public:
  virtual ~FoldSnapshot() = default;
  virtual const FoldMeta& meta() const = 0;
  // As Fold::Scan, over the snapshot.
  virtual Status Scan(std::string_view prefix, bool include_tombstones,
                      const std::function<bool(std::string_view key, const Entry&)>& fn) = 0;
};

// Fills an empty fold in one atomic step (a seed): entries are added in
// ascending key order and staged, and Finish commits them all together
// with its commit's metadata and cursor. The RocksDB fold stages them in
// table files beside the database and links those in whole (SST
// ingestion) instead of writing each entry through its log and memtables.
// Nothing is visible before Finish returns OK; destroying the loader
// before that discards what it staged. Use from one thread.
class FoldLoader {
 public:
  virtual ~FoldLoader() = default;

  // InvalidArgument unless `key` sorts after the key added before.
  virtual Status Add(std::string_view key, const Entry& entry) = 0;

  // Commits every entry added, counted as new keys, with `commit`'s
  // metadata and cursor, atomically and durably. FailedPrecondition when
  // the fold holds any entry by then; InvalidArgument when `commit` brings
  // entries, clear_entries or counts of its own. Call once.
  virtual Status Finish(const FoldCommit& commit) = 0;
};

class Fold {
 public:
  Fold() = default;
  Fold(const Fold&) = delete;
  Fold& operator=(const Fold&) = delete;
  virtual ~Fold() = default;

  // Stores the key's entry (live or tombstone) in *out. NotFound when the
  // fold has never seen the key.
  virtual Status Get(std::string_view key, Entry* out) = 0;

  // Calls fn for every entry whose key starts with `prefix`, in key byte
  // order, over one consistent view. Tombstones are included only when
  // `include_tombstones`. Iteration stops early when fn returns false.
  virtual Status Scan(std::string_view prefix, bool include_tombstones,
                      const std::function<bool(std::string_view key, const Entry&)>& fn) = 0;

  // As Scan, over every entry whose key is >= `start_key` (all keys when
  // it is ""). Repair walks a fold in key order with it, page by page.
  virtual Status ScanFrom(std::string_view start_key, bool include_tombstones,
                          const std::function<bool(std::string_view key, const Entry&)>& fn) = 0;

  // The metadata as of the last commit.
  virtual StatusOr<FoldMeta> ReadMeta() = 0;

  // A consistent view of entries and metadata together (e.g. for export).
  virtual StatusOr<std::unique_ptr<FoldSnapshot>> Snapshot() = 0;

  // Writes `commit` atomically and, with the durable sync policy, durably.
  // On failure nothing of it is visible. A cursor lower than the stored one
  // is refused (FailedPrecondition): the cursor never moves backward,
  // unless the commit rebases the fold onto a new stream (FoldCommit::rebase
  // with stream_created set).
  virtual Status Commit(const FoldCommit& commit) = 0;

  // Makes FoldMeta::live_keys and ::entries exact again after uncounted
  // commits, counting every entry, and clears counts_stale, in one durable
  // write: O(fold) reads, sequential. Not concurrently with Commit. OK at
  // once when the counts are not stale; FailedPrecondition on a fold opened
  // read-only. Default: OK (a Fold that never defers counts).
  virtual Status Recount() { return Status::OK(); }

  // A loader for filling this fold while it holds no entries, or nullptr
  // when this kind of fold has none (fill it with Commit). Default: none.
  virtual StatusOr<std::unique_ptr<FoldLoader>> NewLoader() {
    return std::unique_ptr<FoldLoader>();
  }
};

struct FoldOptions {
  // fsync the write-ahead log on every commit. Without it a machine crash
  // (not a process crash) may lose the newest commits, never tear one.
  // Default: true.
  bool sync = true;

  // RocksDB memtable size. A writer holds up to two memtables, and a
  // restart after a crash replays up to that much from the write-ahead log;
  // larger ones make a long catch-up a little faster (64 MiB: about 4%
  // faster than the default, with about 25 MB more resident memory).
  // Default: 16 MiB.
  size_t memtable_bytes = size_t{16} << 20;

  // Create the fold directory when it does not exist. Default: true.
  bool create_if_missing = true;

  // Open as a read-only follower of a fold another process may be writing
  // (RocksDB secondary instance). Commit then returns FailedPrecondition.
  // Default: false.
  bool read_only = false;

  // Keep every table file's bloom filter and index in memory, about 2
  // bytes per key (19 MB at 10M keys), so that a point read (Get, and a
  // catch-up's reads of the entries it replaces) opens no block it need
  // not. false reads them through an 8 MiB cache instead, and scans
  // (Scan, ScanFrom, a snapshot's Scan) leave that cache as it was: memory
  // grows far less with the fold, point reads on a fold larger than the
  // cache get slower (about 3x at 10M keys), and a scan repeated over the
  // same keys reads its blocks again. For whole scans and bulk loads
  // (`kvfold export` and `kvfold seed` use false), and for a small node
  // mirroring a large bucket (`kvfold mirror --filters-in-cache`).
  // Default: true.
  bool keep_table_filters_in_memory = true;
};

// Opens the RocksDB fold in directory `path`. The caller owns the result;
// destroy it to close. Fails with IOError naming the path and the cause, or
// Corruption when the directory holds something that is not a fold.
StatusOr<std::unique_ptr<Fold>> OpenRocksFold(const std::string& path,
                                              const FoldOptions& options = {});

// A fold held in memory, for tests and simulation. Thread-safe as above.
std::unique_ptr<Fold> NewMemoryFold();

// Raises this process's soft limit on open file descriptors (RLIMIT_NOFILE)
// to its hard limit, and returns the soft limit now in force (UINT64_MAX
// for unlimited). Why: a RocksDB fold keeps every table file open, about
// one descriptor per 8 MiB of fold, so the usual soft limit of 1024 stops
// a fold of some 8 GB (docs/fold-format.md); the hard limit is what the
// administrator allows. Call it once at start, before opening a fold, as
// `kvfold` does; a limit already at the hard one is left as it is. IOError
// naming the cause when the limit cannot be read or raised (it stays as
// it was). Thread safety: may be called from any thread (the limit is the
// whole process's).
StatusOr<uint64_t> RaiseOpenFileLimit();

}  // namespace kvfold

#endif  // KVFOLD_FOLD_H_
