// Artifacts: portable, verified snapshots of a fold.
//
// An artifact is a protobuf manifest (bucket, stream identity, scope,
// cursor, chunk list with sizes and SHA-256, optional Ed25519 signature)
// plus zstd-compressed chunks of key-sorted live entries, published through
// a Transport. The byte layout is artifacts/FORMAT.md.
//
// Thread safety: the functions here use the Fold through its thread-safe
// read API (export) or as its single writer (seed). The Transport is used
// by one thread at a time, but export publishes chunks (Transport::Put)
// from a worker thread of its own while the caller's thread scans: a
// Transport must not be tied to the thread that created it.

#ifndef KVFOLD_ARTIFACT_H_
#define KVFOLD_ARTIFACT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvfold/fold.h"
#include "kvfold/status.h"
#include "kvfold/transport.h"

namespace kvfold {

// The newest manifest schema this build reads and writes. Schema 2 differs
// from 1 only in its keys: any key a fold holds (a raw publish to
// "$KV.<bucket>.user@x" folds as key "user@x"), where schema 1 holds only
// valid KV keys. Schema 3 is a re-attestation (ArtifactManifest::attests).
// An export is written as schema 1 unless it needs more, so older readers
// read every artifact they can (artifacts/FORMAT.md).
inline constexpr uint32_t kArtifactSchemaVersion = 3;
// The schema whose keys are any non-empty string.
inline constexpr uint32_t kArtifactSchemaAnyKey = 2;
// The schema of a re-attestation: a manifest naming another artifact's
// chunks.
inline constexpr uint32_t kArtifactSchemaAttestation = 3;

struct ArtifactChunk {
  std::string name;
  uint64_t entry_count = 0;
  std::string first_key;
  std::string last_key;
  uint64_t raw_size = 0;
  uint64_t compressed_size = 0;
  std::string sha256;  // 32 raw bytes
};

// A decoded, integrity-checked manifest.
struct ArtifactManifest {
  std::string artifact_id;
  uint32_t schema_version = 0;
  uint32_t min_reader_version = 0;
  std::string bucket;
  std::string stream_created;
  std::vector<std::string> scope;
  bool has_scope = false;
  uint64_t cursor = 0;
  int64_t cursor_time_ns = 0;  // the cursor's anchor (FoldMeta::cursor_time_ns); 0 unknown
  int64_t marker_ttl_ns = 0;   // FoldMeta::marker_ttl_ns of the exporter; 0 none seen
  bool eviction_observed = false;
  std::string eviction_cause;  // FoldMeta::eviction_cause
  // SHA-256 over the (key, revision) pairs the chunks hold, in key order
  // (32 raw bytes); empty for an artifact written before it existed.
  // Verify, seed and restore recompute it over what they read, and a seed
  // once more over the fold it wrote.
  std::string fold_digest;
  // A re-attestation: the id of the artifact whose chunks this manifest
  // names (an exporter whose fold still held exactly that artifact's
  // records at a later cursor wrote a new manifest, with its own cursor
  // and anchor, instead of new chunks). Empty: the chunks are its own.
  std::string attests;
  int64_t created_unix_ms = 0;
  std::string exporter_id;
  uint64_t entry_count = 0;
  std::vector<ArtifactChunk> chunks;
  bool is_signed = false;
  std::string signer_public_key;  // 32 raw bytes when signed

