// Just enough of NATS decentralized auth for a test: Ed25519 nkeys and the
// operator, account and user JWTs a server in operator mode checks, and
// the .creds file a client signs in with. Made with OpenSSL; test data only.

#ifndef KVFOLD_TESTS_LIVE_NATS_JWT_H_
#define KVFOLD_TESTS_LIVE_NATS_JWT_H_

#include <string>

namespace kvfold::live {

class NKey {
 public:
  enum class Kind { kOperator, kAccount, kUser };
  explicit NKey(Kind kind);  // a fresh random key pair

  std::string PublicKey() const;  // "O...", "A..." or "U..."
  std::string Seed() const;       // "SO...", "SA..." or "SU..."
  // An Ed25519 signature of `data`, raw bytes.
  std::string Sign(const std::string& data) const;

 private:
  Kind kind_;
  unsigned char seed_[32];
  unsigned char public_[32];
};

// A signed JWT with `nats` (the claim's JSON object text) for `subject`,
// issued by `issuer`.
std::string IssueJwt(const NKey& issuer, const std::string& subject_public_key,
                     const std::string& name, const std::string& nats_claim);

// Server configuration for operator mode with one account (JetStream
// enabled, no limits), and the creds file text of one user of it.
struct OperatorSetup {
  std::string server_config;
  std::string user_creds;
};
OperatorSetup MakeOperatorSetup();

}  // namespace kvfold::live

#endif  // KVFOLD_TESTS_LIVE_NATS_JWT_H_
