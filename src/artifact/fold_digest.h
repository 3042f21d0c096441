// The fold digest: SHA-256 over the (key, revision) pairs an artifact
// holds, in key order. The exporter records it in the manifest; every full
// read of the artifact (verify, seed, restore) recomputes it over the
// records it read, and a seed recomputes it once more over the fold it
// wrote, so a seeded node can prove it holds exactly what the exporter's
// fold held at the cursor. Layout: artifacts/FORMAT.md.

#ifndef KVFOLD_ARTIFACT_FOLD_DIGEST_H_
#define KVFOLD_ARTIFACT_FOLD_DIGEST_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvfold/fold.h"
#include "kvfold/status.h"

namespace kvfold::artifact {

class FoldDigest {
 public:
  FoldDigest();
  ~FoldDigest();
  FoldDigest(const FoldDigest&) = delete;
  FoldDigest& operator=(const FoldDigest&) = delete;

  // Adds one pair; callers add them in ascending key order.
  void Add(std::string_view key, uint64_t revision);
  uint64_t pairs() const { return pairs_; }
  // The 32-byte digest of the pairs added so far (the digest goes on).
  std::string Value() const;

 private:
  struct State;
  // Hashes what `pending_` holds (pairs are small: one digest update per
  // pair would cost more than the hashing).
  void Drain() const;
  std::unique_ptr<State> state_;
  mutable std::string pending_;
  uint64_t pairs_ = 0;
};

// The digest of what `fold` holds live under `prefixes` (disjoint, sorted)
// at revisions 1 through `max_revision`, leaving out the keys `skip` names
// (when set): what a seed or restore wrote, read back.
StatusOr<std::string> DigestOfFold(Fold& fold, const std::vector<std::string>& prefixes,
                                   uint64_t max_revision,
                                   const std::function<bool(std::string_view key)>& skip = {});

// OK when `recorded` is empty (an artifact written before the digest) or
// equals `computed`; otherwise Corruption naming `what` was digested and
// both values.
Status CheckFoldDigest(std::string_view recorded, std::string_view computed,
                       const std::string& what);

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_FOLD_DIGEST_H_
