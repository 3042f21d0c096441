// The RocksDB fold on a chosen rocksdb::Env: the seam under the store that
// the simulations use to fail, cut and power-cut its file writes (an
// in-memory file system). OpenRocksFold is this with the default Env.

#ifndef KVFOLD_STORE_ROCKS_FOLD_ENV_H_
#define KVFOLD_STORE_ROCKS_FOLD_ENV_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kvfold/fold.h"

namespace rocksdb {
class Env;
}

namespace kvfold::store {

// `env` nullptr: the default Env, with the directory checks of
// OpenRocksFold. Otherwise the Env must outlive the fold; read_only is
// refused (a reader follows a directory on disk).
StatusOr<std::unique_ptr<Fold>> OpenRocksFoldOnEnv(const std::string& path,
                                                   const FoldOptions& options, rocksdb::Env* env);

// One of RocksDB's integer properties of a RocksDB fold (for tests:
// "rocksdb.estimate-table-readers-mem", what it holds for its open tables
// outside the block cache; "rocksdb.block-cache-usage"); nullopt for
// another fold or a property RocksDB does not answer.
std::optional<uint64_t> RocksIntProperty(Fold& fold, const std::string& name);

}  // namespace kvfold::store

#endif  // KVFOLD_STORE_ROCKS_FOLD_ENV_H_
