// The meta record of one object in a NATS Object Store (ADR-20): the JSON
// stored on $O.<bucket>.M.<base64url(name)> that names the object's chunk
// subject (nuid), size, chunk count and digest. Parsed from bytes another
// client may have written, so every fault is a Status, never a throw.

#ifndef KVFOLD_ARTIFACT_OBJECT_META_H_
#define KVFOLD_ARTIFACT_OBJECT_META_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "kvfold/status.h"

namespace kvfold::artifact {

struct ObjectMeta {
  nlohmann::json raw;  // the whole record, kept to rewrite it (Remove)
  std::string nuid;
  uint64_t size = 0;
  uint64_t chunks = 0;
  std::string digest;
  bool deleted = false;
};

// Corruption naming `what` when `data` is not a JSON object with a string
// "nuid" and, where present, a non-negative integer "size" and "chunks", a
// string "digest" and a bool "deleted".
StatusOr<ObjectMeta> ParseObjectMeta(std::string_view data, const std::string& what);

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_OBJECT_META_H_
