// RocksDB's diagnostic log (the fold's LOG file), written with plain stdio.
// RocksDB's own log writer asserts when it is written to again after a
// failed write, and Debian's librocksdb keeps assertions on: on a full
// disk the process aborted inside a commit, before kvfold could report
// "No space left on device". This writer drops what it cannot write.

#ifndef KVFOLD_STORE_INFO_LOG_H_
#define KVFOLD_STORE_INFO_LOG_H_

#include <memory>
#include <string>

namespace rocksdb {
class Logger;
}

namespace kvfold::store {

// The LOG file in the fold directory `dir` (created when missing), moved
// to LOG.old first when it has grown past 16 MiB. A log that cannot be
// opened drops every line: it is diagnostics, never data.
std::shared_ptr<rocksdb::Logger> NewFoldInfoLog(const std::string& dir);

}  // namespace kvfold::store

#endif  // KVFOLD_STORE_INFO_LOG_H_
