// The S3 transport against a real S3-protocol server (s3rver on loopback):
// retries on throttling, listings past one page, credentials from a
// profile file, the CLI end to end, and what s3rver lacks, shown.

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <fstream>

#include "artifact/pointer_codec.h"
#include "artifact/s3_client.h"
#include "artifact/s3_config.h"
#include "kvfold/artifact.h"
#include "kvfold/fold.h"
#include "kvfold/transport.h"
#include "live/cli_process.h"
#include "live/kv_client.h"
#include "live/nats_server.h"
#include "live/s3_server.h"

namespace kvfold::live {
namespace {

class S3LiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (S3Server::Find(&why).empty()) {
      const char* required = std::getenv("KVFOLD_REQUIRE_S3RVER");
      if (required != nullptr && std::string(required) == "1") FAIL() << why;
      GTEST_SKIP() << why;
    }
    server_ = std::make_unique<S3Server>();
  }

  std::unique_ptr<Transport> Open(const std::string& location, S3Options s3) {
    TransportOptions o;
    o.create_if_missing = true;
    o.s3 = std::move(s3);
    auto t = OpenTransport(location, ConnectOptions{}, o);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(t).value() : nullptr;
  }

  std::unique_ptr<S3Server> server_;
  TestDir dir_;
};

// 503 SlowDown is waited out (100 ms, doubling) up to max_attempts, also in
// the middle of a multipart upload; past them the error names the server's
// answer and the count.
TEST_F(S3LiveTest, ThrottlingIsRetriedThenReportedByName) {
  S3FaultProxy proxy(server_->port());
  S3Options o = server_->options();
  o.endpoint = proxy.endpoint();
  auto t = Open("s3://throttled", o);
  ASSERT_TRUE(t);
  proxy.ThrottleNext(3);
  const int before = proxy.requests();
  ASSERT_TRUE(t->Put("one", "1").ok());
  EXPECT_EQ(proxy.requests() - before, 4);  // three refused, the fourth stored
  EXPECT_EQ(*t->Get("one", 1 << 20), "1");

  std::string big(6 << 20, 'x');
  proxy.ThrottleNext(2);
  ASSERT_TRUE(t->Put("big", big).ok());
  EXPECT_EQ(t->Get("big", uint64_t{1} << 30)->size(), big.size());

  proxy.ThrottleNext(1000);
  Status s = t->Put("two", "2");
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("HTTP 503 SlowDown (after 5 attempts)"), std::string::npos)
      << s.ToString();
  proxy.ThrottleNext(0);
  EXPECT_TRUE(t->Get("two", 1 << 20).status().IsNotFound());
}

// Invariant: an artifact is published only over chunks that exist. S3 may
// answer a CompleteMultipartUpload 200 and report in the body that it
// failed (InternalError): no object was made, so the export fails and
// publishes neither manifest nor pointer; the next export, answered
// truly, does.
TEST_F(S3LiveTest, AMultipartCompletionThatFailedUnder200PublishesNothing) {
  S3FaultProxy proxy(server_->port());
  S3Options o = server_->options();
  o.endpoint = proxy.endpoint();
  auto t = Open("s3://completion", o);
  ASSERT_TRUE(t);
  // One chunk over the 5 MiB part size: values that do not compress.
  FoldOptions fo;
  fo.sync = false;
  auto fold = OpenRocksFold(dir_.path() + "/fold", fo);
  ASSERT_TRUE(fold.ok()) << fold.status().ToString();
  FoldCommit c;
  uint64_t noise = 88172645463325252u;  // xorshift64
  for (int i = 0; i < 3000; ++i) {
    std::string value(2048, '\0');
    for (char& b : value) {
      noise ^= noise << 13, noise ^= noise >> 7, noise ^= noise << 17;
      b = static_cast<char>(noise);
    }
    c.entries["k" + std::to_string(10000 + i)] =
        Entry{static_cast<uint64_t>(i + 1), false, std::move(value)};
  }
  c.cursor = 3000;
  c.bucket = "cfg";
  c.scope = std::vector<std::string>{""};
  c.stream_created = "2026-01-01T00:00:00Z";
  ASSERT_TRUE((*fold)->Commit(c).ok());
  ExportOptions eo;
  eo.chunk_raw_bytes = size_t{8} << 20;

  proxy.FailNext(1, 200, "InternalError", "POST", "uploadId=");
  auto failed = ExportArtifact(**fold, *t, eo);
  ASSERT_FALSE(failed.ok()) << "an export over a chunk S3 never completed was published";
  EXPECT_NE(failed.status().message().find("failed on completion: InternalError"),
            std::string::npos)
      << failed.status().ToString();
  EXPECT_TRUE(LatestArtifactId(*t).status().IsNotFound())
      << LatestArtifactId(*t).status().ToString();
  auto listed = ListArtifacts(*t, nullptr);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_TRUE(listed->empty());

  auto written = ExportArtifact(**fold, *t, eo);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  ASSERT_EQ(written->chunks.size(), 1u);
  EXPECT_GT(written->chunks[0].compressed_size, o.part_size);  // it went in parts
  EXPECT_TRUE(VerifyArtifact(*t, written->artifact_id, VerifyOptions{}).ok());
  EXPECT_EQ(*LatestArtifactId(*t), written->artifact_id);
}

