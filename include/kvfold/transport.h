// Where artifacts are published: a directory, a NATS Object Store bucket or
// an S3 bucket (AWS S3, or any server of its protocol: MinIO, Ceph, R2).
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

  // Not stored with the pointer, and not compared: what lets a new pointer
  // replace one beyond the stream's head. An exporter that read the latest
  // pointer `artifact_id`, then the stream's last sequence
  // `stream_last_seq`, and found the pointer's cursor beyond it (the stream
  // was restored from a backup: same identity, shorter history) sets it.
  // See artifacts/FORMAT.md, "Latest pointer".
  struct BeyondHead {
    std::string artifact_id;
    uint64_t stream_last_seq = 0;
  };
  std::optional<BeyondHead> replaces = std::nullopt;
  // Not stored either: the id of a latest pointer this exporter read and
  // found to name no valid artifact (no manifest, a damaged one, one that
  // disagrees with the pointer, or one not signed by a key this exporter
  // trusts). A pointer is a hint anyone who can write the location can
  // forge; such a one is replaced whatever its cursor, and only that very
  // pointer. See artifacts/FORMAT.md, "Latest pointer".
  std::optional<std::string> replaces_invalid = std::nullopt;

  // The stored fields only.
  friend bool operator==(const ArtifactPointer& a, const ArtifactPointer& b) {
    return a.artifact_id == b.artifact_id && a.cursor == b.cursor && a.bucket == b.bucket &&
           a.stream_created == b.stream_created;
  }
};

class Transport {
 public:
  Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;
  virtual ~Transport() = default;

  // "dir:<path>", "obj:<bucket>" or "s3://<bucket>/<prefix>", for messages.
  virtual const std::string& location() const = 0;

  // Stores `bytes` under `name` durably; readers see all of it or nothing.
  // REQUIRES: ValidateObjectName(name).ok()
  virtual Status Put(const std::string& name, std::string_view bytes) = 0;
  // The object's bytes. NotFound when there is no such object. Corruption,
  // without reading it, when it is larger than `max_bytes` (judged by its
  // stored size before the read, and again while reading where the size is
  // not known first), so what a writer to the location stores never costs
  // a reader more than `max_bytes` of memory; likewise for an object that
  // is not one kvfold could have stored (a directory location: a symbolic
  // link, a FIFO, a device).
  virtual StatusOr<std::string> Get(const std::string& name, uint64_t max_bytes) = 0;
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

// How "s3://<bucket>/<prefix>" is reached. Empty fields take the standard
// AWS settings from the environment, as the AWS CLI does.
struct S3Options {
  // The server's base URL ("http://127.0.0.1:9000"). Default:
  // AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else AWS S3 of the region.
  std::string endpoint;
  // Default: AWS_REGION, else AWS_DEFAULT_REGION, else the profile's region
  // in the config file (AWS_CONFIG_FILE, ~/.aws/config), else us-east-1.
  std::string region;
  // Credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
  // AWS_SESSION_TOKEN, else this profile (default: AWS_PROFILE, else
  // "default") of the credentials file (AWS_SHARED_CREDENTIALS_FILE,
  // ~/.aws/credentials).
  std::string profile;
  enum class Addressing {
    kAuto,           // virtual-hosted on AWS, path-style on another endpoint
    kPath,           // <endpoint>/<bucket>/<key>
    kVirtualHosted,  // <bucket>.<endpoint host>/<key>
  };
  Addressing addressing = Addressing::kAuto;
  // Objects larger than this are uploaded in parts of this size (multipart
  // upload). S3 takes parts of 5 MiB and more. Default: 8 MiB.
  size_t part_size = size_t{8} << 20;
  // Attempts per request when the server answers 5xx or throttles (429,
  // 503 SlowDown) or the connection fails; waits 100 ms, doubling to 2 s.
  // Default: 5.
  int max_attempts = 5;
  // The latest pointer moves forward by conditional writes (If-Match,
  // If-None-Match), which an exporter checks the server keeps when it
  // opens the location: a server that ignores them (s3rver) or refuses
  // them (501) is refused, since two exporters could then move the pointer
  // back. True accepts such a server and writes the pointer plainly: only
  // do it where the export lease alone serializes exporters (every export
  // is `mirror --export-every`; no one-off `kvfold export` beside it).
  // Default: false.
  bool allow_unconditional_pointer = false;
};

// "path", "virtual" or "auto"; InvalidArgument otherwise.
StatusOr<S3Options::Addressing> ParseS3Addressing(std::string_view name);

struct TransportOptions {
  // Create the directory, the object store bucket (stream OBJ_<bucket>) or
  // the S3 bucket when missing. Exporters set it; a reader of a missing
  // location gets NotFound and nothing is created (a typo never leaves a
  // stream or a bucket behind).
  bool create_if_missing = false;
  S3Options s3;  // for s3:// locations
};

// OK for "dir:<path>", "obj:<bucket>" and "s3://<bucket>[/<prefix>]" (an S3
// bucket name; a prefix of object-name segments), InvalidArgument naming
// what is wrong for any other form.
Status ValidateLocation(std::string_view location);

// Opens "dir:<path>", "obj:<bucket>" (on the server `connect` names) or
// "s3://<bucket>[/<prefix>]" (as `options.s3` says). InvalidArgument for any
// other form.
StatusOr<std::unique_ptr<Transport>> OpenTransport(const std::string& location,
                                                   const ConnectOptions& connect,
                                                   const TransportOptions& options = {});

}  // namespace kvfold

#endif  // KVFOLD_TRANSPORT_H_
