// An artifact location in memory, for the simulations: thousands of
// schedules export and restore without touching the disk. The pointer
// follows the product's rule (core::CheckPointerAdvance).

#ifndef KVFOLD_TESTS_SIM_MEMORY_TRANSPORT_H_
#define KVFOLD_TESTS_SIM_MEMORY_TRANSPORT_H_

#include <map>
#include <optional>
#include <string>

#include "kvfold/transport.h"

namespace kvfold::sim {

class MemoryTransport final : public Transport {
 public:
  const std::string& location() const override { return location_; }
  Status Put(const std::string& name, std::string_view bytes) override;
  StatusOr<std::string> Get(const std::string& name, uint64_t max_bytes) override;
  Status Remove(const std::string& name) override;
  StatusOr<std::vector<std::string>> List() override;
  StatusOr<std::optional<ArtifactPointer>> ReadPointer() override;
  Status AdvancePointer(const ArtifactPointer& next) override;

 private:
  std::string location_ = "mem:sim";
  std::map<std::string, std::string> objects_;
  std::optional<ArtifactPointer> pointer_;
};

}  // namespace kvfold::sim

#endif  // KVFOLD_TESTS_SIM_MEMORY_TRANSPORT_H_
