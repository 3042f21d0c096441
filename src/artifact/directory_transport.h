// A directory as an artifact transport. Objects are files under the root;
// each is written to a temporary name, fsynced, renamed into place and its
// directory fsynced, so a reader or a crash never sees half an object; a
// directory it creates (the root included) is synced into its parent, so a
// power cut never takes away what a Put returned for. The pointer file
// LATEST is swapped under an flock on .lock, only forward.

#ifndef KVFOLD_ARTIFACT_DIRECTORY_TRANSPORT_H_
#define KVFOLD_ARTIFACT_DIRECTORY_TRANSPORT_H_

#include <memory>
#include <string>

#include "kvfold/transport.h"

namespace kvfold::artifact {

class FileOps;

// NotFound when `root` is missing and `create_if_missing` is false.
StatusOr<std::unique_ptr<Transport>> OpenDirectoryTransport(const std::string& root,
                                                            bool create_if_missing);

// The same on the file operations `ops` (tests/sim/power_cut_fs.h);
// OpenDirectoryTransport is this on PosixFileOps().
// REQUIRES: `ops` outlives the transport.
StatusOr<std::unique_ptr<Transport>> OpenDirectoryTransportOn(FileOps* ops, const std::string& root,
                                                              bool create_if_missing);

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_DIRECTORY_TRANSPORT_H_
