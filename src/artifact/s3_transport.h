// An S3 bucket (and prefix) as an artifact transport: "s3://bucket/prefix".
//
// Objects are S3 objects under the prefix. A PUT is atomic (a reader sees
// the old object, the new one or none) and declares the payload's SHA-256,
// which S3 checks; an object over the part size goes up as a multipart
// upload, aborted when a part fails. The pointer LATEST moves only forward:
// read with its ETag, checked by core::CheckPointerAdvance, and written
// with If-Match on that ETag (If-None-Match: * when there is none), so a
// racing exporter's write fails with 412 and is read again. An exporter
// (create_if_missing) checks at open that the server keeps the condition
// (a second If-None-Match: * write of a probe object must fail with 412);
// a server that ignores it (s3rver) or answers 501 is refused unless
// S3Options::allow_unconditional_pointer, which writes the pointer plainly
// and leaves the export lease to serialize writers.

#ifndef KVFOLD_ARTIFACT_S3_TRANSPORT_H_
#define KVFOLD_ARTIFACT_S3_TRANSPORT_H_

#include <memory>
#include <string>

#include "kvfold/transport.h"

namespace kvfold::artifact {

// NotFound when the bucket is missing and `create_if_missing` is false.
StatusOr<std::unique_ptr<Transport>> OpenS3Transport(const std::string& location,
                                                     const S3Options& options,
                                                     bool create_if_missing);

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_S3_TRANSPORT_H_
