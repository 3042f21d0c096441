#include "kvfold/transport.h"

#include "artifact/directory_transport.h"
#include "artifact/object_store_transport.h"
#include "artifact/s3_config.h"
#include "artifact/s3_transport.h"

namespace kvfold {

Status ValidateObjectName(std::string_view name) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string("object name \"") + std::string(name) + "\" " + why);
  };
  if (name.empty()) return bad("is empty");
  if (name.size() > 255) return bad("is longer than 255 bytes");
  size_t start = 0;
  while (true) {
    const size_t slash = name.find('/', start);
    const std::string_view seg = name.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty()) return bad("has an empty path segment (leading, trailing or double '/')");
    if (seg == "." || seg == "..") return bad("has a '.' or '..' segment (path traversal)");
    for (char c : seg) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
      if (!ok)
        return bad(std::string("has character '") + std::string(1, c) +
                   "'; allowed are [A-Za-z0-9._-] and '/'");
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return Status::OK();
}

StatusOr<S3Options::Addressing> ParseS3Addressing(std::string_view name) {
  if (name == "auto") return S3Options::Addressing::kAuto;
  if (name == "path") return S3Options::Addressing::kPath;
  if (name == "virtual") return S3Options::Addressing::kVirtualHosted;
  return Status::InvalidArgument(std::string("S3 addressing \"") + std::string(name) +
                                 "\" is none of auto, path, virtual");
}

Status ValidateLocation(std::string_view location) {
  if (location.starts_with("s3://")) return artifact::ParseS3Location(location).status();
  if ((location.starts_with("dir:") || location.starts_with("obj:")) && location.size() > 4) {
    return Status::OK();
  }
  return Status::InvalidArgument(std::string("artifact location \"") + std::string(location) +
                                 "\" is none of dir:<path>, obj:<bucket>, s3://<bucket>/<prefix>");
}

StatusOr<std::unique_ptr<Transport>> OpenTransport(const std::string& location,
                                                   const ConnectOptions& connect,
                                                   const TransportOptions& options) {
  KVFOLD_RETURN_IF_ERROR(ValidateLocation(location));
  if (location.starts_with("s3://")) {
    return artifact::OpenS3Transport(location, options.s3, options.create_if_missing);
  }
  if (location.starts_with("dir:")) {
    return artifact::OpenDirectoryTransport(location.substr(4), options.create_if_missing);
  }
  return artifact::OpenObjectStoreTransport(connect, location.substr(4), options.create_if_missing);
}

}  // namespace kvfold
