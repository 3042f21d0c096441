// Ed25519 key pairs for tests, as PEM files.

#ifndef KVFOLD_TESTS_TEST_KEYS_H_
#define KVFOLD_TESTS_TEST_KEYS_H_

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <utility>

namespace kvfold {

// Writes a new key pair to `dir`/`name`.pem (private, mode 0600) and
// `dir`/`name`.pub.pem; returns {private, public}.
inline std::pair<std::string, std::string> MakeKeyPair(const std::string& dir,
                                                       const std::string& name) {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  const std::string priv = dir + "/" + name + ".pem", pub = dir + "/" + name + ".pub.pem";
  FILE* f = std::fopen(priv.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  ::chmod(priv.c_str(), 0600);
  f = std::fopen(pub.c_str(), "w");
  PEM_write_PUBKEY(f, key);
  std::fclose(f);
  EVP_PKEY_free(key);
  return {priv, pub};
}

}  // namespace kvfold

#endif  // KVFOLD_TESTS_TEST_KEYS_H_
