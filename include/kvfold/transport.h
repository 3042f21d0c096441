// Where artifacts are published: a directory or a NATS Object Store bucket.
//
// A transport stores named objects (an artifact is a manifest object plus
// chunk objects under "<artifact-id>/") and one *latest pointer* that names
// the newest artifact. The pointer only moves forward: to a higher cursor
// of the same bucket and stream identity, by compare-and-swap, so a slower
// exporter can never move it backward.
//
// Thread safety: a Transport is used by one thread at a time; several
// transports (in several processes) may share one location.

#ifndef KVFOLD_TRANSPORT_H_
#define KVFOLD_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvfold/connection.h"
#include "kvfold/status.h"

namespace kvfold {

struct ArtifactPointer {
  std::string artifact_id;
  uint64_t cursor = 0;
  std::string bucket;
  std::string stream_created;

  friend bool operator==(const ArtifactPointer&, const ArtifactPointer&) = default;
};

class Transport {
 public:
  Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;
  virtual ~Transport() = default;

  // "dir:<path>" or "obj:<bucket>", for messages.
  virtual const std::string& location() const = 0;

  // Stores `bytes` under `name` durably; readers see all of it or nothing.
  // REQUIRES: ValidateObjectName(name).ok()
  virtual Status Put(const std::string& name, std::string_view bytes) = 0;
  // NotFound when there is no such object.
  virtual StatusOr<std::string> Get(const std::string& name) = 0;
  virtual Status Remove(const std::string& name) = 0;
  // Every object name (the pointer excluded), sorted.
  virtual StatusOr<std::vector<std::string>> List() = 0;

  // The latest pointer, or nullopt when nothing was published yet.
  virtual StatusOr<std::optional<ArtifactPointer>> ReadPointer() = 0;
  // Moves the pointer to `next` if that is forward of the current one.
  // Otherwise the pointer is unchanged and the result names both:
  // AlreadyExists when it is at the same or a higher cursor,
  // FailedPrecondition when it is of another bucket or stream.
  virtual Status AdvancePointer(const ArtifactPointer& next) = 0;
};

// Object names: segments of [A-Za-z0-9._-] joined by '/', no empty, "." or
// ".." segment, at most 255 bytes. Anything else (a path traversal, an
// absolute path) is InvalidArgument.
Status ValidateObjectName(std::string_view name);

struct TransportOptions {
  // Create the directory or the object store bucket (stream OBJ_<bucket>)
  // when missing. Exporters set it; a reader of a missing location gets
  // NotFound and nothing is created (a typo never leaves a stream behind).
  bool create_if_missing = false;
};

// OK for "dir:<path>" and "obj:<bucket>", InvalidArgument for any other form.
Status ValidateLocation(std::string_view location);

// Opens "dir:<path>" or "obj:<bucket>" (on the server `connect` names).
// InvalidArgument for any other form.
StatusOr<std::unique_ptr<Transport>> OpenTransport(const std::string& location,
                                                   const ConnectOptions& connect,
                                                   const TransportOptions& options = {});

}  // namespace kvfold

#endif  // KVFOLD_TRANSPORT_H_
