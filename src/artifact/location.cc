// Object names, the pointer codec, and opening a transport by location.

#include <nlohmann/json.hpp>

#include "artifact/directory_transport.h"
#include "artifact/object_store_transport.h"
#include "artifact/pointer_codec.h"
#include "core/json_fields.h"
#include "kvfold/transport.h"

namespace kvfold {

Status ValidateObjectName(std::string_view name) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("object name \"" + std::string(name) + "\" " + why);
  };
  if (name.empty()) return bad("is empty");
  if (name.size() > 255) return bad("is longer than 255 bytes");
  size_t start = 0;
  while (true) {
    const size_t slash = name.find('/', start);
    const std::string_view seg =
        name.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty()) return bad("has an empty path segment (leading, trailing or double '/')");
    if (seg == "." || seg == "..") return bad("has a '.' or '..' segment (path traversal)");
    for (char c : seg) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
      if (!ok) return bad("has character '" + std::string(1, c) + "'; allowed are [A-Za-z0-9._-] and '/'");
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<Transport>> OpenTransport(const std::string& location,
                                                   const ConnectOptions& connect,
                                                   const TransportOptions& options) {
  if (location.starts_with("dir:") && location.size() > 4) {
    return artifact::OpenDirectoryTransport(location.substr(4), options.create_if_missing);
  }
  if (location.starts_with("obj:") && location.size() > 4) {
    return artifact::OpenObjectStoreTransport(connect, location.substr(4),
                                              options.create_if_missing);
  }
  return Status::InvalidArgument("artifact location \"" + location +
                                 "\" is neither dir:<path> nor obj:<bucket>");
}

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
  KVFOLD_RETURN_IF_ERROR(ValidateObjectName(p.artifact_id).WithContext("latest pointer at " + where));
  return p;
}

}  // namespace artifact
}  // namespace kvfold
