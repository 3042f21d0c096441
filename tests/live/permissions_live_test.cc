// Least privilege: a server with one user per role holding exactly the
// rights docs/operating.md ("Permissions", copied into the README) lists,
// and one user per right with that right taken away. Each role works with
// its rights; a role missing any one of them fails at start, at once (not
// after a request's timeout), with exit 1 and a message naming the subject
// the server refused.

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "live/cli_process.h"
#include "live/kv_client.h"
#include "live/nats_server.h"
#include "test_dir.h"

namespace kvfold::live {
namespace {

// The names the documented blocks use.
constexpr char kBucket[] = "config";
constexpr char kLeases[] = "kvfold-leases";
constexpr char kArtifacts[] = "artifacts";

struct Role {
  std::string name;
  std::vector<std::string> publish;  // subscribe is always _INBOX.>
};

// The documented blocks, as the test holds them.
std::vector<Role> Roles() {
  const std::vector<std::string> mirror = {
      "$JS.API.STREAM.INFO.KV_config", "$JS.API.STREAM.MSG.GET.KV_config",
      "$JS.API.CONSUMER.CREATE.KV_config", "$JS.API.CONSUMER.DELETE.KV_config.*",
      "$JS.FC.KV_config.>"};
  std::vector<std::string> exporter = mirror;
  exporter.insert(exporter.end(),
                  {"$JS.API.STREAM.INFO.KV_kvfold-leases",
                   "$JS.API.STREAM.MSG.GET.KV_kvfold-leases", "$KV.kvfold-leases.export.config",
                   "$JS.API.STREAM.INFO.OBJ_artifacts", "$JS.API.STREAM.MSG.GET.OBJ_artifacts",
                   "$JS.API.STREAM.PURGE.OBJ_artifacts", "$O.artifacts.>"});
  const std::vector<std::string> seeder = {"$JS.API.STREAM.INFO.OBJ_artifacts",
                                           "$JS.API.STREAM.MSG.GET.OBJ_artifacts"};
  return {{"mirror", mirror}, {"exporter", exporter}, {"seeder", seeder}};
}

constexpr char kInbox[] = "_INBOX.>";

std::string Quoted(const std::vector<std::string>& subjects) {
  std::string out;
  for (const auto& s : subjects) out += (out.empty() ? "\"" : ", \"") + s + "\"";
  return out;
}

std::string User(const std::string& name, const std::vector<std::string>& publish, bool inbox) {
  return "    { user: \"" + name + "\", password: \"pw\", permissions: {\n" +
         "        publish: { allow: [" + Quoted(publish) + "] }\n" +
         "        subscribe: { allow: [" + (inbox ? Quoted({kInbox}) : "\"nothing.here\"") +
         "] } } }\n";
}

// Role r's user "r", and "r-minus-i" without right i (i = its publish
// rights in order, then the inbox).
std::string Config() {
  std::string users = "    { user: \"admin\", password: \"pw\" }\n";
  for (const Role& r : Roles()) {
    users += User(r.name, r.publish, true);
    for (size_t i = 0; i <= r.publish.size(); ++i) {
      std::vector<std::string> fewer = r.publish;
      if (i < fewer.size()) fewer.erase(fewer.begin() + static_cast<long>(i));
      users += User(r.name + "-minus-" + std::to_string(i), fewer, i < r.publish.size());
    }
  }
  return "authorization {\n  users: [\n" + users + "  ]\n}\n";
}

class PermissionsLiveTest : public ::testing::Test {
 protected:
  PermissionsLiveTest() : server_(Config()), admin_(Url("admin")) {}

  std::string Url(const std::string& user) const {
    return "nats://" + user + ":pw@127.0.0.1:" + std::to_string(server_.port());
  }

  // The role's job, as `user`, into a fold of its own.
  CliExit Run(const std::string& role, const std::string& user, const std::string& fold) {
    const std::string arts = std::string("obj:") + kArtifacts;
    if (role == "seeder") {
      return RunCli({"seed", "--server", Url(user), "--fold", fold, "--from", arts}, dir_.path());
    }
    std::vector<std::string> args = {"mirror", "--server", Url(user), "--bucket",
                                     kBucket,  "--fold",   fold,      "--until-caught-up"};
    if (role == "exporter") {
      // A round per second; the mirror ends once caught up, so the test
      // runs one export by hand below instead of waiting for a round.
      args.insert(args.end(), {"--export-to", arts, "--export-every", "1s"});
    }
    return RunCli(args, dir_.path());
  }

