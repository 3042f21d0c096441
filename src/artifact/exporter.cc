// Export: one consistent snapshot of a fold, written as chunks, then the
// manifest, then the pointer, so no reader ever sees a manifest whose
// chunks are not all in place.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <system_error>

#include "artifact/chunk_codec.h"
#include "artifact/fold_digest.h"
#include "artifact/manifest_codec.h"
#include "artifact/signer.h"
#include "core/mutation.h"
#include "core/pointer_rule.h"
#include "kvfold/artifact.h"
#include "kvfold/scope.h"
#include "store/exact_counts.h"

namespace kvfold {

std::string DefaultExporterId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-" + std::to_string(getpid());
}

namespace {

std::string NewArtifactId(uint64_t cursor) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%020llu-%012llx", static_cast<unsigned long long>(cursor),
                static_cast<unsigned long long>(rng() & 0xffffffffffffULL));
  return buf;
}

// The manifest of an export of `meta`, before its chunks.
ArtifactManifest ManifestOf(const FoldMeta& meta, const ExportOptions& options) {
  ArtifactManifest m;
  m.artifact_id =
      options.fixed_artifact_id.empty() ? NewArtifactId(*meta.cursor) : options.fixed_artifact_id;
  // Schema 1 unless a key needs more (ChunkWriter::Add): every reader of
  // schema 1 reads it.
  m.schema_version = 1;
  m.min_reader_version = 1;
  m.bucket = meta.bucket;
  m.stream_created = meta.stream_created;
  m.scope = *meta.scope;
  m.has_scope = true;
  m.cursor = *meta.cursor;
  m.cursor_time_ns = meta.cursor_time_ns;
  m.marker_ttl_ns = meta.marker_ttl_ns;
  m.eviction_observed = meta.eviction_observed;  // the memo travels with the snapshot
  m.eviction_cause = meta.eviction_cause;
  m.created_unix_ms = options.fixed_created_unix_ms != 0
                          ? options.fixed_created_unix_ms
                          : std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  m.exporter_id = options.exporter_id.empty() ? DefaultExporterId() : options.exporter_id;
  return m;
}

// Writes a snapshot's entries, in key order, as the chunks of `m`. Every
// record passes the checks readers make (artifact/chunk_codec.h): an export
// never publishes what its own readers reject. Compressing, hashing and
// publishing a chunk runs beside the scan of the next one. One chunk in
// flight: memory stays at about two chunks, and chunks are published,
// recorded and reported in order.
class ChunkWriter {
 public:
  // `entries_total` is for progress reports only.
  ChunkWriter(Transport& to, const ExportOptions& options, const Scope& scope,
              uint64_t entries_total, ArtifactManifest* m)
      : to_(to), options_(options), scope_(scope), m_(*m) {
    progress_.entries_total = entries_total;
  }
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;

  Status Add(std::string_view key, const Entry& e);
  // Publishes the last chunk when `publish_last`, and always waits for the
  // chunk in flight (so that RemovePublished sees it).
  Status Finish(bool publish_last);
  // No manifest names them: leave no orphan chunks behind (best effort).
  void RemovePublished() {
    for (const auto& c : m_.chunks) (void)to_.Remove(c.name);
  }

 private:
  // Waits for the chunk in flight and records it in the manifest.
  Status Collect();
  // Hands the chunk filled so far to a worker.
  Status Publish();

  Transport& to_;
  const ExportOptions& options_;
  const Scope& scope_;
  ArtifactManifest& m_;
  ArtifactProgress progress_;
  std::string raw_;
  artifact::FoldDigest digest_;  // over every record added
  ArtifactChunk current_;
  std::future<StatusOr<ArtifactChunk>> publishing_;
};

// Whether an artifact of `scope` carries `key`: OK, or why it is left out.
// *any_key is set when the key needs the schema that takes any key.
Status ArtifactCarries(std::string_view key, const Scope& scope, bool* any_key) {
  Status fits = artifact::CheckArtifactKey(key, kArtifactSchemaAnyKey);
  if (fits.ok() && !artifact::CheckArtifactKey(key, 1).ok()) {
    // Not a valid KV key, yet the fold holds it (a raw publish): it
    // travels, and only readers that take any key may read the artifact.
    if (KVFOLD_MUTANT("export-drop-odd-keys")) {
      fits = Status::InvalidArgument("key \"" + std::string(key) + "\" is not a valid KV key");
    } else {
      *any_key = true;
    }
  }
  if (fits.ok() && !scope.Contains(key)) {
    fits = Status::InvalidArgument("key \"" + std::string(key) + "\" is outside the fold's scope " +
                                   scope.ToString());
  }
  return fits;
}

