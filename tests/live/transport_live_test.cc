// The transport contract, the same tests over each transport: a directory,
// a NATS object store (a real nats-server) and S3 (a real s3rver): objects
// whole or absent, listings sorted without the pointer, a pointer that only
// moves forward, artifacts that round-trip and whose damage is refused, and
// a missing location that is NotFound and not created.

#include <gtest/gtest.h>

#include <cstdlib>

#include "fold_view.h"
#include "kvfold/artifact.h"
#include "kvfold/fold.h"
#include "kvfold/transport.h"
#include "live/nats_server.h"
#include "live/s3_server.h"
#include "pointer_race.h"

namespace kvfold::live {
namespace {

// One s3rver for the whole binary (node starts in about a second); each
// test uses buckets of its own.
S3Server& SharedS3Server() {
  static S3Server* server = new S3Server();  // dies with the process (PDEATHSIG)
  return *server;
}

// Skips when s3rver is not installed, unless KVFOLD_REQUIRE_S3RVER=1 (CI),
// where a missing server fails instead of passing unseen.
#define KVFOLD_NEED_S3RVER()                                                  \
  do {                                                                        \
    std::string why;                                                          \
    if (S3Server::Find(&why).empty()) {                                       \
      const char* required = std::getenv("KVFOLD_REQUIRE_S3RVER");            \
      if (required != nullptr && std::string(required) == "1") FAIL() << why; \
      GTEST_SKIP() << why;                                                    \
    }                                                                         \
  } while (0)

std::unique_ptr<Fold> SourceFold(int keys) {
  auto fold = NewMemoryFold();
  FoldCommit c;
  for (int i = 0; i < keys; ++i) {
    c.entries["k" + std::to_string(1000 + i)] = Entry{
        static_cast<uint64_t>(i + 1), i % 7 == 3, i % 7 == 3 ? "" : std::string(200, 'a' + i % 26)};
  }
  c.cursor = keys + 5;
  c.bucket = "cfg";
  c.scope = std::vector<std::string>{""};
  c.stream_created = "2026-01-01T00:00:00Z";
  EXPECT_TRUE(fold->Commit(c).ok());
  return fold;
}

class TransportLiveTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    connect_.url = nats_.url();
    if (GetParam() == "s3") {
      KVFOLD_NEED_S3RVER();
      options_.s3 = SharedS3Server().options();
    }
  }

  // A location of this test's own, `n` telling several apart.
  std::string Location(const std::string& n = "a") {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::string id;
    for (char c : test.substr(0, test.find('/')) + n) {
      if (std::isalnum(static_cast<unsigned char>(c))) id += static_cast<char>(std::tolower(c));
    }
    id = id.substr(0, 40);
    if (GetParam() == "dir") return "dir:" + dir_.path() + "/" + id;
    if (GetParam() == "obj") return "obj:" + id;
    return "s3://" + id + "/some/prefix";
  }

  std::unique_ptr<Transport> Open(const std::string& location, bool create = true) {
    TransportOptions o = options_;
    o.create_if_missing = create;
    auto t = OpenTransport(location, connect_, o);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(t).value() : nullptr;
  }

  ArtifactManifest Export(Fold& from, Transport& to) {
    ExportOptions o;
    o.chunk_raw_bytes = 4000;  // several chunks
    auto m = ExportArtifact(from, to, o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : ArtifactManifest{};
  }

  NatsServer nats_;
  ConnectOptions connect_;
  TransportOptions options_;
  TestDir dir_;
};

TEST_P(TransportLiveTest, ObjectsAreWholeListedSortedAndRemoved) {
  auto t = Open(Location());
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->Put("b/two", "2").ok());
  ASSERT_TRUE(t->Put("a/one", "1").ok());
  ASSERT_TRUE(t->Put("c", "").ok());
  ASSERT_TRUE(t->Put("a/one", "uno").ok());  // replaced whole
  ASSERT_TRUE(t->AdvancePointer(ArtifactPointer{"x", 1, "b", "t"}).ok());
  EXPECT_EQ(*t->Get("a/one", 1 << 20), "uno");
  EXPECT_EQ(*t->Get("c", 1 << 20), "");
  EXPECT_EQ(*t->List(), (std::vector<std::string>{"a/one", "b/two", "c"}));  // no LATEST
  EXPECT_TRUE(t->Get("nope", 1 << 20).status().IsNotFound())
      << t->Get("nope", 1 << 20).status().ToString();
  ASSERT_TRUE(t->Remove("b/two").ok());
  ASSERT_TRUE(t->Remove("b/two").ok());  // removing what is gone is fine
  EXPECT_EQ(*t->List(), (std::vector<std::string>{"a/one", "c"}));
  EXPECT_TRUE(t->Put("../escape", "x").IsInvalidArgument());
  // A second transport on the same location sees the same objects.
  auto again = Open(Location(), false);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again->Get("a/one", 1 << 20), "uno");
}

// Over the part size (S3: a multipart upload of 5 MiB parts).
TEST_P(TransportLiveTest, ALargeObjectRoundTrips) {
  auto t = Open(Location());
  ASSERT_TRUE(t);
  std::string big(11 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  ASSERT_TRUE(t->Put("big/blob", big).ok());
  auto back = t->Get("big/blob", uint64_t{1} << 30);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == big);
  EXPECT_EQ(*t->List(), std::vector<std::string>{"big/blob"});
}

