#include "artifact/fold_digest.h"

#include <openssl/evp.h>

#include "artifact/signer.h"
#include "core/mutation.h"

namespace kvfold::artifact {

struct FoldDigest::State {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~State() { EVP_MD_CTX_free(ctx); }
};

FoldDigest::FoldDigest() : state_(std::make_unique<State>()) {
  EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr);
}

FoldDigest::~FoldDigest() = default;

void FoldDigest::Add(std::string_view key, uint64_t revision) {
  // Each pair as: key length (4 bytes), key, revision (8 bytes), all
  // big-endian; the lengths keep ("ab", 1) apart from ("a", ...).
  const auto n = static_cast<uint32_t>(key.size());
  for (int shift = 24; shift >= 0; shift -= 8) pending_.push_back(static_cast<char>(n >> shift));
  pending_.append(key);
  for (int shift = 56; shift >= 0; shift -= 8) {
    pending_.push_back(static_cast<char>(revision >> shift));
  }
  if (pending_.size() >= (size_t{64} << 10)) Drain();
  ++pairs_;
}

void FoldDigest::Drain() const {
  EVP_DigestUpdate(state_->ctx, pending_.data(), pending_.size());
  pending_.clear();
}

std::string FoldDigest::Value() const {
  Drain();
  EVP_MD_CTX* copy = EVP_MD_CTX_new();
  EVP_MD_CTX_copy_ex(copy, state_->ctx);
  std::string out(32, '\0');
  unsigned int len = 0;
  EVP_DigestFinal_ex(copy, reinterpret_cast<unsigned char*>(out.data()), &len);
  EVP_MD_CTX_free(copy);
  return out;
}

StatusOr<std::string> DigestOfFold(Fold& fold, const std::vector<std::string>& prefixes,
                                   uint64_t max_revision,
                                   const std::function<bool(std::string_view key)>& skip) {
  FoldDigest digest;
  for (const auto& prefix : prefixes) {
    KVFOLD_RETURN_IF_ERROR(
        fold.Scan(prefix, /*include_tombstones=*/false, [&](std::string_view key, const Entry& e) {
          if (e.revision >= 1 && e.revision <= max_revision && !(skip && skip(key))) {
            digest.Add(key, e.revision);
          }
          return true;
        }));
  }
  return digest.Value();
}

Status CheckFoldDigest(std::string_view recorded, std::string_view computed,
                       const std::string& what) {
  if (recorded.empty() || recorded == computed || KVFOLD_MUTANT("fold-digest-ignored")) {
    return Status::OK();
  }
  return Status::Corruption(what + " digests to " + HexEncode(computed) +
                            ", but the manifest records fold digest " + HexEncode(recorded));
}

}  // namespace kvfold::artifact
