// Reading, verifying, listing and pruning artifacts.

#include <algorithm>
#include <chrono>
#include <set>
#include <vector>

#include "artifact/artifact_reader.h"
#include "artifact/chunk_codec.h"
#include "artifact/fold_digest.h"
#include "artifact/manifest_codec.h"
#include "artifact/signer.h"
#include "core/mutation.h"
#include "kvfold/scope.h"

namespace kvfold {

uint64_t ArtifactManifest::raw_bytes() const {
  uint64_t n = 0;
  for (const auto& c : chunks) n += c.raw_size;
  return n;
}

uint64_t ArtifactManifest::compressed_bytes() const {
  uint64_t n = 0;
  for (const auto& c : chunks) n += c.compressed_size;
  return n;
}

StatusOr<ArtifactManifest> ReadArtifactManifest(Transport& from, const std::string& artifact_id,
                                                const VerifyOptions& options) {
  KVFOLD_RETURN_IF_ERROR(ValidateObjectName(artifact_id).WithContext("artifact id"));
  const bool trusts_keys = !options.trusted_key_files.empty();
  if (options.require_signature && !trusts_keys) {
    return Status::InvalidArgument("requiring a signature needs at least one trusted key");
  }
  const std::string what = "manifest of artifact " + artifact_id + " at " + from.location();
  auto bytes = from.Get(artifact_id + "/manifest", artifact::kMaxManifestBytes);
  if (!bytes.ok()) {
    if (bytes.status().IsNotFound()) {
      return Status::NotFound("artifact " + artifact_id + " not found at " + from.location() +
                              " (no manifest)");
    }
    return bytes.status().WithContext(what);
  }
  ::kvfold::wire::ManifestEnvelope envelope;
  ::kvfold::wire::Manifest proto;
  KVFOLD_RETURN_IF_ERROR(artifact::DecodeManifestFrame(*bytes, what, &envelope, &proto));
  ArtifactManifest m = artifact::FromProto(proto, envelope);
  if (m.artifact_id != artifact_id) {
    return Status::Corruption(what + " names itself " + m.artifact_id);
  }
  if (!m.fold_digest.empty() && m.fold_digest.size() != 32) {
    return Status::Corruption(what + " records a fold digest of " +
                              std::to_string(m.fold_digest.size()) + " bytes, not 32");
  }
  if (!m.attests.empty()) {
    // A re-attestation names the chunks of one other artifact, and says so
    // in a schema older readers refuse by its version.
    if (m.min_reader_version < kArtifactSchemaAttestation) {
      return Status::Corruption(what + " re-attests artifact " + m.attests +
                                " but claims reader schema " +
                                std::to_string(m.min_reader_version));
    }
    if (m.attests == artifact_id || !ValidateObjectName(m.attests).ok() ||
        m.attests.find('/') != std::string::npos) {
      return Status::Corruption(what + " re-attests \"" + m.attests +
                                "\", which is no other artifact's id");
    }
  }
  // The chunks are the artifact's own, or those of the one it re-attests.
  const std::string owner = m.attests.empty() ? artifact_id : m.attests;
  for (size_t i = 0; i < m.chunks.size(); ++i) {
    bool inside = m.chunks[i].name.starts_with(
        KVFOLD_MUTANT("reader-owner-prefix-loose") ? owner : owner + "/");
    if (!m.attests.empty() && KVFOLD_MUTANT("reader-trust-attested-chunks")) inside = true;
    if (!inside || !ValidateObjectName(m.chunks[i].name).ok()) {
      return Status::Corruption(what + " lists chunk " + std::to_string(i) + " as \"" +
                                m.chunks[i].name + "\", outside the artifact" +
                                (m.attests.empty() ? "" : " it re-attests (" + m.attests + ")"));
    }
  }
  if (m.is_signed) {
    if (!artifact::VerifyEd25519(m.signer_public_key, envelope.manifest(), envelope.signature())) {
      return Status::Corruption(what + " carries a signature that does not verify");
    }
  }
  if (trusts_keys) {
    std::set<std::string> trusted;
    for (const auto& f : options.trusted_key_files) {
      auto key = artifact::LoadPublicKey(f);
      if (!key.ok()) return key.status();
      trusted.insert(*key);
    }
    if (m.is_signed && !trusted.contains(m.signer_public_key)) {
      return Status::FailedPrecondition(what + " is signed by key " +
                                        artifact::HexEncode(m.signer_public_key) +
                                        ", which is not among the trusted keys");
    }
  }
  // Naming trusted keys requires a signature: otherwise stripping the
  // signature would be all it takes to get past them.
  if (!m.is_signed && (options.require_signature || trusts_keys)) {
    return Status::FailedPrecondition(what + " is unsigned, and a signature is required");
  }
  return m;
}

StatusOr<std::string> LatestArtifactId(Transport& from) {
  auto p = from.ReadPointer();
  if (!p.ok()) return p.status();
  if (!*p) return Status::NotFound("no artifact has been published at " + from.location());
  return (*p)->artifact_id;
}

namespace artifact {

StatusOr<ArtifactManifest> ReadLatestManifest(Transport& from, const VerifyOptions& options) {
  auto p = from.ReadPointer();
  if (!p.ok()) return p.status();
  if (!*p) return Status::NotFound("no artifact has been published at " + from.location());
  const ArtifactPointer& pointer = **p;
  auto m = ReadArtifactManifest(from, pointer.artifact_id, options);
  if (!m.ok()) {
    return m.status().WithContext("the latest pointer at " + from.location() + " names artifact " +
                                  pointer.artifact_id);
  }
  // What the manifest lacks is said first: an empty bucket is no mismatch.
  KVFOLD_RETURN_IF_ERROR(CheckRestorable(*m));
  if ((m->cursor != pointer.cursor || m->bucket != pointer.bucket ||
       m->stream_created != pointer.stream_created) &&
      !KVFOLD_MUTANT("reader-trust-pointer")) {
    return Status::Corruption(
        "the latest pointer at " + from.location() + " names artifact " + pointer.artifact_id +
        " at cursor " + std::to_string(pointer.cursor) + " of bucket " + pointer.bucket +
        ", but its manifest records cursor " + std::to_string(m->cursor) + " of bucket " +
        m->bucket + " (stream created " + m->stream_created +
        "): the pointer was damaged or rewritten by hand. An exporter's next round "
        "replaces it; meanwhile name an artifact explicitly");
  }
  return m;
}

Status ReadChunk(Transport& from, const ArtifactManifest& m, size_t index,
                 std::string* previous_key, const RecordFn& fn, uint64_t* stored_bytes) {
  const ArtifactChunk& c = m.chunks[index];
  const std::string what =
      "chunk " + std::to_string(index) + " (" + c.name + ") of artifact " + m.artifact_id;
  if (c.compressed_size > kMaxChunkStoredBytes) {
    return Status::Corruption(what + " is listed at " + std::to_string(c.compressed_size) +
                              " bytes, more than the " + std::to_string(kMaxChunkStoredBytes) +
                              " any chunk compresses to");
  }
  // The manifest's size bounds the read: a larger object is refused unread.
  auto bytes = from.Get(c.name, c.compressed_size);
  if (!bytes.ok()) {
    if (bytes.status().IsNotFound()) return Status::Corruption(what + " is missing");
    return bytes.status().WithContext(what);
  }
  *stored_bytes = bytes->size();
  if (bytes->size() != c.compressed_size) {
    return Status::Corruption(what + " is " + std::to_string(bytes->size()) +
                              " bytes; the manifest says " + std::to_string(c.compressed_size) +
                              " (truncated or replaced)");
  }
  if (Sha256(*bytes) != c.sha256 && !KVFOLD_MUTANT("chunk-skip-sha256")) {
    return Status::Corruption(what + " does not match its SHA-256 in the manifest (corrupt)");
  }
  auto raw = Decompress(*bytes, c.raw_size, what);
  if (!raw.ok()) return raw.status();
  auto scope = Scope::Make(m.scope);
  if (!scope.ok()) return Status::Corruption(what + ": manifest scope is invalid");
  // Check everything first, then hand records out: a caller never sees a
  // record from a chunk that turns out bad.
  uint64_t count = 0;
  std::string first, last = *previous_key;
  Status checked =
      ForEachRecord(*raw, what, [&](std::string_view key, uint64_t rev, std::string_view, int64_t) {
        if (key <= last) {  // keys are never empty, so the first one passes
          return Status::Corruption(what + ": key \"" + std::string(key) + "\" is out of order");
        }
        if (!CheckArtifactKey(key, m.min_reader_version).ok() || !scope->Contains(key)) {
          return Status::Corruption(what + ": key \"" + std::string(key) +
                                    "\" is not a valid key in the artifact's scope");
        }
        if (rev == 0 || rev > m.cursor) {
          return Status::Corruption(what + ": key \"" + std::string(key) + "\" has revision " +
                                    std::to_string(rev) + ", beyond the artifact's cursor " +
                                    std::to_string(m.cursor));
        }
        if (count == 0) first = std::string(key);
        last = std::string(key);
        ++count;
        return Status::OK();
      });
  KVFOLD_RETURN_IF_ERROR(checked);
  if (count != c.entry_count || (count > 0 && (first != c.first_key || last != c.last_key))) {
    return Status::Corruption(what + " does not hold the entries its manifest lists");
  }
  KVFOLD_RETURN_IF_ERROR(ForEachRecord(*raw, what, fn));
  *previous_key = last;
  return Status::OK();
}

Status CheckRestorable(const ArtifactManifest& m) {
  const std::string what = "artifact " + m.artifact_id;
  if (!m.has_scope) {
    return Status::FailedPrecondition(what + " records no scope; it cannot seed or restore a fold");
  }
  auto scope = Scope::Make(m.scope);
  if (!scope.ok() || scope->prefixes() != m.scope) {
    std::string listed;
    for (const auto& p : m.scope) listed += (listed.empty() ? "\"" : ", \"") + p + "\"";
    return Status::Corruption(what + " records scope [" + listed +
                              "], which is not a valid scope in canonical form");
  }
  if (m.bucket.empty() || m.stream_created.empty()) {
    return Status::Corruption(what + " records no " +
                              (m.bucket.empty() ? "bucket" : "stream identity") +
                              "; it cannot seed or restore a fold");
  }
  return Status::OK();
}

Status ReadAllChunks(Transport& from, const ArtifactManifest& m, const RecordFn& fn,
                     const ArtifactProgressFn& progress) {
  std::string previous;
  ArtifactProgress p;
  p.entries_total = m.entry_count;
  FoldDigest digest;
  const RecordFn digested = [&](std::string_view key, uint64_t rev, std::string_view value,
                                int64_t expires_ns) {
    digest.Add(key, rev);
    return fn(key, rev, value, expires_ns);
  };
  for (size_t i = 0; i < m.chunks.size(); ++i) {
    uint64_t stored = 0;
    KVFOLD_RETURN_IF_ERROR(ReadChunk(from, m, i, &previous, digested, &stored));
    p.entries_done += m.chunks[i].entry_count;
    p.bytes_done += stored;
    if (progress) progress(p);
  }
  if (p.entries_done != m.entry_count) {
    return Status::Corruption("artifact " + m.artifact_id + " lists " +
                              std::to_string(m.entry_count) + " entries but its chunks hold " +
                              std::to_string(p.entries_done));
  }
  return CheckFoldDigest(m.fold_digest, digest.Value(), "the records of artifact " + m.artifact_id);
}

}  // namespace artifact

Status VerifyArtifact(Transport& from, const std::string& artifact_id, const VerifyOptions& options,
                      const ArtifactProgressFn& progress) {
  auto m = ReadArtifactManifest(from, artifact_id, options);
  if (!m.ok()) return m.status();
  return artifact::ReadAllChunks(
      from, *m, [](std::string_view, uint64_t, std::string_view, int64_t) { return Status::OK(); },
      progress);
}

namespace {

// The manifests among the object `names` of `from` that pass `verify`,
// oldest first.
std::vector<ArtifactManifest> ManifestsIn(Transport& from, const std::vector<std::string>& names,
                                          const VerifyOptions& verify,
                                          std::vector<std::string>* unreadable) {
  std::vector<ArtifactManifest> out;
  for (const auto& name : names) {
    const std::string suffix = "/manifest";
    if (!name.ends_with(suffix)) continue;
    const std::string id = name.substr(0, name.size() - suffix.size());
    auto m = ReadArtifactManifest(from, id, verify);
    if (m.ok()) {
      out.push_back(std::move(m).value());
    } else if (unreadable != nullptr) {
      unreadable->push_back(id + ": " + m.status().ToString());
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.cursor != b.cursor ? a.cursor < b.cursor : a.artifact_id < b.artifact_id;
  });
  return out;
}

}  // namespace

StatusOr<std::vector<ArtifactManifest>> ListArtifacts(Transport& from,
                                                      std::vector<std::string>* unreadable) {
  auto names = from.List();
  if (!names.ok()) return names.status();
  return ManifestsIn(from, *names, VerifyOptions{}, unreadable);
}

Status PruneArtifacts(Transport& at, const PruneOptions& options,
                      std::vector<std::string>* removed) {
  if (options.keep == 0) return Status::InvalidArgument("prune must keep at least one artifact");
  auto pointer = at.ReadPointer();
  if (!pointer.ok()) return pointer.status();
  auto names = at.List();
  if (!names.ok()) return names.status();
  // Only manifests a restore would accept decide what is old: a forged one
  // must neither get itself (and whatever its names reach) removed nor
  // push real artifacts out of `keep`.
  const std::vector<ArtifactManifest> all = ManifestsIn(
      at, *names, KVFOLD_MUTANT("prune-trust-unverified") ? VerifyOptions{} : options.verify,
      nullptr);
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  size_t kept = 0;
  std::set<std::string> keep;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const bool named = *pointer && (*pointer)->artifact_id == it->artifact_id;
    const bool young = now_ms - it->created_unix_ms < options.min_age.count();
    if (named || young || kept < options.keep) {
      ++kept;
      keep.insert(it->artifact_id);
    }
  }
  // A kept re-attestation reads the chunks of the artifact it attests.
  for (const auto& m : all) {
    const bool latest = *pointer && (*pointer)->artifact_id == m.artifact_id;
    if (keep.contains(m.artifact_id) && !m.attests.empty() &&
        !KVFOLD_MUTANT("prune-drop-attested") &&
        (latest || !KVFOLD_MUTANT("prune-attested-by-latest-only"))) {
      keep.insert(m.attests);
    }
  }
  Status first_failure;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (keep.contains(it->artifact_id)) continue;
    // The manifest goes first: an artifact without one is never listed or
    // restored, so a crash mid-prune leaves only unreferenced chunks.
    const std::string manifest = it->artifact_id + "/manifest";
    Status s = at.Remove(manifest);
    for (const auto& n : *names) {
      if (s.ok() && n != manifest && n.starts_with(it->artifact_id + "/")) s = at.Remove(n);
    }
    if (!s.ok()) {
      // Left as it is; one bad artifact does not keep the others.
      if (first_failure.ok()) first_failure = s.WithContext("pruning artifact " + it->artifact_id);
      continue;
    }
    if (removed != nullptr) removed->push_back(it->artifact_id);
  }
  return first_failure;
}

VerifyOptions PruneTrustOfExporter(std::vector<std::string> trusted_key_files,
                                   const std::string& sign_key_file) {
  if (!sign_key_file.empty()) trusted_key_files.push_back(sign_key_file);
  if (sign_key_file.empty() && KVFOLD_MUTANT("exporter-trust-needs-sign-key")) {
    trusted_key_files.clear();
  }
  VerifyOptions verify;
  verify.trusted_key_files = std::move(trusted_key_files);
  return verify;
}

}  // namespace kvfold
