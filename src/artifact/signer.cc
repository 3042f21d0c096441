#include "artifact/signer.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdio>

namespace kvfold::artifact {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

StatusOr<EVP_PKEY*> ReadPem(const std::string& file, bool want_private) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(file.c_str(), "r"));
  if (!f) return Status::InvalidArgument("cannot open key file " + file);
  EVP_PKEY* key = want_private ? PEM_read_PrivateKey(f.get(), nullptr, nullptr, nullptr)
                               : PEM_read_PUBKEY(f.get(), nullptr, nullptr, nullptr);
  if (key == nullptr && !want_private) {
    // Accept a private key file where a public key is asked for.
    std::rewind(f.get());
    key = PEM_read_PrivateKey(f.get(), nullptr, nullptr, nullptr);
  }
  if (key == nullptr) {
    return Status::InvalidArgument("key file " + file + " holds no PEM " +
                                   (want_private ? "private" : "public") + " key");
  }
  if (EVP_PKEY_id(key) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(key);
    return Status::InvalidArgument("key file " + file + " is not an Ed25519 key");
  }
  return key;
}

std::string RawPublic(EVP_PKEY* key) {
  std::string out(32, '\0');
  size_t len = out.size();
  EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(out.data()), &len);
  out.resize(len);
  return out;
}

}  // namespace

std::string Sha256(std::string_view data) {
  std::string out(32, '\0');
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), reinterpret_cast<unsigned char*>(out.data()), &len,
             EVP_sha256(), nullptr);
  return out;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

StatusOr<std::unique_ptr<SigningKey>> SigningKey::Load(const std::string& pem_file) {
  auto key = ReadPem(pem_file, /*want_private=*/true);
  if (!key.ok()) return key.status();
  std::unique_ptr<SigningKey> out(new SigningKey());
  out->pkey_ = *key;
  out->public_key_ = RawPublic(*key);
  return out;
}

SigningKey::~SigningKey() { EVP_PKEY_free(static_cast<EVP_PKEY*>(pkey_)); }

StatusOr<std::string> SigningKey::Sign(std::string_view message) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::string sig(64, '\0');
  size_t len = sig.size();
  const bool ok =
      EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, static_cast<EVP_PKEY*>(pkey_)) == 1 &&
      EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) return Status::Internal("Ed25519 signing failed");
  sig.resize(len);
  return sig;
}

StatusOr<std::string> LoadPublicKey(const std::string& pem_file) {
  auto key = ReadPem(pem_file, /*want_private=*/false);
  if (!key.ok()) return key.status();
  std::string raw = RawPublic(*key);
  EVP_PKEY_free(*key);
  return raw;
}

bool VerifyEd25519(std::string_view public_key, std::string_view message,
                   std::string_view signature) {
  if (public_key.size() != 32 || signature.size() != 64) return false;
  EVP_PKEY* key = EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(public_key.data()), 32);
  if (key == nullptr) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok =
      EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, key) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                       message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return ok;
}

}  // namespace kvfold::artifact