Status ChunkWriter::Add(std::string_view key, const Entry& e) {
  bool any_key = false;
  Status fits = ArtifactCarries(key, scope_, &any_key);
  if (fits.ok() && any_key) m_.schema_version = m_.min_reader_version = kArtifactSchemaAnyKey;
  if (!fits.ok()) {
    if (options_.skipped_key) options_.skipped_key(key, fits);
    return Status::OK();
  }
  if (e.revision == 0 || e.revision > m_.cursor) {
    return Status::Corruption("key \"" + std::string(key) + "\" has revision " +
                              std::to_string(e.revision) + ", beyond the fold's cursor " +
                              std::to_string(m_.cursor));
  }
  const uint64_t bytes = artifact::RecordBytes(key, e.revision, e.value, e.expires_ns);
  if (bytes > artifact::kMaxChunkRawBytes) {
    return Status::InvalidArgument(
        "key \"" + std::string(key) + "\" holds a value of " + std::to_string(e.value.size()) +
        " bytes; an artifact chunk holds at most " + std::to_string(artifact::kMaxChunkRawBytes) +
        " bytes, so this fold cannot be exported (nothing was published)");
  }
  // Checked before the append: a chunk never grows past what readers accept.
  if (raw_.size() + bytes > artifact::kMaxChunkRawBytes) KVFOLD_RETURN_IF_ERROR(Publish());
  if (current_.entry_count == 0) current_.first_key = key;
  current_.last_key = key;
  ++current_.entry_count;
  artifact::AppendRecord(&raw_, key, e.revision, e.value, e.expires_ns);
  digest_.Add(key, e.revision);
  if (raw_.size() >= options_.chunk_raw_bytes) return Publish();
  return Status::OK();
}

Status ChunkWriter::Collect() {
  if (!publishing_.valid()) return Status::OK();
  StatusOr<ArtifactChunk> done = publishing_.get();
  if (!done.ok()) return done.status();
  progress_.entries_done += done->entry_count;
  progress_.bytes_done += done->compressed_size;
  m_.entry_count += done->entry_count;
  m_.chunks.push_back(std::move(done).value());
  if (options_.progress) options_.progress(progress_);
  return Status::OK();
}

Status ChunkWriter::Publish() {
  if (current_.entry_count == 0) return Status::OK();
  KVFOLD_RETURN_IF_ERROR(Collect());
  char name[32];
  std::snprintf(name, sizeof(name), "/chunk-%06zu", m_.chunks.size());
  current_.name = m_.artifact_id + name;
  auto job = std::make_shared<std::function<StatusOr<ArtifactChunk>()>>(
      [&to = to_, chunk = std::move(current_),
       data = std::move(raw_)]() mutable -> StatusOr<ArtifactChunk> {
        const std::string stored = artifact::Compress(data);
        if (stored.empty()) return Status::Internal("zstd compression failed");
        chunk.raw_size = data.size();
        chunk.compressed_size = stored.size();
        chunk.sha256 = artifact::Sha256(stored);
        KVFOLD_RETURN_IF_ERROR(to.Put(chunk.name, stored));
        return chunk;
      });
  current_ = ArtifactChunk();
  raw_ = std::string();
  raw_.reserve(options_.chunk_raw_bytes);
  try {
    publishing_ = std::async(std::launch::async, [job] { return (*job)(); });
  } catch (const std::system_error&) {
    // No thread to be had: publish on this one.
    std::promise<StatusOr<ArtifactChunk>> now;
    now.set_value((*job)());
    publishing_ = now.get_future();
  }
  return Status::OK();
}

Status ChunkWriter::Finish(bool publish_last) {
  Status s = publish_last ? Publish() : Status::OK();
  // Always waited for: on failure its chunk, if published, is removed too.
  Status last = Collect();
  if (s.ok() && last.ok()) m_.fold_digest = digest_.Value();
  return s.ok() ? last : s;
}

