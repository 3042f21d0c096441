#include "artifact/pointer_codec.h"

#include <nlohmann/json.hpp>

#include "core/json_fields.h"
#include "kvfold/transport.h"

namespace kvfold {
namespace artifact {

std::string EncodePointer(const ArtifactPointer& p) {
  nlohmann::json j = {{"artifact", p.artifact_id},
                      {"cursor", p.cursor},
                      {"bucket", p.bucket},
                      {"stream_created", p.stream_created}};
  return j.dump();
}

StatusOr<ArtifactPointer> DecodePointer(std::string_view bytes, const std::string& where) {
  const auto j = nlohmann::json::parse(bytes, nullptr, false);
  ArtifactPointer p;
  if (j.is_discarded() || !core::ReadJsonField(j, "artifact", &p.artifact_id, true) ||
      !core::ReadJsonField(j, "cursor", &p.cursor, true) ||
      !core::ReadJsonField(j, "bucket", &p.bucket) ||
      !core::ReadJsonField(j, "stream_created", &p.stream_created)) {
    return Status::Corruption("the latest pointer at " + where +
                              " is not a valid pointer object (missing or wrong-typed field)");
  }
  KVFOLD_RETURN_IF_ERROR(
      ValidateObjectName(p.artifact_id).WithContext("latest pointer at " + where));
  return p;
}

}  // namespace artifact
}  // namespace kvfold
