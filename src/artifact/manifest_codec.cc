#include "artifact/manifest_codec.h"

#include <climits>

#include "artifact/signer.h"
#include "core/mutation.h"

namespace kvfold::artifact {

namespace pb = ::kvfold::wire;

std::string EncodeManifestFrame(const pb::ManifestEnvelope& envelope) {
  std::string body = envelope.SerializeAsString();
  std::string out(kManifestMagic);
  const auto n = static_cast<uint32_t>(body.size());
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  out += body;
  out += Sha256(out);
  return out;
}

// The envelope's length goes to the protobuf parser as an int.
static_assert(kMaxManifestBytes <= INT_MAX);

Status DecodeManifestFrame(std::string_view bytes, const std::string& what,
                           pb::ManifestEnvelope* envelope, pb::Manifest* manifest) {
  const bool capped = !KVFOLD_MUTANT("manifest-skip-size-cap");
  if (capped && bytes.size() > kMaxManifestBytes) {
    return Status::Corruption(what + " is " + std::to_string(bytes.size()) +
                              " bytes, more than the " + std::to_string(kMaxManifestBytes) +
                              " a manifest may hold");
  }
  if (bytes.size() < kManifestMagic.size() + 4 + 32) {
    return Status::Corruption(what + " is " + std::to_string(bytes.size()) +
                              " bytes, too short for a manifest frame (truncated?)");
  }
  if (bytes.substr(0, 4) != kManifestMagic) {
    return Status::Corruption(what +
                              " does not start with \"KVFM\": not a kvfold manifest, or corrupt");
  }
  uint32_t n = 0;
  for (int i = 4; i < 8; ++i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  if (capped && n > kMaxManifestBytes - 40) {
    return Status::Corruption(what + " frame says " + std::to_string(n) +
                              " envelope bytes, more than the " +
                              std::to_string(kMaxManifestBytes) + " a manifest may hold");
  }
  if (static_cast<uint64_t>(n) + 8 + 32 != bytes.size()) {
    return Status::Corruption(
        what + " frame says " + std::to_string(n) + " envelope bytes but holds " +
        std::to_string(bytes.size() >= 40 ? bytes.size() - 40 : 0) + " (truncated or corrupt)");
  }
  const std::string_view framed = bytes.substr(0, 8 + n);
  if (Sha256(framed) != bytes.substr(8 + n) && !KVFOLD_MUTANT("manifest-skip-checksum")) {
    return Status::Corruption(what + " fails its SHA-256 checksum: the manifest is corrupt");
  }
  if (!envelope->ParseFromArray(bytes.data() + 8, static_cast<int>(n))) {
    return Status::Corruption(what + " holds an envelope that does not decode");
  }
  if (!manifest->ParseFromString(envelope->manifest())) {
    return Status::Corruption(what + " holds a manifest that does not decode");
  }
  if (manifest->schema_version() == 0 || manifest->min_reader_version() == 0) {
    return Status::Corruption(what + " has no schema version");
  }
  if (manifest->min_reader_version() > kArtifactSchemaVersion) {
    return Status::FailedPrecondition(
        what + " has schema version " + std::to_string(manifest->schema_version()) +
        " and needs a reader of schema " + std::to_string(manifest->min_reader_version()) +
        " or newer; this kvfold reads schema " + std::to_string(kArtifactSchemaVersion) +
        ". Upgrade kvfold on this node.");
  }
  return Status::OK();
}

ArtifactManifest FromProto(const pb::Manifest& m, const pb::ManifestEnvelope& envelope) {
  ArtifactManifest out;
  out.artifact_id = m.artifact_id();
  out.schema_version = m.schema_version();
  out.min_reader_version = m.min_reader_version();
  out.bucket = m.bucket();
  out.stream_created = m.stream_created();
  out.scope.assign(m.scope().begin(), m.scope().end());
  out.has_scope = m.has_scope();
  out.cursor = m.cursor();
  out.cursor_time_ns = m.cursor_time_unix_ns();
  out.marker_ttl_ns = m.marker_ttl_ns();
  out.eviction_observed = m.eviction_observed();
  if (out.eviction_observed) {
    out.eviction_cause =
        m.eviction_cause().empty() ? std::string(kEvictionCauseUnknown) : m.eviction_cause();
  }
  out.fold_digest = m.fold_digest();
  out.attests = m.attests();
  out.created_unix_ms = m.created_unix_ms();
  out.exporter_id = m.exporter_id();
  out.entry_count = m.entry_count();
  for (const auto& c : m.chunks()) {
    out.chunks.push_back(ArtifactChunk{c.name(), c.entry_count(), c.first_key(), c.last_key(),
                                       c.raw_size(), c.compressed_size(), c.sha256()});
  }
  out.is_signed = !envelope.signature().empty();
  out.signer_public_key = envelope.signer_public_key();
  return out;
}

pb::Manifest ToProto(const ArtifactManifest& m) {
  pb::Manifest out;
  out.set_artifact_id(m.artifact_id);
  out.set_schema_version(m.schema_version);
  out.set_min_reader_version(m.min_reader_version);
  out.set_bucket(m.bucket);
  out.set_stream_created(m.stream_created);
  for (const auto& s : m.scope) out.add_scope(s);
  out.set_has_scope(m.has_scope);
  out.set_cursor(m.cursor);
  out.set_cursor_time_unix_ns(m.cursor_time_ns);
  out.set_marker_ttl_ns(m.marker_ttl_ns);
  out.set_eviction_observed(m.eviction_observed);
  if (m.eviction_observed) out.set_eviction_cause(m.eviction_cause);
  out.set_fold_digest(m.fold_digest);
  out.set_attests(m.attests);
  out.set_created_unix_ms(m.created_unix_ms);
  out.set_exporter_id(m.exporter_id);
  out.set_entry_count(m.entry_count);
  for (const auto& c : m.chunks) {
    auto* r = out.add_chunks();
    r->set_name(c.name);
    r->set_entry_count(c.entry_count);
    r->set_first_key(c.first_key);
    r->set_last_key(c.last_key);
    r->set_raw_size(c.raw_size);
    r->set_compressed_size(c.compressed_size);
    r->set_sha256(c.sha256);
  }
  return out;
}

}  // namespace kvfold::artifact
