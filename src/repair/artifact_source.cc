// ArtifactSource over a Transport: the newest artifact by the latest
// pointer; and one that opens its location when first needed.

#include "kvfold/artifact_source.h"

#include "artifact/artifact_reader.h"

namespace kvfold {
namespace {

class TransportArtifactSource final : public ArtifactSource {
 public:
  TransportArtifactSource(Transport& from, VerifyOptions verify)
      : from_(from), verify_(std::move(verify)) {}

  const std::string& location() const override { return from_.location(); }

  StatusOr<ArtifactManifest> Newest() override {
    return artifact::ReadLatestManifest(from_, verify_);
  }

  Status ReadChunk(const ArtifactManifest& manifest, size_t index, std::string* previous_key,
                   const std::function<Status(std::string_view, uint64_t, std::string_view,
                                              int64_t)>& fn) override {
    uint64_t stored = 0;
    return artifact::ReadChunk(from_, manifest, index, previous_key, fn, &stored);
  }

 private:
  Transport& from_;
  VerifyOptions verify_;
};

class LocationArtifactSource final : public ArtifactSource {
 public:
  LocationArtifactSource(std::string location, ConnectOptions connect, VerifyOptions verify,
                         TransportOptions transport)
      : location_(std::move(location)),
        connect_(std::move(connect)),
        verify_(std::move(verify)),
        transport_options_(std::move(transport)) {
    transport_options_.create_if_missing = false;  // a reader never creates
  }

  const std::string& location() const override { return location_; }

  StatusOr<ArtifactManifest> Newest() override {
    if (!inner_) {
      auto t = OpenTransport(location_, connect_, transport_options_);
      if (!t.ok()) return t.status();
      transport_ = std::move(t).value();
      inner_ = NewArtifactSource(*transport_, verify_);
    }
    return inner_->Newest();
  }

  Status ReadChunk(const ArtifactManifest& m, size_t index, std::string* previous_key,
                   const std::function<Status(std::string_view, uint64_t, std::string_view,
                                              int64_t)>& fn) override {
    if (!inner_) return Status::FailedPrecondition("no artifact was read from " + location_);
    return inner_->ReadChunk(m, index, previous_key, fn);
  }

 private:
  const std::string location_;
  const ConnectOptions connect_;
  const VerifyOptions verify_;
  TransportOptions transport_options_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<ArtifactSource> inner_;  // over transport_
};

}  // namespace

std::unique_ptr<ArtifactSource> NewArtifactSource(Transport& from, VerifyOptions verify) {
  return std::make_unique<TransportArtifactSource>(from, std::move(verify));
}

StatusOr<std::unique_ptr<ArtifactSource>> OpenArtifactSourceWhenNeeded(std::string location,
                                                                       ConnectOptions connect,
                                                                       VerifyOptions verify,
                                                                       TransportOptions transport) {
  KVFOLD_RETURN_IF_ERROR(ValidateLocation(location));
  return std::unique_ptr<ArtifactSource>(std::make_unique<LocationArtifactSource>(
      std::move(location), std::move(connect), std::move(verify), std::move(transport)));
}

}  // namespace kvfold
