// Export: one consistent snapshot of a fold, written as chunks, then the
// manifest, then the pointer, so no reader ever sees a manifest whose
// chunks are not all in place.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <system_error>
#include <random>

#include "artifact/chunk_codec.h"
#include "artifact/manifest_codec.h"
#include "artifact/signer.h"
#include "core/pointer_rule.h"
#include "kvfold/artifact.h"
#include "kvfold/scope.h"

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
  const FoldMeta& meta = (*snapshot)->meta();
  if (!meta.cursor || meta.bucket.empty() || !meta.scope || meta.stream_created.empty()) {
    return Status::FailedPrecondition(
        "the fold has no cursor, bucket, scope or stream identity yet: mirror it before exporting");
  }

  if (options.advance_pointer) {
    // Nothing newer to publish: do not write an artifact nobody will use.
    auto pointer = to.ReadPointer();
    if (!pointer.ok()) return pointer.status();
    KVFOLD_RETURN_IF_ERROR(core::CheckPointerAdvance(
        *pointer, ArtifactPointer{"(this export)", *meta.cursor, meta.bucket, meta.stream_created}));
  }

  ArtifactManifest m;
  m.artifact_id = options.fixed_artifact_id.empty() ? NewArtifactId(*meta.cursor)
                                                    : options.fixed_artifact_id;
  KVFOLD_RETURN_IF_ERROR(ValidateObjectName(m.artifact_id).WithContext("artifact id"));
  m.schema_version = kArtifactSchemaVersion;
  m.min_reader_version = 1;
  m.bucket = meta.bucket;
  m.stream_created = meta.stream_created;
  m.scope = *meta.scope;
  m.has_scope = true;
  m.cursor = *meta.cursor;
  m.cursor_time_ns = meta.cursor_time_ns;
  m.marker_ttl_ns = meta.marker_ttl_ns;
  m.eviction_observed = meta.eviction_observed;  // the memo travels with the snapshot
  m.created_unix_ms = options.fixed_created_unix_ms != 0
                          ? options.fixed_created_unix_ms
                          : std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  m.exporter_id = options.exporter_id.empty() ? DefaultExporterId() : options.exporter_id;

  ArtifactProgress progress;
  progress.entries_total = meta.live_keys;
  std::string raw;
  ArtifactChunk current;
  // Compressing, hashing and publishing a chunk runs beside the scan of the
  // next one. One chunk in flight: memory stays at about two chunks, and
  // chunks are published, recorded and reported in order.
  std::future<StatusOr<ArtifactChunk>> publishing;
  auto collect = [&]() -> Status {
    if (!publishing.valid()) return Status::OK();
    StatusOr<ArtifactChunk> done = publishing.get();
    if (!done.ok()) return done.status();
    progress.entries_done += done->entry_count;
    progress.bytes_done += done->compressed_size;
    m.entry_count += done->entry_count;
    m.chunks.push_back(std::move(done).value());
    if (options.progress) options.progress(progress);
    return Status::OK();
  };
  auto flush = [&]() -> Status {
    if (current.entry_count == 0) return Status::OK();
    KVFOLD_RETURN_IF_ERROR(collect());
    char name[32];
    std::snprintf(name, sizeof(name), "/chunk-%06zu", m.chunks.size());
    current.name = m.artifact_id + name;
    auto job = std::make_shared<std::function<StatusOr<ArtifactChunk>()>>(
        [&to, chunk = std::move(current), data = std::move(raw)]() mutable
        -> StatusOr<ArtifactChunk> {
          const std::string stored = artifact::Compress(data);
          if (stored.empty()) return Status::Internal("zstd compression failed");
          chunk.raw_size = data.size();
          chunk.compressed_size = stored.size();
          chunk.sha256 = artifact::Sha256(stored);
          KVFOLD_RETURN_IF_ERROR(to.Put(chunk.name, stored));
          return chunk;
        });
    current = ArtifactChunk();
    raw = std::string();
    raw.reserve(options.chunk_raw_bytes);
    try {
      publishing = std::async(std::launch::async, [job] { return (*job)(); });
    } catch (const std::system_error&) {
      // No thread to be had: publish on this one.
      std::promise<StatusOr<ArtifactChunk>> now;
      now.set_value((*job)());
      publishing = now.get_future();
    }
    return Status::OK();
  };
  auto scope = Scope::Make(m.scope);
  if (!scope.ok()) return scope.status().WithContext("the fold's scope");
  // Every record passes the checks readers make (artifact/chunk_codec.h):
  // an export never publishes what its own readers reject.
  auto add = [&](std::string_view key, const Entry& e) -> Status {
    Status fits = artifact::CheckArtifactKey(key);
    if (fits.ok() && !scope->Contains(key)) {
      fits = Status::InvalidArgument("key \"" + std::string(key) +
                                     "\" is outside the fold's scope " + scope->ToString());
    }
    if (!fits.ok()) {
      if (options.skipped_key) options.skipped_key(key, fits);
      return Status::OK();
    }
    if (e.revision == 0 || e.revision > m.cursor) {
      return Status::Corruption("key \"" + std::string(key) + "\" has revision " +
                                std::to_string(e.revision) + ", beyond the fold's cursor " +
                                std::to_string(m.cursor));
    }
    const uint64_t bytes = artifact::RecordBytes(key, e.revision, e.value);
    if (bytes > artifact::kMaxChunkRawBytes) {
      return Status::InvalidArgument(
          "key \"" + std::string(key) + "\" holds a value of " + std::to_string(e.value.size()) +
          " bytes; an artifact chunk holds at most " +
          std::to_string(artifact::kMaxChunkRawBytes) +
          " bytes, so this fold cannot be exported (nothing was published)");
    }
    // Checked before the append: a chunk never grows past what readers accept.
    if (raw.size() + bytes > artifact::kMaxChunkRawBytes) KVFOLD_RETURN_IF_ERROR(flush());
    if (current.entry_count == 0) current.first_key = key;
    current.last_key = key;
    ++current.entry_count;
    artifact::AppendRecord(&raw, key, e.revision, e.value);
    if (raw.size() >= options.chunk_raw_bytes) return flush();
    return Status::OK();
  };
  Status inner;
  Status scanned = (*snapshot)->Scan("", /*include_tombstones=*/false,
                                     [&](std::string_view key, const Entry& e) {
                                       inner = add(key, e);
                                       return inner.ok();
                                     });
  if (inner.ok()) inner = scanned;
  if (inner.ok()) inner = flush();
  // Always waited for: on failure its chunk, if published, is removed too.
  if (Status last = collect(); inner.ok()) inner = last;
  if (!inner.ok()) {
    // No manifest names them: leave no orphan chunks behind (best effort).
    for (const auto& c : m.chunks) (void)to.Remove(c.name);
    return inner;
  }

  ::kvfold::wire::ManifestEnvelope envelope;
  envelope.set_manifest(artifact::ToProto(m).SerializeAsString());
  if (signer) {
    auto sig = signer->Sign(envelope.manifest());
    if (!sig.ok()) return sig.status();
    envelope.set_signature(*sig);
    envelope.set_signer_public_key(signer->public_key());
    m.is_signed = true;
    m.signer_public_key = signer->public_key();
  }
  KVFOLD_RETURN_IF_ERROR(to.Put(m.artifact_id + "/manifest", artifact::EncodeManifestFrame(envelope)));
  if (options.advance_pointer) {
    Status moved = to.AdvancePointer(
        ArtifactPointer{m.artifact_id, m.cursor, m.bucket, m.stream_created});
    if (!moved.ok()) {
      return moved.WithContext("artifact " + m.artifact_id + " was written to " + to.location() +
                               " but not made the latest");
    }
  }
  return m;
}

}  // namespace kvfold
