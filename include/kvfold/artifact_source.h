// Where a restore finds artifacts: an ArtifactSource, over a Transport
// already open or over a location opened when a restore first needs it.

#ifndef KVFOLD_ARTIFACT_SOURCE_H_
#define KVFOLD_ARTIFACT_SOURCE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "kvfold/artifact.h"
#include "kvfold/connection.h"
#include "kvfold/status.h"
#include "kvfold/transport.h"

namespace kvfold {

// Where Restore finds artifacts. The product's implementation reads a
// Transport (NewArtifactSource); tests may use the same over a directory.
// Used by one thread at a time.
class ArtifactSource {
 public:
  ArtifactSource() = default;
  ArtifactSource(const ArtifactSource&) = delete;
  ArtifactSource& operator=(const ArtifactSource&) = delete;
  virtual ~ArtifactSource() = default;

  // The transport's location, for messages.
  virtual const std::string& location() const = 0;

  // The manifest the latest pointer names, its frame and signature checked.
  // NotFound when nothing has been published yet.
  virtual StatusOr<ArtifactManifest> Newest() = 0;

  // Reads chunk `index` of `manifest` with every check the format allows
  // (size, SHA-256, order after *previous_key, scope, revisions) and only
  // then calls fn for each entry, in key order; advances *previous_key.
  // `expires_ns` is the entry's deadline, 0 for none (Entry::expires_ns).
  virtual Status ReadChunk(
      const ArtifactManifest& manifest, size_t index, std::string* previous_key,
      const std::function<Status(std::string_view key, uint64_t revision, std::string_view value,
                                 int64_t expires_ns)>& fn) = 0;
};

// An ArtifactSource over `from` (not owned; must outlive the result),
// checking signatures as `verify` says.
std::unique_ptr<ArtifactSource> NewArtifactSource(Transport& from, VerifyOptions verify = {});

// An ArtifactSource over `location` (dir:, obj: or s3://), opened
// when Newest is first called, and again after an open that failed: a
// location the first exporter has not created yet is "no artifact yet",
// which a restore waits out, not a reason to refuse to start. The
// location's syntax is checked here: InvalidArgument when it is none of
// them. `transport` says how (S3 settings); create_if_missing is ignored.
StatusOr<std::unique_ptr<ArtifactSource>> OpenArtifactSourceWhenNeeded(
    std::string location, ConnectOptions connect, VerifyOptions verify = {},
    TransportOptions transport = {});

}  // namespace kvfold

#endif  // KVFOLD_ARTIFACT_SOURCE_H_