// Invariant: temporary credentials that rotate do not stop the transport.
// Once S3 answers ExpiredToken, the credentials are read again, the
// session token with the keys, and the request is made with them: this one
// and every later one succeed without a restart.
TEST_F(S3LiveTest, ARotatedSessionTokenIsTakenOnExpiredToken) {
  S3FaultProxy proxy(server_->port());
  S3Options o = server_->options();
  o.endpoint = proxy.endpoint();
  setenv("AWS_SESSION_TOKEN", "token-of-the-first-hour", 1);
  auto t = Open("s3://rotated", o);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->Put("before", "1").ok());
  // The first token expires; the environment (a rotated file, in a real
  // deployment) now holds the next one.
  proxy.ExpireToken("token-of-the-first-hour");
  setenv("AWS_SESSION_TOKEN", "token-of-the-second-hour", 1);
  Status put = t->Put("after", "2");
  EXPECT_TRUE(put.ok()) << put.ToString();
  EXPECT_EQ(proxy.expired(), 1);
  for (int i = 0; i < 3; ++i) {
    auto got = t->Get("after", 1 << 20);
    EXPECT_TRUE(got.ok() && *got == "2") << got.status().ToString();
  }
  EXPECT_EQ(proxy.expired(), 1);  // the fresh token stays in use
  unsetenv("AWS_SESSION_TOKEN");
}

// ListObjectsV2 answers 1000 keys a page; the rest come by continuation.
TEST_F(S3LiveTest, ListingsPagePastAThousandObjects) {
  auto t = Open("s3://paged/deep/prefix", server_->options());
  ASSERT_TRUE(t);
  std::vector<std::string> names;
  for (int i = 0; i < 1003; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "obj/%05d", i);
    names.push_back(name);
    ASSERT_TRUE(t->Put(name, "v").ok());
  }
  EXPECT_EQ(*t->List(), names);
  // Another prefix of the same bucket is another location.
  auto other = Open("s3://paged/deep", server_->options());
  ASSERT_TRUE(other);
  ASSERT_TRUE(other->Put("mine", "v").ok());
  EXPECT_EQ(t->List()->size(), 1003u);
}

// What s3rver lacks: a conditional write is accepted whatever the
// condition, where S3 answers 412. So exporters racing without the lease
// could move its pointer back (TransportLiveTest skips that race on S3);
// kvfold's scheduled export always holds the lease.
TEST_F(S3LiveTest, S3rverIgnoresConditionalWrites) {
  auto config = artifact::ResolveS3Config("s3://conditional", server_->options());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto t = Open("s3://conditional", server_->options());
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->AdvancePointer(ArtifactPointer{"a10", 10, "b", "t"}).ok());
  // A racer's write, made as AdvancePointer makes it, on a stale view.
  artifact::S3Client client(*config);
  const std::string stale = artifact::EncodePointer(ArtifactPointer{"a5", 5, "b", "t"});
  artifact::S3Request put("PUT", "LATEST", "", stale);
  put.headers.push_back("If-None-Match: *");
  auto r = client.Send(put);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200) << "s3rver now honours If-None-Match: un-skip the pointer race";
  auto p = t->ReadPointer();
  ASSERT_TRUE(p.ok() && *p) << p.status().ToString();
  EXPECT_EQ((*p)->cursor, 5u);  // moved back: what S3's 412 prevents
  ASSERT_TRUE(t->AdvancePointer(ArtifactPointer{"a20", 20, "b", "t"}).ok());
}