  uint64_t raw_bytes() const;
  uint64_t compressed_bytes() const;
};

// Progress of a long export, seed or verify.
struct ArtifactProgress {
  uint64_t entries_done = 0;
  uint64_t entries_total = 0;  // 0 when not known yet
  uint64_t bytes_done = 0;     // stored (compressed) bytes written or read
};
using ArtifactProgressFn = std::function<void(const ArtifactProgress&)>;

// "<hostname>-<pid>": the default exporter id.
std::string DefaultExporterId();

struct ExportOptions {
  // Who exported, recorded in the manifest. Default: DefaultExporterId().
  std::string exporter_id;
  // Raw bytes per chunk before compression; bounds memory on both sides.
  // Default: 4 MiB. REQUIRES: > 0.
  size_t chunk_raw_bytes = size_t{4} << 20;
  // PEM file with an Ed25519 private key to sign the manifest. Default: none.
  std::string sign_key_file;
  // Move the transport's latest pointer to the new artifact. Default: true.
  bool advance_pointer = true;
  // Called after each chunk. Default: none.
  ArtifactProgressFn progress;
  // Called for each key of the fold that an artifact cannot hold (outside
  // the fold's scope; an empty key), with the reason. Such keys are left
  // out; report them to the operator. A key that is no valid KV key (folded
  // from a raw publish to "$KV.<bucket>.user@x") is carried: the artifact
  // is then of schema kArtifactSchemaAnyKey. Default: none.
  std::function<void(std::string_view key, const Status& why)> skipped_key;
  // Reads the stream's last sequence, fresh. When set, and the latest
  // pointer names an artifact beyond it (the stream was restored from a
  // backup since), this export replaces that pointer although its cursor
  // is lower (artifacts/FORMAT.md, "Latest pointer"). Default: none (the
  // pointer only moves to a higher cursor).
  std::function<StatusOr<uint64_t>()> stream_last_seq;
  // The latest pointer is a hint: one at or past this fold's cursor, which
  // would make this export "unchanged", must name a valid artifact (its
  // manifest reads, verifies and agrees with the pointer). Where this
  // exporter signs (sign_key_file) or names trusted keys here, the manifest
  // must also be signed by its key or one of these (PEM files with Ed25519
  // public keys). A pointer that fails is replaced by this export whatever
  // its cursor. Default: none.
  std::vector<std::string> trusted_key_files;
  // Called after this export replaced a latest pointer that named no valid
  // artifact, with what was wrong with it. Default: none.
  std::function<void(const std::string& why)> replaced_pointer;
  // When the latest artifact holds exactly this fold's records (same
  // bucket, stream, scope and fold digest; its cursor behind this fold's,
  // which moved only past messages that changed no live entry: writes out
  // of scope, deletes of deleted keys), write only a new manifest that
  // names its chunks: a re-attestation at this fold's cursor and anchor.
  // Where this exporter signs or trusts keys, only an artifact signed by
  // one of them is re-attested. Costs one scan of keys and revisions when
  // the entry counts agree. Readers before schema 3 refuse such a manifest
  // ("upgrade kvfold"): set false while older kvfold nodes read the
  // location. Default: true.
  bool reattest = true;
  // For reproducible artifacts (golden files) only: a fixed id and time.
  std::string fixed_artifact_id;
  int64_t fixed_created_unix_ms = 0;
};

// Exports one consistent view of `fold` (entries, cursor and metadata from
// one snapshot) to `to`: chunks first, the manifest last, then the pointer.
// FailedPrecondition when the fold has no cursor, bucket or scope.
// AlreadyExists when the pointer already names a valid artifact at or
// beyond this cursor (and, with ExportOptions::stream_last_seq, not beyond
// the stream's head): checked before writing anything, and again when moving the
// pointer (another exporter may win in between; the artifact written is
// then left for prune). Keys an artifact cannot hold are skipped (see
// ExportOptions::skipped_key). InvalidArgument when one value is too large
// for any chunk (64 MiB raw): nothing is published then.
StatusOr<ArtifactManifest> ExportArtifact(Fold& fold, Transport& to, const ExportOptions& options);

struct VerifyOptions {
  // PEM files with trusted Ed25519 public keys (a private key file stands
  // for its public key). When any is given, the
  // manifest must carry a signature by one of them: an unsigned artifact is
  // refused, as with require_signature. Default: none (any or no signature;
  // a signature that is present must still verify).
  std::vector<std::string> trusted_key_files;
  // Refuse unsigned artifacts. Implied by naming a trusted key.
  // Default: false. REQUIRES: trusted_key_files not empty.
  bool require_signature = false;
};

// Reads and checks the manifest of `artifact_id` (frame checksum, schema
// version, signature). Corruption, FailedPrecondition or NotFound with a
// message naming the artifact and the fault.
StatusOr<ArtifactManifest> ReadArtifactManifest(Transport& from, const std::string& artifact_id,
                                                const VerifyOptions& options);

// The artifact the latest pointer names, or NotFound.
StatusOr<std::string> LatestArtifactId(Transport& from);

// Checks the manifest and every chunk (size, SHA-256, decompression, record
// order, key bounds, counts, scope). OK only when everything holds.
Status VerifyArtifact(Transport& from, const std::string& artifact_id, const VerifyOptions& options,
                      const ArtifactProgressFn& progress = {});

// Every artifact with a readable manifest, oldest cursor first; unreadable
// ones are reported in *unreadable (id: reason) when it is not null.
StatusOr<std::vector<ArtifactManifest>> ListArtifacts(Transport& from,
                                                      std::vector<std::string>* unreadable);

struct PruneOptions {
  // How many of the newest artifacts to keep. Default: 1. REQUIRES: > 0.
  size_t keep = 1;
  // Artifacts created less than this long ago are kept whatever `keep`
  // says: a seed or restore may be reading one, and a large seed takes
  // minutes (an exporter every minute with keep 2 would otherwise pull the
  // chunks from under it). Age is judged by the manifest's created time
  // against this machine's clock. Default: 1 hour.
  std::chrono::milliseconds min_age = std::chrono::hours(1);
  // Which manifests may decide a removal: only those ReadArtifactManifest
  // accepts with these options are counted, kept or removed; any other
  // artifact is left alone. Anyone who can write to the location can write
  // a manifest with a valid checksum (created long ago, an old cursor, or a
  // high one that pushes real artifacts out of `keep`), so name the
  // exporters' keys: then an unsigned or foreign-signed manifest never
  // causes a removal. Default: none (checksums only).
  VerifyOptions verify = {};
};

// Removes all but the newest `options.keep` artifacts whose manifests pass
// `options.verify`, never the one the pointer names nor one younger than
// `options.min_age`, nor one whose chunks a kept re-attestation names. An artifact whose removal
// fails (an object that is not what kvfold wrote there, such as a directory swapped for a link) is
// left and the others are still pruned; the first failure is returned. Returns the removed ids in
// *removed when not null.
Status PruneArtifacts(Transport& at, const PruneOptions& options,
                      std::vector<std::string>* removed);

// What a prune right after an export trusts: `trusted_key_files`, plus the
// key the export signs with (`sign_key_file`, a PEM private key, stands for
// its public key), so an exporter that signs only ever prunes artifacts
// signed by its own or a trusted key. Empty when both are.
VerifyOptions PruneTrustOfExporter(std::vector<std::string> trusted_key_files,
                                   const std::string& sign_key_file);

struct SeedOptions {
  VerifyOptions verify;
  // Seed from this artifact instead of the latest. Default: the latest.
  std::string artifact_id;
  // When the fold holds an unfinished seed (a kill, or its artifact was
  // pruned mid-read), discard it and seed from `artifact_id` or the latest
  // instead; the discard lands atomically with the first commit of the new
  // seed. Default: false (finish the unfinished seed).
  bool discard_unfinished = false;
  // Refuse an artifact of another bucket. Default: "" (the bucket the fold
  // records, if any; else any bucket).
  std::string expected_bucket;
  ArtifactProgressFn progress;
};

// Fills an empty fold from an artifact. Empty: no entries, no cursor and no
// unfinished seed; metadata alone (a first mirror that received nothing
// records bucket and scope) does not count, but a recorded bucket must be
// the artifact's. Verifies the whole artifact, then
// applies it chunk by chunk (each re-verified before its commit) and sets
// bucket, scope, stream identity and the cursor only in the final commit.
// A fold left half-seeded by a kill is finished by re-running the same seed;
// when that artifact is gone (NotFound, saying so), discard_unfinished
// seeds from the latest instead.
// FailedPrecondition for a non-empty fold; the fold is untouched on any
// verification failure.
StatusOr<ArtifactManifest> SeedFold(Fold& fold, Transport& from, const SeedOptions& options);

}  // namespace kvfold

#endif  // KVFOLD_ARTIFACT_H_
