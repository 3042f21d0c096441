#include "live/nats_jwt.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <ctime>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace kvfold::live {
namespace {

// nkeys' prefix bytes (the first base32 letter: O, A, U; S for a seed).
unsigned char Prefix(NKey::Kind kind) {
  switch (kind) {
    case NKey::Kind::kOperator:
      return 14 << 3;
    case NKey::Kind::kAccount:
      return 0;
    case NKey::Kind::kUser:
      return 20 << 3;
  }
  return 0;
}
constexpr unsigned char kSeedPrefix = 18 << 3;

// CRC-16/XMODEM, as nkeys appends it (little-endian).
uint16_t Crc16(const std::vector<unsigned char>& data) {
  uint16_t crc = 0;
  for (unsigned char b : data) {
    crc ^= static_cast<uint16_t>(b) << 8;
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

// Packs `data` `bits` at a time (5: base32, 6: base64) into `alphabet`,
// without padding, as nkeys and JWTs want.
std::string EncodeBits(std::string_view data, int bits, const char* alphabet) {
  std::string out;
  uint32_t buffer = 0;
  int held = 0;
  const uint32_t mask = (1u << bits) - 1;
  for (unsigned char b : data) {
    buffer = (buffer << 8) | b;
    held += 8;
    while (held >= bits) {
      out += alphabet[(buffer >> (held - bits)) & mask];
      held -= bits;
    }
  }
  if (held > 0) out += alphabet[(buffer << (bits - held)) & mask];
  return out;
}

std::string Base32(const std::vector<unsigned char>& data) {
  return EncodeBits(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()), 5,
                    "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
}

std::string Encode(std::vector<unsigned char> raw) {
  const uint16_t crc = Crc16(raw);
  raw.push_back(static_cast<unsigned char>(crc & 0xff));
  raw.push_back(static_cast<unsigned char>(crc >> 8));
  return Base32(raw);
}

std::string Base64Url(const std::string& data) {
  return EncodeBits(data, 6, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");
}

// A JSON string literal for text we made (names, keys: no escaping needed).
std::string Quote(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

NKey::NKey(Kind kind) : kind_(kind) {
  if (RAND_bytes(seed_, sizeof seed_) != 1) throw std::runtime_error("RAND_bytes failed");
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed_, sizeof seed_);
  size_t len = sizeof public_;
  if (key == nullptr || EVP_PKEY_get_raw_public_key(key, public_, &len) != 1) {
    throw std::runtime_error("cannot make an Ed25519 key");
  }
  EVP_PKEY_free(key);
}

std::string NKey::PublicKey() const {
  std::vector<unsigned char> raw{Prefix(kind_)};
  raw.insert(raw.end(), public_, public_ + sizeof public_);
  return Encode(raw);
}

std::string NKey::Seed() const {
  const unsigned char p = Prefix(kind_);
  std::vector<unsigned char> raw{static_cast<unsigned char>(kSeedPrefix | (p >> 5)),
                                 static_cast<unsigned char>((p & 31) << 3)};
  raw.insert(raw.end(), seed_, seed_ + sizeof seed_);
  return Encode(raw);
}

std::string NKey::Sign(const std::string& data) const {
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed_, sizeof seed_);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned char sig[64];
  size_t len = sizeof sig;
  const bool ok =
      key != nullptr && ctx != nullptr &&
      EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key) == 1 &&
      EVP_DigestSign(ctx, sig, &len, reinterpret_cast<const unsigned char*>(data.data()),
                     data.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  if (!ok) throw std::runtime_error("Ed25519 signing failed");
  return std::string(reinterpret_cast<const char*>(sig), len);
}

std::string IssueJwt(const NKey& issuer, const std::string& subject, const std::string& name,
                     const std::string& nats_claim) {
  const std::string header = R"({"typ":"JWT","alg":"ed25519-nkey"})";
  static int serial = 0;
  const std::string claims =
      "{" + std::string("\"jti\":") + Quote(name + std::to_string(++serial)) +
      ",\"iat\":" + std::to_string(std::time(nullptr)) + ",\"iss\":" + Quote(issuer.PublicKey()) +
      ",\"name\":" + Quote(name) + ",\"sub\":" + Quote(subject) + ",\"nats\":" + nats_claim + "}";
  const std::string signing_input = Base64Url(header) + "." + Base64Url(claims);
  return signing_input + "." + Base64Url(issuer.Sign(signing_input));
}

OperatorSetup MakeOperatorSetup() {
  const NKey op(NKey::Kind::kOperator);
  const NKey account(NKey::Kind::kAccount);
  const NKey user(NKey::Kind::kUser);
  // JetStream needs a system account in operator mode.
  const NKey system(NKey::Kind::kAccount);
  const std::string system_jwt =
      IssueJwt(op, system.PublicKey(), "SYS", R"({"type":"account","version":2})");
  const std::string op_jwt =
      IssueJwt(op, op.PublicKey(), "kvfold-test-operator", R"({"type":"operator","version":2})");
  const std::string account_jwt =
      IssueJwt(op, account.PublicKey(), "kvfold-test-account",
               R"({"limits":{"subs":-1,"data":-1,"payload":-1,"imports":-1,"exports":-1,)"
               R"("wildcards":true,"conn":-1,"leaf":-1,"mem_storage":-1,"disk_storage":-1,)"
               R"("streams":-1,"consumer":-1},"type":"account","version":2})");
  const std::string user_jwt =
      IssueJwt(account, user.PublicKey(), "kvfold-test-user",
               R"({"pub":{},"sub":{},"subs":-1,"data":-1,"payload":-1,"type":"user","version":2})");
  OperatorSetup s;
  s.server_config = "operator: " + op_jwt + "\nsystem_account: " + system.PublicKey() +
                    "\nresolver: MEMORY\nresolver_preload: {\n  " + account.PublicKey() + ": " +
                    account_jwt + "\n  " + system.PublicKey() + ": " + system_jwt + "\n}\n";
  s.user_creds = "-----BEGIN NATS USER JWT-----\n" + user_jwt +
                 "\n------END NATS USER JWT------\n\n"
                 "************************* IMPORTANT *************************\n"
                 "NKEY Seed printed below can be used to sign and prove identity.\n\n"
                 "-----BEGIN USER NKEY SEED-----\n" +
                 user.Seed() + "\n------END USER NKEY SEED------\n";
  return s;
}

}  // namespace kvfold::live
