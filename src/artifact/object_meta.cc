#include "artifact/object_meta.h"

#include <algorithm>

#include "core/json_fields.h"
#include "core/mutation.h"

namespace kvfold::artifact {

StatusOr<ObjectMeta> ParseObjectMeta(std::string_view data, const std::string& what) {
  ObjectMeta m;
  m.raw = nlohmann::json::parse(data, nullptr, false);
  if (m.raw.is_discarded() || !core::ReadJsonField(m.raw, "nuid", &m.nuid, true) ||
      !core::ReadJsonField(m.raw, "size", &m.size) ||
      !core::ReadJsonField(m.raw, "chunks", &m.chunks) ||
      !core::ReadJsonField(m.raw, "digest", &m.digest) ||
      !core::ReadJsonField(m.raw, "deleted", &m.deleted)) {
    return Status::Corruption(what +
                              " has unreadable meta (not a JSON object, or a missing or "
                              "wrong-typed nuid, size, chunks, digest or deleted)");
  }
  if (!IsNuid(m.nuid) && !KVFOLD_MUTANT("object-meta-any-nuid")) {
    std::string shown = nlohmann::json(m.nuid.substr(0, 64))
                            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (m.nuid.size() > 64) shown += "...";
    return Status::Corruption(
        what + " has meta whose nuid " + shown +
        " is not a NATS nuid (22 letters and digits): its chunk subject could name other "
        "objects' chunks (a '.', '*' or '>' in it), so it is not read, replaced or purged; "
        "remove the object's meta record by hand or publish a correct one");
  }
  return m;
}

bool IsNuid(std::string_view nuid) {
  return nuid.size() == kNuidLength && std::all_of(nuid.begin(), nuid.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
         });
}

}  // namespace kvfold::artifact
