// The manifest object: a checksummed frame around a ManifestEnvelope.
//   "KVFM" | u32 big-endian length L | L bytes envelope | SHA-256 of all before
// See artifacts/FORMAT.md.

#ifndef KVFOLD_ARTIFACT_MANIFEST_CODEC_H_
#define KVFOLD_ARTIFACT_MANIFEST_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "artifact.pb.h"
#include "kvfold/artifact.h"
#include "kvfold/status.h"

namespace kvfold::artifact {

inline constexpr std::string_view kManifestMagic = "KVFM";
// The largest manifest object (frame included) a reader takes and a writer
// writes. Its chunk list dominates: about 110 bytes per chunk plus its
// first and last key, so 16 MiB lists some 80,000 chunks with 50-byte
// keys, a 300 GiB fold at the default 4 MiB chunks (artifacts/FORMAT.md,
// "Limits"). It bounds a reader's memory whatever a writer to the location
// stores, and keeps the frame length an int for the protobuf parser.
inline constexpr uint64_t kMaxManifestBytes = uint64_t{16} << 20;

// Frames `envelope`.
std::string EncodeManifestFrame(const kvfold::wire::ManifestEnvelope& envelope);

// Checks the frame and decodes envelope and manifest. `what` names the
// object in messages. Corruption for any damage; FailedPrecondition for a
// schema this build cannot read.
Status DecodeManifestFrame(std::string_view bytes, const std::string& what,
                           kvfold::wire::ManifestEnvelope* envelope,
                           kvfold::wire::Manifest* manifest);

// Between the protobuf and the public struct.
ArtifactManifest FromProto(const kvfold::wire::Manifest& m,
                           const kvfold::wire::ManifestEnvelope& envelope);
kvfold::wire::Manifest ToProto(const ArtifactManifest& m);

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_MANIFEST_CODEC_H_
