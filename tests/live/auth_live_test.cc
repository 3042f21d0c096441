// The connection flags against a server that demands them: TLS with a
// client certificate, and a user and password (or a token). The mirror
// connects and converges with them, and fails clearly without them.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "live/cli_process.h"
#include "live/kv_client.h"
#include "live/nats_jwt.h"
#include "live/nats_server.h"
#include "test_dir.h"

namespace kvfold::live {
namespace {

// A CA, a server certificate for 127.0.0.1 and a client certificate, made
// with the openssl command (test data only, valid for a day).
struct TestPki {
  explicit TestPki(const std::string& dir) : dir_(dir) {
    std::ofstream(dir + "/server.ext") << "subjectAltName=IP:127.0.0.1\n";
    std::ofstream(dir + "/client.ext") << "extendedKeyUsage=clientAuth\n";
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    Run("openssl req -x509" + key + " -keyout ca.key -out ca.pem -days 1 -subj /CN=kvfold-test-ca");
    for (const std::string who : {"server", "client"}) {
      Run("openssl req" + key + " -keyout " + who + ".key -out " + who + ".csr -subj /CN=" + who);
      Run("openssl x509 -req -in " + who + ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -out " +
          who + ".pem -days 1 -extfile " + who + ".ext");
    }
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  void Run(const std::string& cmd) {
    const std::string full = "cd '" + dir_ + "' && " + cmd + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(full.c_str()), 0) << "failed: " << cmd;
  }
  std::string dir_;
};

// The test servers' TLS handshake timeout, and with it the auth timeout
// (nats-server: the TLS timeout + 1 s when TLS is on; 2 s and 3 s by
// default). A client built with ASan on a loaded 2-core machine can take
// longer than that between the TCP accept and its signed CONNECT; the
// server then closes the connection and the client reports "Authorization
// Violation" (reproduced with a 50 ms auth timeout), the creds test's one
// failure in CI, or an SSL write error, the fixture's. What these tests
// check is the sign-in, not its speed.
constexpr char kTlsTimeout[] = "  timeout: 10\n";

class AuthLiveTest : public ::testing::Test {
 protected:
  AuthLiveTest()
      : pki_(dir_.path()),
        server_(std::string("tls {\n") + kTlsTimeout + "  cert_file: \"" + pki_.Path("server.pem") +
                "\"\n  key_file: \"" + pki_.Path("server.key") + "\"\n  ca_file: \"" +
                pki_.Path("ca.pem") +
                "\"\n  verify: true\n}\n"
                "authorization {\n  users: [ { user: kvuser, password: \"s3cret pass\" } ]\n}\n"),
        kv_(server_.url(), [this](natsOptions* o) {
          natsOptions_SetSecure(o, true);
          natsOptions_LoadCATrustedCertificates(o, pki_.Path("ca.pem").c_str());
          natsOptions_LoadCertificatesChain(o, pki_.Path("client.pem").c_str(),
                                            pki_.Path("client.key").c_str());
          natsOptions_SetUserInfo(o, "kvuser", "s3cret pass");
        }) {}

