#include "sim/memory_transport.h"

#include "core/pointer_rule.h"

namespace kvfold::sim {

Status MemoryTransport::Put(const std::string& name, std::string_view bytes) {
  KVFOLD_RETURN_IF_ERROR(ValidateObjectName(name));
  objects_[name] = std::string(bytes);
  return Status::OK();
}

StatusOr<std::string> MemoryTransport::Get(const std::string& name, uint64_t max_bytes) {
  auto it = objects_.find(name);
  if (it == objects_.end()) return Status::NotFound(location_ + " has no object " + name);
  if (it->second.size() > max_bytes) {
    return Status::Corruption("object " + name + " in " + location_ + " is " +
                              std::to_string(it->second.size()) + " bytes, more than the " +
                              std::to_string(max_bytes) + " expected of it");
  }
  return it->second;
}

Status MemoryTransport::Remove(const std::string& name) {
  objects_.erase(name);
  return Status::OK();
}

StatusOr<std::vector<std::string>> MemoryTransport::List() {
  std::vector<std::string> names;
  for (const auto& kv : objects_) names.push_back(kv.first);
  return names;
}

StatusOr<std::optional<ArtifactPointer>> MemoryTransport::ReadPointer() { return pointer_; }

Status MemoryTransport::AdvancePointer(const ArtifactPointer& next) {
  KVFOLD_RETURN_IF_ERROR(core::CheckPointerAdvance(pointer_, next));
  pointer_ = next;
  return Status::OK();
}

}  // namespace kvfold::sim
