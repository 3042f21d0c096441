// The RocksDB fold on a chosen rocksdb::Env: the seam under the store that
// the simulations use to fail, cut and power-cut its file writes (an
// in-memory file system). OpenRocksFold is this with the default Env.

#ifndef KVFOLD_STORE_ROCKS_FOLD_ENV_H_
#define KVFOLD_STORE_ROCKS_FOLD_ENV_H_

#include <cstdint>
#include <memory>
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

// The bytes a RocksDB fold holds for its open table files outside the
// block cache (filters and indexes kept in memory); 0 for another fold.
uint64_t TableReaderBytes(Fold& fold);

}  // namespace kvfold::store

#endif  // KVFOLD_STORE_ROCKS_FOLD_ENV_H_