  TestDir dir_;
  NatsServer server_;
  KvClient admin_;
};

TEST_F(PermissionsLiveTest, EachRoleWorksWithItsRightsAndFailsAtStartWithoutAnyOne) {
  admin_.CreateBucket(kBucket);
  for (int i = 0; i < 40; ++i) admin_.Put(kBucket, "k" + std::to_string(i % 25), std::to_string(i));
  // The buckets an exporter writes to exist already (created by an
  // administrator, here by an export as admin): creating them is a right
  // the roles do not hold.
  const std::string admin_fold = dir_.path() + "/admin";
  CliExit made = Run("exporter", "admin", admin_fold);
  ASSERT_EQ(made.code, 0) << made.err;
  CliExit first = RunCli({"export", "--fold", admin_fold, "--to", std::string("obj:") + kArtifacts,
                          "--server", Url("admin")},
                         dir_.path());
  ASSERT_EQ(first.code, 0) << first.err;

  int fold_number = 0;
  for (const Role& r : Roles()) {
    SCOPED_TRACE(r.name);
    const std::string fold = dir_.path() + "/" + r.name;
    CliExit ok = Run(r.name, r.name, fold);
    ASSERT_EQ(ok.code, 0) << ok.err << server_.LogTail(10);
    if (r.name == "exporter") {
      // The exporter's own writes: a new artifact through the object store
      // and the lease (the mirror's first round is a period away).
      admin_.Put(kBucket, "fresh", "value");
      CliExit again = Run(r.name, r.name, fold);
      ASSERT_EQ(again.code, 0) << again.err;
      CliExit exported = RunCli({"export", "--fold", fold, "--to", std::string("obj:") + kArtifacts,
                                 "--server", Url(r.name)},
                                dir_.path());
      EXPECT_EQ(exported.code, 0) << exported.err << server_.LogTail(10);
    }
    for (size_t i = 0; i <= r.publish.size(); ++i) {
      const std::string missing = i < r.publish.size() ? r.publish[i] : kInbox;
      SCOPED_TRACE("without " + missing);
      const std::string user = r.name + "-minus-" + std::to_string(i);
      const std::string bad_fold = dir_.path() + "/bad-" + std::to_string(++fold_number);
      const auto started = std::chrono::steady_clock::now();
      CliExit refused = Run(r.name, user, bad_fold);
      const auto took = std::chrono::steady_clock::now() - started;
      EXPECT_EQ(refused.code, 1) << refused.err;
      EXPECT_NE(refused.err.find("PermissionDenied"), std::string::npos) << refused.err;
      // The refused subject is named (a wildcard right by its fixed part).
      const std::string named = missing.substr(0, missing.find_first_of("*>"));
      EXPECT_NE(refused.err.find(named), std::string::npos) << refused.err;
      EXPECT_LT(took, std::chrono::seconds(4)) << "not at once: " << refused.err;
      EXPECT_EQ(refused.err.find("Timeout"), std::string::npos) << refused.err;
      // The password in the URL is not printed.
      EXPECT_EQ(refused.err.find(":pw@"), std::string::npos) << refused.err;
    }
  }
}

// The README's permission blocks are the ones this test holds.
TEST(PermissionsDocTest, TheReadmeListsEveryRight) {
  std::ifstream in(std::string(KVFOLD_SOURCE_DIR) + "/README.md");
  std::stringstream text;
  text << in.rdbuf();
  for (const Role& r : Roles()) {
    for (const std::string& s : r.publish) {
      EXPECT_NE(text.str().find("\"" + s + "\""), std::string::npos) << r.name << ": " << s;
    }
  }
  EXPECT_NE(text.str().find(kInbox), std::string::npos);
}

}  // namespace
}  // namespace kvfold::live
