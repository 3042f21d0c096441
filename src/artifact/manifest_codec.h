// The manifest object: a checksummed frame around a ManifestEnvelope.
//   "KVFM" | u32 big-endian length L | L bytes envelope | SHA-256 of all before
// See artifacts/FORMAT.md.

#ifndef KVFOLD_ARTIFACT_MANIFEST_CODEC_H_
#define KVFOLD_ARTIFACT_MANIFEST_CODEC_H_

#include <string>
#include <string_view>

#include "artifact.pb.h"
#include "kvfold/artifact.h"
#include "kvfold/status.h"

namespace kvfold::artifact {

inline constexpr std::string_view kManifestMagic = "KVFM";

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
