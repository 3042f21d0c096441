#include "artifact/object_meta.h"

#include "core/json_fields.h"

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
  return m;
}

}  // namespace kvfold::artifact
