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
// string "digest" and a bool "deleted"; also when the nuid is not one
// (IsNuid): it becomes a subject token ($O.<bucket>.C.<nuid>) that reads
// and purges use, and a '>' there would purge every object's chunks.
StatusOr<ObjectMeta> ParseObjectMeta(std::string_view data, const std::string& what);

// A NATS nuid, as every client writes one: 22 characters of [0-9A-Za-z].
inline constexpr size_t kNuidLength = 22;
bool IsNuid(std::string_view nuid);

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_OBJECT_META_H_
