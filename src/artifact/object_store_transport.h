// A NATS Object Store bucket as an artifact transport, implemented over
// JetStream (nats.c 3.4.1 has no object-store API) in the layout of ADR-20,
// so the official NATS clients and tools can list and read what kvfold
// writes: stream OBJ_<bucket>; an object's data in messages of at most
// 128 KiB on $O.<bucket>.C.<nuid>; its meta JSON (name, bucket, nuid, size,
// chunks, digest "SHA-256=<base64url>", mtime, options) on
// $O.<bucket>.M.<base64url(name), padded> with Nats-Rollup: sub. The
// latest pointer is the object "LATEST", whose meta is replaced by
// compare-and-swap (Nats-Expected-Last-Subject-Sequence).

#ifndef KVFOLD_ARTIFACT_OBJECT_STORE_TRANSPORT_H_
#define KVFOLD_ARTIFACT_OBJECT_STORE_TRANSPORT_H_

#include <functional>
#include <memory>
#include <string>

#include "kvfold/connection.h"
#include "kvfold/transport.h"

namespace kvfold::artifact {

// Faults the transport injects into its own traffic, for tests.
struct ObjectStoreFaults {
  // Called after each publish JetStream stored; returning true reports it
  // as a timeout, as when the ack is lost after the write landed.
  // Default: none.
  std::function<bool(const std::string& subject)> lose_ack;
};

// NotFound when the stream is missing and `create_if_missing` is false.
StatusOr<std::unique_ptr<Transport>> OpenObjectStoreTransport(const ConnectOptions& connect,
                                                              const std::string& bucket,
                                                              bool create_if_missing,
                                                              ObjectStoreFaults faults = {});

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_OBJECT_STORE_TRANSPORT_H_
