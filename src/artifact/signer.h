// SHA-256 and Ed25519 over OpenSSL.

#ifndef KVFOLD_ARTIFACT_SIGNER_H_
#define KVFOLD_ARTIFACT_SIGNER_H_

#include <memory>
#include <string>
#include <string_view>

#include "kvfold/status.h"

namespace kvfold::artifact {

std::string Sha256(std::string_view data);  // 32 raw bytes
std::string HexEncode(std::string_view bytes);

// An Ed25519 private key loaded from a PEM file.
class SigningKey {
 public:
  static StatusOr<std::unique_ptr<SigningKey>> Load(const std::string& pem_file);
  ~SigningKey();
  SigningKey(const SigningKey&) = delete;
  SigningKey& operator=(const SigningKey&) = delete;

  StatusOr<std::string> Sign(std::string_view message) const;    // 64 bytes
  const std::string& public_key() const { return public_key_; }  // 32 bytes

 private:
  SigningKey() = default;
  void* pkey_ = nullptr;  // EVP_PKEY*
  std::string public_key_;
};

// The raw 32-byte Ed25519 public key in a PEM public (or private) key file.
StatusOr<std::string> LoadPublicKey(const std::string& pem_file);

bool VerifyEd25519(std::string_view public_key, std::string_view message,
                   std::string_view signature);

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_SIGNER_H_
