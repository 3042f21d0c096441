// The latest pointer as stored: a small JSON object
//   {"artifact":"<id>","cursor":N,"bucket":"…","stream_created":"…"}

#ifndef KVFOLD_ARTIFACT_POINTER_CODEC_H_
#define KVFOLD_ARTIFACT_POINTER_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "kvfold/transport.h"

namespace kvfold::artifact {

inline constexpr const char* kPointerName = "LATEST";
// The largest pointer object a reader takes: its JSON holds an object name
// (<= 255 bytes), a cursor, a bucket name and a timestamp, well under 1 KiB.
inline constexpr uint64_t kMaxPointerBytes = uint64_t{64} << 10;

std::string EncodePointer(const ArtifactPointer& p);
StatusOr<ArtifactPointer> DecodePointer(std::string_view bytes, const std::string& where);

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_POINTER_CODEC_H_