  std::vector<std::string> Tls() {
    return {"--tls-ca",  pki_.Path("ca.pem"),    "--tls-cert", pki_.Path("client.pem"),
            "--tls-key", pki_.Path("client.key")};
  }
  CliExit Mirror(std::vector<std::string> extra, const std::vector<std::string>& env = {}) {
    std::vector<std::string> args = {
        "mirror", "--server", server_.url(),         "--bucket",
        "secure", "--fold",   dir_.path() + "/fold", "--until-caught-up"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(args, dir_.path(), env);
  }

  TestDir dir_;
  TestPki pki_;
  NatsServer server_;
  KvClient kv_;
};

TEST_F(AuthLiveTest, MirrorOverTlsWithAUserAndPasswordConverges) {
  kv_.CreateBucket("secure");
  for (int i = 0; i < 50; ++i)
    kv_.Put("secure", "k" + std::to_string(i % 20), "v" + std::to_string(i));
  kv_.Delete("secure", "k3");
  std::vector<std::string> args = Tls();
  args.insert(args.end(), {"--user", "kvuser", "--password", "s3cret pass"});
  CliExit ok = Mirror(args);
  ASSERT_EQ(ok.code, 0) << ok.err;
  CliExit dump = RunCli({"dump", "--fold", dir_.path() + "/fold"}, dir_.path());
  EXPECT_EQ(dump.code, 0);
  // 19 live keys, one line each.
  EXPECT_EQ(std::count(dump.out.begin(), dump.out.end(), '\n'), 19) << dump.out;
}

TEST_F(AuthLiveTest, CredentialsFromTheEnvironmentWork) {
  kv_.CreateBucket("secure");
  kv_.Put("secure", "k", "v");
  CliExit ok = Mirror(
      {},
      {"KVFOLD_USER=kvuser", "KVFOLD_PASSWORD=s3cret pass", "KVFOLD_TLS_CA=" + pki_.Path("ca.pem"),
       "KVFOLD_TLS_CERT=" + pki_.Path("client.pem"), "KVFOLD_TLS_KEY=" + pki_.Path("client.key")});
  EXPECT_EQ(ok.code, 0) << ok.err;
  // A flag wins over its variable: a wrong password in the environment.
  std::vector<std::string> flags = Tls();
  flags.insert(flags.end(), {"--user", "kvuser", "--password", "s3cret pass"});
  CliExit flag_wins = Mirror(flags, {"KVFOLD_PASSWORD=wrong"});
  EXPECT_EQ(flag_wins.code, 0) << flag_wins.err;
  // A variable naming a file that is not there is a usage error naming it.
  CliExit missing = Mirror({}, {"KVFOLD_TLS_CA=" + dir_.path() + "/nope.pem"});
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_NE(missing.err.find("KVFOLD_TLS_CA (for --tls-ca)"), std::string::npos) << missing.err;
}

// What is missing or wrong is a clear error, exit 1, and no fold.
TEST_F(AuthLiveTest, MissingOrWrongCredentialsAreClearErrors) {
  kv_.CreateBucket("secure");
  kv_.Put("secure", "k", "v");
  std::vector<std::string> wrong = Tls();
  wrong.insert(wrong.end(), {"--user", "kvuser", "--password", "wrong"});
  CliExit bad_password = Mirror(wrong);
  EXPECT_EQ(bad_password.code, 1) << bad_password.err;
  EXPECT_NE(bad_password.err.find("uthorization"), std::string::npos) << bad_password.err;

  CliExit no_tls = Mirror({"--user", "kvuser", "--password", "s3cret pass"});
  EXPECT_EQ(no_tls.code, 1) << no_tls.err;
  EXPECT_NE(no_tls.err.find("cannot connect"), std::string::npos) << no_tls.err;

  std::vector<std::string> no_cert = {"--tls-ca", pki_.Path("ca.pem"), "--user",
                                      "kvuser",   "--password",        "s3cret pass"};
  CliExit rejected = Mirror(no_cert);
  EXPECT_EQ(rejected.code, 1) << rejected.err;

  CliExit half = Mirror({"--user", "kvuser"});
  EXPECT_EQ(half.code, 2) << half.err;
  EXPECT_NE(half.err.find("--user and --password go together"), std::string::npos) << half.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/fold"));
}

// A server in operator mode (decentralized auth: JWTs, no passwords) over
// TLS: the mirror signs in with a .creds file, from --creds or KVFOLD_CREDS.
class CredsLiveTest : public ::testing::Test {
 protected:
  CredsLiveTest()
      : pki_(dir_.path()),
        setup_(MakeOperatorSetup()),
        server_(setup_.server_config + "debug: true\ntls {\n" + kTlsTimeout + "  cert_file: \"" +
                pki_.Path("server.pem") + "\"\n  key_file: \"" + pki_.Path("server.key") +
                "\"\n}\n"),
        creds_(Creds(dir_.path(), setup_.user_creds)),
        kv_(server_.url(), [this](natsOptions* o) {
          natsOptions_SetSecure(o, true);
          natsOptions_LoadCATrustedCertificates(o, pki_.Path("ca.pem").c_str());
          natsOptions_SetUserCredentialsFromFiles(o, creds_.c_str(), nullptr);
        }) {}

  static std::string Creds(const std::string& dir, const std::string& text) {
    const std::string path = dir + "/user.creds";
    std::ofstream(path) << text;
    return path;
  }
  CliExit Mirror(std::vector<std::string> extra, const std::vector<std::string>& env = {}) {
    std::vector<std::string> args = {
        "mirror",   "--server",         server_.url(),         "--bucket",
        "jwt",      "--fold",           dir_.path() + "/fold", "--until-caught-up",
        "--tls-ca", pki_.Path("ca.pem")};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(args, dir_.path(), env);
  }

  TestDir dir_;
  TestPki pki_;
  OperatorSetup setup_;
  NatsServer server_;
  std::string creds_;
  KvClient kv_;
};

TEST_F(CredsLiveTest, MirrorSignsInWithACredsFileOverTls) {
  kv_.CreateBucket("jwt");
  for (int i = 0; i < 30; ++i) kv_.Put("jwt", "k" + std::to_string(i), "v");
  CliExit ok = Mirror({"--creds", creds_});
  // Twice seen refused in CI ("authentication error"; under ASan, then on
  // 2.9.10 in the plain tier), never in 72 local runs, 60 of them beside
  // three busy loops. The server logs at debug level (its config), so the
  // log tail printed names the check that failed.
  ASSERT_EQ(ok.code, 0) << ok.err << server_.LogTail(30);
  CliExit dump = RunCli({"dump", "--fold", dir_.path() + "/fold"}, dir_.path());
  EXPECT_EQ(std::count(dump.out.begin(), dump.out.end(), '\n'), 30) << dump.out;

  CliExit from_env = Mirror({}, {"KVFOLD_CREDS=" + creds_});
  EXPECT_EQ(from_env.code, 0) << from_env.err;

  CliExit without = Mirror({});
  EXPECT_EQ(without.code, 1) << without.err;
  EXPECT_NE(without.err.find("cannot connect"), std::string::npos) << without.err;
}

}  // namespace
}  // namespace kvfold::live
