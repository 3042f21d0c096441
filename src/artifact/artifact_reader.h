// Reading an artifact's chunks with every check the format allows; shared
// by verify and seed so both refuse exactly the same inputs.

#ifndef KVFOLD_ARTIFACT_ARTIFACT_READER_H_
#define KVFOLD_ARTIFACT_ARTIFACT_READER_H_

#include <functional>
#include <string>
#include <string_view>

#include "kvfold/artifact.h"

namespace kvfold::artifact {

// `expires_ns`: the entry's deadline, 0 for none (Entry::expires_ns).
using RecordFn = std::function<Status(std::string_view key, uint64_t revision,
                                      std::string_view value, int64_t expires_ns)>;

// Fetches chunk `index` of `manifest` and checks its size, SHA-256, frame,
// record order (strictly after *previous_key, which it then advances), key
// bounds, count, keys (valid, in the manifest's scope) and revisions
// (<= cursor), calling fn for each record only after all checks pass.
// Returns the stored size in *stored_bytes.
Status ReadChunk(Transport& from, const ArtifactManifest& manifest, size_t index,
                 std::string* previous_key, const RecordFn& fn, uint64_t* stored_bytes);

// OK when `manifest` may seed or restore a fold: it records a scope in
// canonical form (what Scope::Make makes of it), a bucket and a stream
// identity. FailedPrecondition without a scope; Corruption otherwise: an
// empty identity would turn off the stream-identity check, and an empty
// bucket would let the fold accept any bucket.
Status CheckRestorable(const ArtifactManifest& manifest);

// The manifest the latest pointer of `from` names, read and verified as
// `options` says, restorable (CheckRestorable, declared above), and
// checked against the pointer (cursor, bucket, stream
// identity): a pointer is a hint anyone who can write the location can
// rewrite. NotFound when nothing was published; Corruption naming both
// when they disagree.
StatusOr<ArtifactManifest> ReadLatestManifest(Transport& from, const VerifyOptions& options);

// Every chunk in order; then checks the total entry count.
Status ReadAllChunks(Transport& from, const ArtifactManifest& manifest, const RecordFn& fn,
                     const ArtifactProgressFn& progress);

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_ARTIFACT_READER_H_
