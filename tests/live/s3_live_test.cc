// The S3 transport against a real S3-protocol server (s3rver on loopback):
// retries on throttling, S3's refusals through a fault proxy (AccessDenied,
// NoSuchBucket, a bare 404, a lost pointer race, an error under a 200, an
// expired token), signatures checked by the AWS SDK's signer, listings past
// one page, credentials from a profile file, the CLI end to end, and what
// s3rver lacks, shown.

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <future>

#include "artifact/pointer_codec.h"
#include "artifact/s3_client.h"
#include "artifact/s3_config.h"
#include "kvfold/artifact.h"
#include "kvfold/artifact_source.h"
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

  // S3Options reaching the server through `proxy`.
  S3Options Through(const S3FaultProxy& proxy) const {
    S3Options o = server_->options();
    o.endpoint = proxy.endpoint();
    return o;
  }

  std::unique_ptr<S3Server> server_;
  TestDir dir_;
};

// A fold of one stream of bucket "cfg" holding `keys` keys at `cursor`
// (REQUIRES: cursor >= keys), its revisions its own: the folds of exporters
// that publish to one location, each export of several chunks (kChunkBytes).
std::unique_ptr<Fold> FoldAt(uint64_t cursor, int keys = 40) {
  auto fold = NewMemoryFold();
  FoldCommit c;
  for (int i = 0; i < keys; ++i) {
    const uint64_t revision = cursor - keys + i + 1;
    c.entries["k" + std::to_string(1000 + i)] =
        Entry{revision, false, std::string(200, 'v') + std::to_string(revision)};
  }
  c.cursor = cursor;
  c.bucket = "cfg";
  c.scope = std::vector<std::string>{""};
  c.stream_created = "2026-01-01T00:00:00Z";
  Status s = fold->Commit(c);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return fold;
}

constexpr size_t kChunkBytes = 4096;

ExportOptions InChunks() {
  ExportOptions eo;
  eo.chunk_raw_bytes = kChunkBytes;
  return eo;
}

// Seeds an empty fold from the latest artifact at `from`; the fold is
// `*seeded` when not null.
StatusOr<ArtifactManifest> SeedNew(Transport& from, std::unique_ptr<Fold>* seeded = nullptr) {
  auto fold = NewMemoryFold();
  auto m = SeedFold(*fold, from, SeedOptions{});
  if (seeded != nullptr) *seeded = std::move(fold);
  return m;
}

// The export a racer run by the fault proxy made, once the request it
// raced was answered; an error when it never ran. Read through the future,
// which orders the racer's work (on the proxy's thread) before the reader's.
StatusOr<ArtifactManifest> RacerOutcome(std::promise<StatusOr<ArtifactManifest>>& result) {
  auto future = result.get_future();
  if (future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    return Status::Internal("the racer never ran");
  }
  return future.get();
}

