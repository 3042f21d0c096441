#include "fuzz/fuzz_targets.h"

#include <zstd.h>

#include "artifact/chunk_codec.h"
#include "artifact/manifest_codec.h"
#include "artifact/object_meta.h"
#include "artifact/pointer_codec.h"
#include "core/base64.h"
#include "kvfold/transport.h"
#include "nats/kv_subjects.h"
#include "nats/lease_record.h"
#include "store/record_codec.h"

namespace kvfold::fuzz {

void ManifestFrame(std::string_view bytes) {
  wire::ManifestEnvelope envelope;
  wire::Manifest manifest;
  if (artifact::DecodeManifestFrame(bytes, "fuzz", &envelope, &manifest).ok()) {
    (void)artifact::FromProto(manifest, envelope);
  }
}

void ManifestEnvelope(std::string_view bytes) {
  wire::ManifestEnvelope envelope;
  if (!envelope.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
  ManifestFrame(artifact::EncodeManifestFrame(envelope));
}

void ChunkObject(std::string_view bytes) {
  // Take the size the frame claims, as a manifest might, within reason.
  const unsigned long long claimed = ZSTD_getFrameContentSize(bytes.data(), bytes.size());
  const uint64_t raw_size = claimed <= (1u << 20) ? claimed : 64;
  auto raw = artifact::Decompress(bytes, raw_size, "fuzz");
  if (raw.ok()) ChunkRecords(*raw);
}

void ChunkRecords(std::string_view bytes) {
  (void)artifact::ForEachRecord(
      bytes, "fuzz",
      [](std::string_view, uint64_t, std::string_view, int64_t) { return Status::OK(); });
}

void Pointer(std::string_view bytes) { (void)artifact::DecodePointer(bytes, "fuzz"); }

void ObjectMeta(std::string_view bytes) { (void)artifact::ParseObjectMeta(bytes, "fuzz"); }

void LeaseRecord(std::string_view bytes) { (void)nats::DecodeLeaseRecord(bytes, "fuzz"); }

void FoldRecord(std::string_view bytes) {
  Entry e;
  (void)store::DecodeEntry(bytes, &e);
  uint64_t v;
  (void)store::DecodeU64(bytes, &v);
  std::vector<std::string> list;
  (void)store::DecodeStringList(bytes, &list);
}

void AckReply(std::string_view bytes) { (void)nats::ParseAckReply(bytes); }

void Base64(std::string_view bytes) { (void)core::Base64Decode(bytes); }

void ObjectName(std::string_view bytes) { (void)ValidateObjectName(bytes); }

}  // namespace kvfold::fuzz