// Why the latest pointer `p` names no valid artifact, or nullopt when it
// names one (its manifest reads, verifies and agrees with the pointer, and
// where this exporter signs or trusts keys, one of them signed it) or when
// that cannot be told: a read that proves nothing (denied, unreachable, a
// newer schema) leaves the pointer to the forward-only rule, as before.
// Replacing a valid pointer would move it back past a newer artifact.
StatusOr<std::optional<std::string>> WhyPointerIsInvalid(Transport& to, const ArtifactPointer& p,
                                                         const ExportOptions& options,
                                                         const artifact::SigningKey* signer) {
  using Why = std::optional<std::string>;
  if (KVFOLD_MUTANT("export-trust-pointer")) return Why();
  auto m = ReadArtifactManifest(to, p.artifact_id, VerifyOptions{});
  if (!m.ok()) {
    // Only an answer that proves the manifest absent or damaged, given
    // twice: a transport maps denials and timeouts to other codes (an S3
    // 403, a manifest of a newer schema this build cannot read), and a
    // pointer that is merely unreadable here is taken as it is.
    const Status first = m.status();
    if (!first.IsNotFound() && !first.IsCorruption() && !first.IsInvalidArgument()) return Why();
    m = ReadArtifactManifest(to, p.artifact_id, VerifyOptions{});
    if (!m.ok()) return m.status().code() == first.code() ? Why(first.message()) : Why();
  }
  if (m->cursor != p.cursor || m->bucket != p.bucket || m->stream_created != p.stream_created) {
    return Why("its manifest records cursor " + std::to_string(m->cursor) + " of bucket " +
               m->bucket + " (stream created " + m->stream_created + "), the pointer cursor " +
               std::to_string(p.cursor) + " of bucket " + p.bucket + " (stream created " +
               p.stream_created + ")");
  }
  if (!m->attests.empty() && !KVFOLD_MUTANT("export-trust-attested-chunks")) {
    // A re-attestation names another artifact's chunks, which a prune
    // elsewhere may have removed after it was written.
    auto names = to.List();
    if (!names.ok()) return Why();
    for (const auto& c : m->chunks) {
      if (!std::binary_search(names->begin(), names->end(), c.name)) {
        return Why("it re-attests artifact " + m->attests + ", whose chunk " + c.name + " is gone");
      }
    }
  }
  if (signer == nullptr && options.trusted_key_files.empty()) return Why();
  std::vector<std::string> keys;
  if (signer != nullptr) keys.push_back(signer->public_key());
  for (const auto& f : options.trusted_key_files) {
    auto key = artifact::LoadPublicKey(f);
    if (!key.ok()) return key.status();
    keys.push_back(*key);
  }
  if (!m->is_signed) {
    return Why(signer != nullptr ? "its manifest is unsigned, and this exporter signs"
                                 : "its manifest is unsigned, and this exporter trusts keys");
  }
  if (std::find(keys.begin(), keys.end(), m->signer_public_key) == keys.end()) {
    return Why("its manifest is signed by key " + artifact::HexEncode(m->signer_public_key) +
               ", neither this exporter's nor a trusted one");
  }
  return Why();
}

// A re-attestation of the latest artifact `pointer` names, when it holds
// exactly the records an export of `snapshot` would: a manifest at the
// snapshot's cursor and anchor that names its chunks. nullopt when it does
// not (or cannot be shown to): the caller exports in full.
StatusOr<std::optional<ArtifactManifest>> Reattestation(Transport& to,
                                                        const ArtifactPointer& pointer,
                                                        FoldSnapshot& snapshot,
                                                        const FoldMeta& meta, const Scope& scope,
                                                        const ExportOptions& options) {
  using None = std::optional<ArtifactManifest>;
  if (KVFOLD_MUTANT("reattest-never")) return None();
  // Only an artifact this exporter would trust: it signs for the chunks'
  // values, which the digest does not cover.
  auto latest = ReadArtifactManifest(
      to, pointer.artifact_id,
      KVFOLD_MUTANT("reattest-untrusted")
          ? VerifyOptions{}
          : PruneTrustOfExporter(options.trusted_key_files, options.sign_key_file));
  if (!latest.ok()) return None();
  const ArtifactManifest& l = *latest;
  if (l.cursor != pointer.cursor || l.cursor >= *meta.cursor || l.bucket != meta.bucket ||
      l.stream_created != meta.stream_created || !l.has_scope || l.scope != *meta.scope ||
      l.fold_digest.empty() || l.entry_count != meta.live_keys) {
    return None();
  }
  // The same records: (key, revision) pairs, as the chunk writer takes them.
  artifact::FoldDigest digest;
  uint64_t count = 0;
  bool odd = false;
  Status scanned =
      snapshot.Scan("", /*include_tombstones=*/false, [&](std::string_view key, const Entry& e) {
        bool any_key = false;
        if (!ArtifactCarries(key, scope, &any_key).ok()) return true;
        if (e.revision == 0 || e.revision > l.cursor ||
            (e.revision == l.cursor && KVFOLD_MUTANT("reattest-cursor-record-changed"))) {
          odd = true;  // changed since
          return false;
        }
        digest.Add(key, e.revision);
        ++count;
        return true;
      });
  if (!scanned.ok()) return scanned;
  if (odd || count != l.entry_count ||
      (digest.Value() != l.fold_digest && !KVFOLD_MUTANT("reattest-skip-digest"))) {
    return None();
  }
  // Its chunks must still be there (a prune elsewhere may have taken an
  // artifact nothing named any more).
  auto names = to.List();
  if (!names.ok()) return names.status();
  for (const auto& c : l.chunks) {
    if (!std::binary_search(names->begin(), names->end(), c.name) &&
        !KVFOLD_MUTANT("reattest-skip-chunks-listed")) {
      return None();
    }
  }
  ArtifactManifest m = ManifestOf(meta, options);
  m.schema_version = m.min_reader_version = kArtifactSchemaAttestation;
  m.attests = l.attests.empty() ? l.artifact_id : l.attests;
  m.chunks = l.chunks;
  m.entry_count = l.entry_count;
  m.fold_digest = l.fold_digest;
  if (KVFOLD_MUTANT("reattest-memo-of-latest")) {
    m.eviction_observed = l.eviction_observed;
    m.eviction_cause = l.eviction_cause;
  }
  return std::optional<ArtifactManifest>(std::move(m));
}