// `s` failed, saying `part`.
::testing::AssertionResult Names(const Status& s, const std::string& part) {
  if (!s.ok() && s.message().find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.ToString() << " does not name \"" << part << "\"";
}

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

// Each refusal is judged once, by S3's code and not by the status alone:
// AccessDenied, NoSuchKey, NoSuchBucket, a bare 404, a 412 and a 501 are
// not asked again (another attempt gets the same answer), a 500 is, up to
// max_attempts. Only S3's own "no such" answers are NotFound: nothing else
// may pass for "no artifact yet" (which a restore waits out).
TEST_F(S3LiveTest, EachRefusalIsJudgedOnceByItsCode) {
  S3FaultProxy proxy(server_->port());
  S3Options o = Through(proxy);
  o.max_attempts = 3;
  ASSERT_TRUE(Open("s3://judged", o));  // makes the bucket
  auto config = artifact::ResolveS3Config("s3://judged", o);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  artifact::S3Client client(*config);
  struct Refusal {
    int status;
    std::string code;
    int requests;  // sent for it, retries included
    Status::Code kind;
    std::string named;  // in the message
  };
  const Refusal refusals[] = {
      {403, "AccessDenied", 1, Status::Code::kFailedPrecondition,
       "LATEST: HTTP 403 AccessDenied: injected by the test's proxy (the credentials lack the "
       "right for this request)"},
      {404, "NoSuchKey", 1, Status::Code::kNotFound, "LATEST: HTTP 404 NoSuchKey"},
      {404, "NoSuchBucket", 1, Status::Code::kNotFound, "judged/LATEST: HTTP 404 NoSuchBucket"},
      {404, "", 1, Status::Code::kFailedPrecondition, "LATEST: HTTP 404"},
      {412, "PreconditionFailed", 1, Status::Code::kFailedPrecondition,
       "LATEST: HTTP 412 PreconditionFailed"},
      {501, "NotImplemented", 1, Status::Code::kUnavailable, "LATEST: HTTP 501 NotImplemented"},
      {500, "InternalError", 3, Status::Code::kUnavailable,
       "LATEST: HTTP 500 InternalError (after 3 attempts)"},
  };
  for (const Refusal& r : refusals) {
    SCOPED_TRACE(std::to_string(r.status) + " " + r.code);
    proxy.FailNext(1000, r.status, r.code, "GET", "LATEST");
    artifact::S3Request get("GET", "LATEST");
    const int before = proxy.requests();
    auto answer = client.Send(get);
    EXPECT_EQ(proxy.requests() - before, r.requests);
    const Status judged = answer.ok() ? client.ErrorOf(get, *answer) : answer.status();
    EXPECT_EQ(judged.code(), r.kind) << judged.ToString();
    EXPECT_TRUE(Names(judged, r.named));
  }
}

// Invariant: an export the bucket refuses publishes nothing and loses
// nothing. AccessDenied on a chunk (credentials that may not write there)
// fails the export by name, before any manifest; the chunks already
// written are removed, and the pointer still names the earlier artifact,
// which still seeds. Refused on the pointer, the manifest is left for the
// next export or prune, the pointer stays, and the next export answered
// truly moves it.
TEST_F(S3LiveTest, AccessDeniedOnAnExportPublishesNothing) {
  S3FaultProxy proxy(server_->port());
  auto t = Open("s3://denied/edge", Through(proxy));
  ASSERT_TRUE(t);
  auto first = ExportArtifact(*FoldAt(100), *t, InChunks());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_GE(first->chunks.size(), 3u);
  auto stored = t->List();
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();

  auto second_fold = FoldAt(200);
  proxy.FailNext(1, 403, "AccessDenied", "PUT", "/chunk-000001");
  auto denied = ExportArtifact(*second_fold, *t, InChunks());
  ASSERT_FALSE(denied.ok()) << "an export over a chunk S3 refused was published";
  EXPECT_TRUE(denied.status().IsFailedPrecondition()) << denied.status().ToString();
  EXPECT_TRUE(Names(denied.status(), "/chunk-000001: HTTP 403 AccessDenied"));
  EXPECT_EQ(*LatestArtifactId(*t), first->artifact_id);
  EXPECT_EQ(*t->List(), *stored) << "a manifest or an orphan chunk of the refused export is left";
  auto seeded = SeedNew(*t);
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(seeded->artifact_id, first->artifact_id);
  EXPECT_EQ(seeded->cursor, 100u);
  EXPECT_EQ(seeded->entry_count, 40u);

  proxy.FailNext(1, 403, "AccessDenied", "PUT", "LATEST");
  auto unpointed = ExportArtifact(*second_fold, *t, InChunks());
  ASSERT_FALSE(unpointed.ok());
  EXPECT_TRUE(unpointed.status().IsFailedPrecondition()) << unpointed.status().ToString();
  EXPECT_TRUE(Names(unpointed.status(), "but not made the latest"));
  EXPECT_TRUE(Names(unpointed.status(), "LATEST: HTTP 403 AccessDenied"));
  EXPECT_EQ(*LatestArtifactId(*t), first->artifact_id);
  seeded = SeedNew(*t);
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(seeded->cursor, 100u);

  auto third = ExportArtifact(*second_fold, *t, InChunks());
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(*LatestArtifactId(*t), third->artifact_id);
  auto listed = ListArtifacts(*t, nullptr);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->size(), 3u);  // the first, the unpointed one, the third
  EXPECT_TRUE(VerifyArtifact(*t, third->artifact_id, VerifyOptions{}).ok());
}