// Credentials from a profile of the shared credentials file, the endpoint
// from AWS_ENDPOINT_URL; with none anywhere, the error says where it looked.
TEST_F(S3LiveTest, CredentialsFromAProfileAndAClearErrorWithout) {
  const std::string file = dir_.path() + "/credentials";
  std::ofstream(file) << "[default]\naws_access_key_id = NOBODY\n\n[ci]\n"
                         "aws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n";
  S3Options o = server_->options();
  o.endpoint.clear();
  o.profile = "ci";
  setenv("AWS_SHARED_CREDENTIALS_FILE", file.c_str(), 1);
  setenv("AWS_ENDPOINT_URL", server_->endpoint().c_str(), 1);
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  auto t = Open("s3://profiled", o);
  EXPECT_TRUE(t && t->Put("x", "y").ok());
  o.profile = "missing";
  TransportOptions to;
  to.s3 = o;
  auto none = OpenTransport("s3://profiled", ConnectOptions{}, to);
  EXPECT_TRUE(none.status().IsFailedPrecondition()) << none.status().ToString();
  EXPECT_NE(none.status().message().find("profile \"missing\" of " + file), std::string::npos)
      << none.status().ToString();
  unsetenv("AWS_SHARED_CREDENTIALS_FILE");
  unsetenv("AWS_ENDPOINT_URL");
  setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
}

// The CLI end to end: a mirror exports to S3 on a schedule (settings from
// the environment, as a systemd unit's file gives them), a new node seeds
// from it (--s3-endpoint) and resumes; bad S3 flags exit 2.
TEST_F(S3LiveTest, CliExportsOnAScheduleAndSeedsFromS3) {
  NatsServer nats;
  KvClient kv(nats.url());
  kv.CreateBucket("edge");
  uint64_t last = 0;
  for (int i = 0; i < 300; ++i) last = kv.Put("edge", "k" + std::to_string(i), "v");
  const std::string fold = dir_.path() + "/fold", seeded = dir_.path() + "/seeded";
  const std::vector<std::string> env = {"KVFOLD_SERVER=" + nats.url(),
                                        "KVFOLD_BUCKET=edge",
                                        "KVFOLD_EXPORT_TO=s3://fleet/edge",
                                        "KVFOLD_EXPORT_EVERY=200ms",
                                        "KVFOLD_S3_ENDPOINT=" + server_->endpoint(),
                                        "KVFOLD_S3_ADDRESSING=path",
                                        "KVFOLD_S3_ALLOW_UNCONDITIONAL_POINTER=true"};
  CliExit mirror = RunCli({"mirror", "--fold", fold, "--until-caught-up"}, dir_.path(), env);
  ASSERT_EQ(mirror.code, 0) << mirror.err;
  // --until-caught-up ends the mirror before a round may run: one more,
  // long enough for a round.
  pid_t running =
      SpawnCli({"mirror", "--fold", fold}, dir_.path() + "/m.out", dir_.path() + "/m.err", env);
  const std::string endpoint = "--s3-endpoint=" + server_->endpoint();
  CliExit listed;
  for (int i = 0; i < 100; ++i) {
    listed = RunCli({"artifacts", "list", "s3://fleet/edge", endpoint}, dir_.path());
    if (listed.code == 0 && listed.out.find("cursor " + std::to_string(last)) != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(running, SIGTERM);
  EXPECT_EQ(WaitExit(running), 0) << ReadWholeFile(dir_.path() + "/m.err");
  ASSERT_NE(listed.out.find("cursor " + std::to_string(last)), std::string::npos)
      << listed.out << listed.err << ReadWholeFile(dir_.path() + "/m.err");
  CliExit seed =
      RunCli({"seed", "--fold", seeded, "--from", "s3://fleet/edge", endpoint}, dir_.path());
  ASSERT_EQ(seed.code, 0) << seed.err;
  const uint64_t after = kv.Put("edge", "late", "x");
  CliExit resumed = RunCli(
      {"mirror", "--server", nats.url(), "--bucket", "edge", "--fold", seeded, "--until-caught-up"},
      dir_.path());
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  CliExit got = RunCli({"get", "--fold", seeded, "late"}, dir_.path());
  EXPECT_EQ(got.out, "x\n");
  CliExit status = RunCli({"status", "--fold", seeded}, dir_.path());
  EXPECT_NE(status.out.find(std::to_string(after)), std::string::npos) << status.out;

  CliExit bad = RunCli(
      {"artifacts", "list", "s3://fleet/edge", endpoint, "--s3-addressing=sideways"}, dir_.path());
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--s3-addressing"), std::string::npos) << bad.err;
  CliExit bucket = RunCli({"artifacts", "list", "s3://Fleet", endpoint}, dir_.path());
  EXPECT_EQ(bucket.code, 2) << bucket.err;
  CliExit absent = RunCli({"artifacts", "list", "s3://nobody-made-this", endpoint}, dir_.path());
  EXPECT_EQ(absent.code, 1) << absent.err;
  EXPECT_NE(absent.err.find("no S3 bucket nobody-made-this"), std::string::npos) << absent.err;
}

}  // namespace
}  // namespace kvfold::live