// The manifest object, signed when `signer`. InvalidArgument when it is
// larger than readers take (kMaxManifestBytes).
StatusOr<std::string> ManifestFrame(const artifact::SigningKey* signer, ArtifactManifest* m) {
  ::kvfold::wire::ManifestEnvelope envelope;
  envelope.set_manifest(artifact::ToProto(*m).SerializeAsString());
  if (signer) {
    auto sig = signer->Sign(envelope.manifest());
    if (!sig.ok()) return sig.status();
    envelope.set_signature(*sig);
    envelope.set_signer_public_key(signer->public_key());
    m->is_signed = true;
    m->signer_public_key = signer->public_key();
  }
  std::string frame = artifact::EncodeManifestFrame(envelope);
  if (frame.size() > artifact::kMaxManifestBytes) {
    return Status::InvalidArgument(
        "the manifest of this export would be " + std::to_string(frame.size()) + " bytes (" +
        std::to_string(m->chunks.size()) + " chunks), more than the " +
        std::to_string(artifact::kMaxManifestBytes) +
        " readers take; export in larger chunks (ExportOptions::chunk_raw_bytes, at most " +
        std::to_string(artifact::kMaxChunkRawBytes / 2) + ")");
  }
  return frame;
}

// The manifest after its chunks; then the pointer, with `next`'s
// permission to replace the current one.
Status PublishManifest(Transport& to, const ExportOptions& options, const std::string& frame,
                       const ArtifactPointer& next, ArtifactManifest* m) {
  KVFOLD_RETURN_IF_ERROR(to.Put(m->artifact_id + "/manifest", frame));
  if (!options.advance_pointer) return Status::OK();
  ArtifactPointer pointer = next;
  pointer.artifact_id = m->artifact_id;
  return to.AdvancePointer(pointer).WithContext("artifact " + m->artifact_id + " was written to " +
                                                to.location() + " but not made the latest");
}

}  // namespace