// Invariant: a reader the bucket refuses says so; it never takes the
// refusal for "no artifact yet" (NotFound, which a restore waits out and a
// seed reports as nothing to seed). AccessDenied on the pointer or on the
// manifest fails the seed by name with the fold untouched, and the
// restore's source; a refused HEAD fails the source that opens its
// location when first needed.
TEST_F(S3LiveTest, AccessDeniedOnReadingIsRefusedNotTakenForNoArtifact) {
  S3FaultProxy proxy(server_->port());
  auto t = Open("s3://unreadable", Through(proxy));
  ASSERT_TRUE(t);
  auto written = ExportArtifact(*FoldAt(100), *t, InChunks());
  ASSERT_TRUE(written.ok()) << written.status().ToString();

  for (const std::string& object : {std::string("LATEST"), written->artifact_id + "/manifest"}) {
    SCOPED_TRACE(object);
    const std::string refused = object + ": HTTP 403 AccessDenied";
    proxy.FailNext(1, 403, "AccessDenied", "GET", object);
    std::unique_ptr<Fold> fold;
    auto seeded = SeedNew(*t, &fold);
    ASSERT_FALSE(seeded.ok());
    EXPECT_TRUE(seeded.status().IsFailedPrecondition()) << seeded.status().ToString();
    EXPECT_TRUE(Names(seeded.status(), refused));
    auto snapshot = fold->Snapshot();
    ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
    EXPECT_FALSE((*snapshot)->meta().cursor) << "a refused seed touched the fold";
    EXPECT_EQ((*snapshot)->meta().live_keys, 0u);

    proxy.FailNext(1, 403, "AccessDenied", "GET", object);
    auto newest = NewArtifactSource(*t)->Newest();
    ASSERT_FALSE(newest.ok());
    EXPECT_TRUE(newest.status().IsFailedPrecondition()) << newest.status().ToString();
    EXPECT_TRUE(Names(newest.status(), refused));
  }

  TransportOptions reading;  // a reader never creates the bucket
  reading.s3 = Through(proxy);
  auto lazy = OpenArtifactSourceWhenNeeded("s3://unreadable", ConnectOptions{}, {}, reading);
  ASSERT_TRUE(lazy.ok()) << lazy.status().ToString();
  proxy.FailNext(1, 403, "AccessDenied", "HEAD");  // a HEAD's answer has no body
  auto opened = (*lazy)->Newest();
  EXPECT_TRUE(opened.status().IsFailedPrecondition()) << opened.status().ToString();
  EXPECT_TRUE(Names(opened.status(), "unreadable/: HTTP 403"));
  opened = (*lazy)->Newest();  // opened again, answered truly
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->artifact_id, written->artifact_id);

  auto seeded = SeedNew(*t);
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(seeded->cursor, 100u);
}

// S3's NoSuchBucket is NotFound naming the bucket (what it says: the
// bucket is gone), whether the transport is open or opens: not taken for
// an empty pointer, so an export over it writes nothing.
TEST_F(S3LiveTest, NoSuchBucketIsNotFoundNamingTheBucket) {
  S3FaultProxy proxy(server_->port());
  auto t = Open("s3://vanishing", Through(proxy));
  ASSERT_TRUE(t);
  auto written = ExportArtifact(*FoldAt(100), *t, InChunks());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  auto stored = t->List();
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();

  proxy.FailNext(1, 404, "NoSuchBucket", "GET", "LATEST");
  auto latest = LatestArtifactId(*t);
  EXPECT_TRUE(latest.status().IsNotFound()) << latest.status().ToString();
  EXPECT_TRUE(Names(latest.status(), "/vanishing/LATEST: HTTP 404 NoSuchBucket"));

  proxy.FailNext(1, 404, "NoSuchBucket", "GET", "LATEST");
  auto exported = ExportArtifact(*FoldAt(200), *t, InChunks());
  EXPECT_TRUE(exported.status().IsNotFound()) << exported.status().ToString();
  EXPECT_TRUE(Names(exported.status(), "/vanishing/LATEST: HTTP 404 NoSuchBucket"));
  EXPECT_EQ(*t->List(), *stored);

  // (The manifest's reader words any NotFound as a missing manifest.)
  proxy.FailNext(1, 404, "NoSuchBucket", "GET", "/manifest");
  auto seeded = SeedNew(*t);
  EXPECT_TRUE(seeded.status().IsNotFound()) << seeded.status().ToString();
  EXPECT_TRUE(
      Names(seeded.status(), "artifact " + written->artifact_id + " not found at s3://vanishing"));

  // Opening a reader: HEAD answers a bare 404, the listing NoSuchBucket.
  proxy.FailNext(2, 404, "NoSuchBucket");
  TransportOptions reading;
  reading.s3 = Through(proxy);
  auto reader = OpenTransport("s3://vanishing", ConnectOptions{}, reading);
  EXPECT_TRUE(reader.status().IsNotFound()) << reader.status().ToString();
  EXPECT_TRUE(Names(reader.status(), "no S3 bucket vanishing at " + proxy.endpoint()));
  EXPECT_EQ(*LatestArtifactId(*t), written->artifact_id);
}

