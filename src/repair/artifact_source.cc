// ArtifactSource over a Transport: the newest artifact by the latest pointer.

#include "artifact/artifact_reader.h"
#include "kvfold/repair.h"

namespace kvfold {
namespace {

class TransportArtifactSource final : public ArtifactSource {
 public:
  TransportArtifactSource(Transport& from, VerifyOptions verify)
      : from_(from), verify_(std::move(verify)) {}

  const std::string& location() const override { return from_.location(); }

  StatusOr<ArtifactManifest> Newest() override {
    auto id = LatestArtifactId(from_);
    if (!id.ok()) return id.status();
    return ReadArtifactManifest(from_, *id, verify_);
  }

  Status ReadChunk(const ArtifactManifest& manifest, size_t index, std::string* previous_key,
                   const std::function<Status(std::string_view, uint64_t, std::string_view)>& fn)
      override {
    uint64_t stored = 0;
    return artifact::ReadChunk(from_, manifest, index, previous_key, fn, &stored);
  }

 private:
  Transport& from_;
  VerifyOptions verify_;
};

}  // namespace

std::unique_ptr<ArtifactSource> NewArtifactSource(Transport& from, VerifyOptions verify) {
  return std::make_unique<TransportArtifactSource>(from, std::move(verify));
}

}  // namespace kvfold