StatusOr<ArtifactManifest> ExportArtifact(Fold& fold, Transport& to, const ExportOptions& options) {
  if (options.chunk_raw_bytes == 0 || options.chunk_raw_bytes > artifact::kMaxChunkRawBytes / 2) {
    return Status::InvalidArgument("chunk size must be between 1 byte and " +
                                   std::to_string(artifact::kMaxChunkRawBytes / 2));
  }
  std::unique_ptr<artifact::SigningKey> signer;
  if (!options.sign_key_file.empty()) {
    auto key = artifact::SigningKey::Load(options.sign_key_file);
    if (!key.ok()) return key.status();
    signer = std::move(key).value();
  }
  auto snapshot = fold.Snapshot();
  if (!snapshot.ok()) return snapshot.status();
  // The artifact states its key count: a catch-up that has not recounted
  // yet is counted here.
  FoldMeta meta = (*snapshot)->meta();
  KVFOLD_RETURN_IF_ERROR(store::CountExactly(**snapshot, &meta));
  if (!meta.cursor || meta.bucket.empty() || !meta.scope || meta.stream_created.empty()) {
    return Status::FailedPrecondition(
        "the fold has no cursor, bucket, scope or stream identity yet: mirror it before exporting");
  }
  ArtifactPointer next{"(this export)", *meta.cursor, meta.bucket, meta.stream_created};
  std::string invalid_why;
  std::optional<ArtifactPointer> latest;  // as read before the export
  if (options.advance_pointer) {
    // Nothing newer to publish: do not write an artifact nobody will use.
    auto pointer = to.ReadPointer();
    if (!pointer.ok()) return pointer.status();
    latest = *pointer;
    if (*pointer && ((**pointer).cursor >= *meta.cursor || (**pointer).bucket != meta.bucket ||
                     (**pointer).stream_created != meta.stream_created)) {
      // A pointer that would stop this export (at or past its cursor, or
      // of another bucket or stream) must name a valid artifact: anyone
      // who can write the location can write the pointer.
      auto why = WhyPointerIsInvalid(to, **pointer, options, signer.get());
      if (!why.ok()) {
        return why.status().WithContext("checking artifact " + (**pointer).artifact_id +
                                        ", which the latest pointer names");
      }
      if (*why) {
        next.replaces_invalid = (**pointer).artifact_id;
        invalid_why = "the latest pointer at " + to.location() + " named artifact " +
                      (**pointer).artifact_id + " at cursor " + std::to_string((**pointer).cursor) +
                      ", which is not valid: " + **why;
      }
    }
    if (!next.replaces_invalid && *pointer && (**pointer).cursor > *meta.cursor &&
        options.stream_last_seq) {
      // Read after the pointer: a pointer beyond it names another history.
      auto head = options.stream_last_seq();
      if (!head.ok()) return head.status().WithContext("reading the stream's last sequence");
      if ((**pointer).cursor > *head) next.replaces = {(**pointer).artifact_id, *head};
    }
    Status advance = core::CheckPointerAdvance(*pointer, next);
    if (advance.IsAlreadyExists() && (**pointer).cursor == *meta.cursor) {
      // The answer vouches that the latest artifact is current. The
      // pointer may be one an earlier attempt left behind a failed fsync:
      // advancing to it again lets the transport make it durable (the
      // directory transport writes it anew) before this answer is given.
      Status confirmed = to.AdvancePointer(**pointer);
      if (!confirmed.ok() && !confirmed.IsAlreadyExists()) return confirmed;
    }
    KVFOLD_RETURN_IF_ERROR(advance);
  }
  ArtifactManifest m = ManifestOf(meta, options);
  KVFOLD_RETURN_IF_ERROR(ValidateObjectName(m.artifact_id).WithContext("artifact id"));
  auto scope = Scope::Make(m.scope);
  if (!scope.ok()) return scope.status().WithContext("the fold's scope");
  if (options.advance_pointer && options.reattest && latest && !next.replaces_invalid &&
      !next.replaces) {
    auto again = Reattestation(to, *latest, **snapshot, meta, *scope, options);
    if (!again.ok()) return again.status().WithContext("re-attesting the latest artifact");
    if (*again) {
      if (!options.fixed_artifact_id.empty()) (*again)->artifact_id = options.fixed_artifact_id;
      auto frame = ManifestFrame(signer.get(), &**again);
      if (!frame.ok()) return frame.status();
      KVFOLD_RETURN_IF_ERROR(PublishManifest(to, options, *frame, next, &**again));
      return std::move(**again);
    }
  }

  ChunkWriter chunks(to, options, *scope, meta.live_keys, &m);
  Status inner;
  Status scanned = (*snapshot)->Scan("", /*include_tombstones=*/false,
                                     [&](std::string_view key, const Entry& e) {
                                       inner = chunks.Add(key, e);
                                       return inner.ok();
                                     });
  if (inner.ok()) inner = scanned;
  Status finished = chunks.Finish(/*publish_last=*/inner.ok());
  if (inner.ok()) inner = finished;
  auto frame = inner.ok() ? ManifestFrame(signer.get(), &m) : StatusOr<std::string>(inner);
  if (!frame.ok()) {
    chunks.RemovePublished();
    return frame.status();
  }
  if (next.replaces_invalid) {
    // Judged before the chunks were written, maybe minutes ago: judged
    // again now, on the pointer as it is (the swap replaces only that one).
    auto now = to.ReadPointer();
    if (!now.ok()) return now.status();
    bool still = *now && (**now).artifact_id == *next.replaces_invalid;
    if (still) {
      auto why = WhyPointerIsInvalid(to, **now, options, signer.get());
      if (!why.ok()) return why.status();
      still = why->has_value();
    }
    if (!still) next.replaces_invalid.reset();
  }
  KVFOLD_RETURN_IF_ERROR(PublishManifest(to, options, *frame, next, &m));
  if (next.replaces_invalid && options.replaced_pointer) options.replaced_pointer(invalid_why);
  return m;
}

}  // namespace kvfold