// Invariant: a bare 404 (no S3 error body: a proxy, a wrong endpoint or
// addressing) on the pointer is no "no artifact yet". Only NoSuchKey is;
// a bare 404 is a FailedPrecondition naming the pointer's URL, so an
// export of an older fold does not take the location for empty and write
// an artifact there, and a seed or a restore reports it.
TEST_F(S3LiveTest, ABare404OnThePointerIsNotNoArtifactYet) {
  S3FaultProxy proxy(server_->port());
  auto t = Open("s3://bare", Through(proxy));
  ASSERT_TRUE(t);
  auto written = ExportArtifact(*FoldAt(200), *t, InChunks());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  auto stored = t->List();
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  const std::string bare = "/bare/LATEST: HTTP 404";

  proxy.FailNext(1, 404, "", "GET", "LATEST");
  auto latest = LatestArtifactId(*t);
  EXPECT_TRUE(latest.status().IsFailedPrecondition()) << latest.status().ToString();
  EXPECT_TRUE(Names(latest.status(), bare));

  proxy.FailNext(1, 404, "", "GET", "LATEST");
  auto older = ExportArtifact(*FoldAt(100), *t, InChunks());
  EXPECT_TRUE(older.status().IsFailedPrecondition()) << older.status().ToString();
  EXPECT_TRUE(Names(older.status(), bare));
  EXPECT_EQ(*t->List(), *stored) << "an export wrote to a location it could not read";

  proxy.FailNext(1, 404, "", "GET", "LATEST");
  auto seeded = SeedNew(*t);
  EXPECT_TRUE(seeded.status().IsFailedPrecondition()) << seeded.status().ToString();
  EXPECT_TRUE(Names(seeded.status(), bare));

  proxy.FailNext(1, 404, "", "GET", "LATEST");
  auto newest = NewArtifactSource(*t)->Newest();
  EXPECT_TRUE(newest.status().IsFailedPrecondition()) << newest.status().ToString();
  EXPECT_TRUE(Names(newest.status(), bare));

  EXPECT_EQ(*LatestArtifactId(*t), written->artifact_id);
}

