#include "artifact/signer.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "core/mutation.h"

namespace kvfold::artifact {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// A private key others can read lets anyone on the machine sign artifacts
// that every node trusting its public key accepts. Like ssh, refuse it:
// others may have no access at all, and the group only to a key the
// running user does not own (root:kvfold 0640, provisioned by root).
Status CheckPrivateKeyMode(const std::string& file, const struct stat& st) {
  if (KVFOLD_MUTANT("sign-key-any-mode")) return Status::OK();
  const bool others = (st.st_mode & 0007) != 0;
  const bool group = (st.st_mode & 0070) != 0 && st.st_uid == ::geteuid();
  if (!others && !group) return Status::OK();
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return Status::InvalidArgument(
      "signing key file " + file + " can be read by " + (others ? "others" : "its group") +
      " (mode " + mode + "): anyone who reads it can sign artifacts your nodes trust; chmod 600 " +
      file + " (or, owned by root, 640 with a group only the exporter's user is in)");
}

StatusOr<EVP_PKEY*> ReadPem(const std::string& file, bool want_private) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::InvalidArgument("cannot open key file " + file);
  std::unique_ptr<FILE, FileCloser> f(::fdopen(fd, "r"));
  if (!f) {
    ::close(fd);
    return Status::InvalidArgument("cannot open key file " + file);
  }
  if (want_private) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return Status::InvalidArgument("cannot read the status of " + file);
    KVFOLD_RETURN_IF_ERROR(CheckPrivateKeyMode(file, st));
  }
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