// A reader says how much it takes (a manifest's cap, a chunk's size in its
// manifest): a larger object, which only a writer other than kvfold can
// have stored there, is refused by its stored size before it is read.
TEST_P(TransportLiveTest, AnObjectLargerThanAskedIsRefusedUnread) {
  auto t = Open(Location());
  ASSERT_TRUE(t);
  const std::string blob(300 << 10, 'b');
  ASSERT_TRUE(t->Put("x/blob", blob).ok());
  EXPECT_EQ(*t->Get("x/blob", blob.size()), blob);
  for (const uint64_t max : {uint64_t{100} << 10, uint64_t{blob.size() - 1}}) {
    auto got = t->Get("x/blob", max);
    ASSERT_FALSE(got.ok()) << max;
    EXPECT_TRUE(got.status().IsCorruption()) << got.status().ToString();
    EXPECT_NE(got.status().message().find("307200 bytes"), std::string::npos)
        << got.status().ToString();
    EXPECT_NE(got.status().message().find("more than the " + std::to_string(max)),
              std::string::npos)
        << got.status().ToString();
  }
  EXPECT_TRUE(t->Get("x/none", 1).status().IsNotFound());
}

TEST_P(TransportLiveTest, ThePointerOnlyMovesForward) {
  auto t = Open(Location());
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->ReadPointer()->has_value());
  ASSERT_TRUE(t->AdvancePointer(ArtifactPointer{"a10", 10, "b", "t"}).ok());
  EXPECT_TRUE(t->AdvancePointer(ArtifactPointer{"a5", 5, "b", "t"}).IsAlreadyExists());
  EXPECT_TRUE(t->AdvancePointer(ArtifactPointer{"a10", 10, "b", "t"}).IsAlreadyExists());
  EXPECT_TRUE(t->AdvancePointer(ArtifactPointer{"o", 20, "other", "t"}).IsFailedPrecondition());
  ASSERT_TRUE(t->AdvancePointer(ArtifactPointer{"a20", 20, "b", "t"}).ok());
  EXPECT_EQ((*t->ReadPointer())->artifact_id, "a20");
}

// Two exporters racing through shuffled cursors: a reader never sees the
// pointer go back. S3 needs conditional writes for this, which s3rver
// ignores (there, ScheduledExport's lease serializes exporters instead).
TEST_P(TransportLiveTest, ConcurrentExportersNeverMoveThePointerBackward) {
  if (GetParam() == "s3") GTEST_SKIP() << "s3rver ignores If-Match / If-None-Match";
  const std::string at = Location();
  RacePointer([&] { return Open(at); }, 40);
}

TEST_P(TransportLiveTest, ArtifactsRoundTripAndDamageIsRefused) {
  auto source = SourceFold(400);
  auto t = Open(Location());
  ASSERT_TRUE(t);
  ArtifactManifest m = Export(*source, *t);
  ASSERT_GE(m.chunks.size(), 3u);
  ASSERT_TRUE(VerifyArtifact(*t, m.artifact_id, {}).ok());
  auto seeded = NewMemoryFold();
  ASSERT_TRUE(SeedFold(*seeded, *t, {}).ok());
  EXPECT_EQ(LiveEntries(*seeded), LiveEntries(*source));

  // A flipped byte, a truncated chunk, a missing one: refused, naming it,
  // and the fold a seed would fill stays empty.
  const std::string chunk = m.chunks[1].name;
  const std::string good = *t->Get(chunk, 1 << 20);
  auto refused = [&](const std::string& needle) {
    auto fold = NewMemoryFold();
    auto s = SeedFold(*fold, *t, {});
    EXPECT_FALSE(s.ok()) << needle;
    if (!s.ok()) {
      EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status().ToString();
    }
    EXPECT_TRUE(LiveEntries(*fold).empty());
    EXPECT_FALSE(VerifyArtifact(*t, m.artifact_id, {}).ok());
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  ASSERT_TRUE(t->Put(chunk, flipped).ok());
  refused("does not match its SHA-256");
  ASSERT_TRUE(t->Put(chunk, good.substr(0, good.size() / 2)).ok());
  refused("bytes; the manifest says");
  ASSERT_TRUE(t->Remove(chunk).ok());
  refused("is missing");
  ASSERT_TRUE(t->Put(chunk, good).ok());
  EXPECT_TRUE(VerifyArtifact(*t, m.artifact_id, {}).ok());

  // A newer export; an older one never moves the pointer back; prune keeps
  // the latest.
  FoldCommit more;
  more.entries["k9999"] = Entry{500, false, "new"};
  more.cursor = 600;
  ASSERT_TRUE(source->Commit(more).ok());
  ArtifactManifest newer = Export(*source, *t);
  EXPECT_EQ((*t->ReadPointer())->artifact_id, newer.artifact_id);
  std::vector<std::string> removed;
  ASSERT_TRUE(PruneArtifacts(*t, PruneOptions{.keep = 1, .min_age = {}}, &removed).ok());
  EXPECT_EQ(removed, std::vector<std::string>{m.artifact_id});
  EXPECT_EQ(ListArtifacts(*t, nullptr)->size(), 1u);
  EXPECT_TRUE(VerifyArtifact(*t, newer.artifact_id, {}).ok());
}

// A reader of a location nobody created gets NotFound and leaves nothing
// behind (a typo never makes a stream or a bucket).
TEST_P(TransportLiveTest, AMissingLocationIsNotFoundAndNotCreated) {
  TransportOptions o = options_;
  const std::string missing = Location("missing");
  auto t = OpenTransport(missing, connect_, o);
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(t.status().IsNotFound()) << t.status().ToString();
  auto again = OpenTransport(missing, connect_, o);
  EXPECT_TRUE(again.status().IsNotFound()) << again.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportLiveTest, ::testing::Values("dir", "obj", "s3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvfold::live