// Invariant: the pointer only moves forward, and a race for it loses no
// artifact. A conditional write of the pointer that S3 answers 412
// (another exporter moved it in between) reads the pointer again: past
// an older racer the export still advances it; behind a newer one it ends
// AlreadyExists naming that artifact, which stays the latest (this one is
// left for prune); a 412 to the retry of its own write that landed (the
// first answer lost) is success. s3rver ignores conditions
// (S3rverIgnoresConditionalWrites): the proxy answers the 412 after
// letting the racer, which exports straight to s3rver, win.
TEST_F(S3LiveTest, APointerWriteThatLosesItsConditionReadsThePointerAgain) {
  S3FaultProxy proxy(server_->port());
  auto t = Open("s3://raced", Through(proxy));
  ASSERT_TRUE(t);
  auto racer_transport = Open("s3://raced", server_->options());
  ASSERT_TRUE(racer_transport);
  auto first = ExportArtifact(*FoldAt(100), *t, InChunks());
  ASSERT_TRUE(first.ok()) << first.status().ToString();

  auto older_fold = FoldAt(200);
  std::promise<StatusOr<ArtifactManifest>> older;
  proxy.LoseNextRace("PUT", "LATEST", [&] {
    older.set_value(ExportArtifact(*older_fold, *racer_transport, InChunks()));
  });
  auto ahead = ExportArtifact(*FoldAt(300), *t, InChunks());
  auto racer = RacerOutcome(older);
  ASSERT_TRUE(racer.ok()) << racer.status().ToString();
  ASSERT_TRUE(ahead.ok()) << ahead.status().ToString();
  EXPECT_EQ(*LatestArtifactId(*t), ahead->artifact_id);

  auto newer_fold = FoldAt(500);
  std::promise<StatusOr<ArtifactManifest>> newer;
  proxy.LoseNextRace("PUT", "LATEST", [&] {
    newer.set_value(ExportArtifact(*newer_fold, *racer_transport, InChunks()));
  });
  auto behind = ExportArtifact(*FoldAt(400), *t, InChunks());
  racer = RacerOutcome(newer);
  ASSERT_TRUE(racer.ok()) << racer.status().ToString();
  EXPECT_TRUE(behind.status().IsAlreadyExists()) << behind.status().ToString();
  EXPECT_TRUE(Names(behind.status(), "names artifact " + racer->artifact_id + " at cursor 500"));
  EXPECT_EQ(*LatestArtifactId(*t), racer->artifact_id);
  auto seeded = SeedNew(*t);
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(seeded->cursor, 500u);

  proxy.StoreThenFailNext(412, "PreconditionFailed", "PUT", "LATEST");
  auto landed = ExportArtifact(*FoldAt(600), *t, InChunks());
  ASSERT_TRUE(landed.ok()) << landed.status().ToString();
  EXPECT_EQ(*LatestArtifactId(*t), landed->artifact_id);

  std::vector<std::string> unreadable;
  auto listed = ListArtifacts(*t, &unreadable);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_TRUE(unreadable.empty());
  std::vector<uint64_t> cursors;
  for (const ArtifactManifest& m : *listed) cursors.push_back(m.cursor);
  EXPECT_EQ(cursors, (std::vector<uint64_t>{100, 200, 300, 400, 500, 600}));
}

// Invariant: kvfold signs its requests as S3 checks them. s3rver checks no
// signature, so the fixture puts a verifying proxy in front of it (every
// request signed again by the AWS SDK for JavaScript's signer,
// tests/live/s3_sigv4_proxy.js) through which every test here that does not
// use a fault proxy passes. An export and a seed under a prefix (the
// listing's query escapes it), an object sent in parts (a multipart
// upload's queries) and a session token all pass; requests signed with
// another secret or for another region are refused: the check bites.
TEST_F(S3LiveTest, RequestsAreSignedAsTheAwsSdkSignsThem) {
  if (!server_->verifies_signatures()) {
    std::string why;
    S3Server::FindSigV4Verifier(&why);
    const char* required = std::getenv("KVFOLD_REQUIRE_S3_SIGV4");
    if (required != nullptr && std::string(required) == "1") FAIL() << why;
    GTEST_SKIP() << why;
  }
  auto t = Open("s3://signed/edge/west", server_->options());
  ASSERT_TRUE(t);
  auto written = ExportArtifact(*FoldAt(100), *t, InChunks());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  auto listed = ListArtifacts(*t, nullptr);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->size(), 1u);
  auto seeded = SeedNew(*t);
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(seeded->cursor, 100u);
  std::string big(server_->options().part_size + 1000, 'x');
  ASSERT_TRUE(t->Put("big/in-parts", big).ok());
  EXPECT_EQ(t->Get("big/in-parts", big.size())->size(), big.size());
  setenv("AWS_SESSION_TOKEN", "a token", 1);
  auto with_token = Open("s3://signed/edge/west", server_->options());
  ASSERT_TRUE(with_token);
  EXPECT_EQ(*LatestArtifactId(*with_token), written->artifact_id);
  unsetenv("AWS_SESSION_TOKEN");
  EXPECT_EQ(server_->refused_signatures(), "");

  for (const std::string wrong : {"secret", "region"}) {
    SCOPED_TRACE(wrong);
    auto config = artifact::ResolveS3Config("s3://signed/edge/west", server_->options());
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    (wrong == "secret" ? config->secret_key : config->region) = "not-" + wrong;
    artifact::S3Client client(*config);
    artifact::S3Request get("GET", config->where.prefix + "LATEST");
    auto answer = client.Send(get);
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    EXPECT_EQ(answer->status, 403);
    EXPECT_TRUE(Names(client.ErrorOf(get, *answer), "HTTP 403 SignatureDoesNotMatch"));
  }
  EXPECT_NE(server_->refused_signatures(), "");
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
