// Artifacts over the directory transport: round trip, the bad-input matrix
// (each case a specific error and the target fold untouched), signatures,
// the forward-only pointer, and a seed killed at every commit.

#include "kvfold/artifact.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <thread>
#include <tuple>

#include "artifact.pb.h"
#include "artifact/chunk_codec.h"
#include "artifact/file_ops.h"
#include "artifact/manifest_codec.h"
#include "artifact/pointer_codec.h"
#include "artifact/signer.h"
#include "core/pointer_rule.h"
#include "fold_view.h"
#include "kvfold/artifact_source.h"
#include "pointer_race.h"
#include "sim/fault_fold.h"
#include "test_dir.h"
#include "test_keys.h"

namespace kvfold {
namespace {

namespace fs = std::filesystem;

// A fold as a mirror leaves it: entries, tombstones, cursor and metadata.
std::unique_ptr<Fold> SourceFold(int keys, std::vector<std::string> scope = {""}) {
  auto fold = NewMemoryFold();
  FoldCommit c;
  for (int i = 0; i < keys; ++i) {
    const std::string prefix = scope[i % scope.size()];
    c.entries[prefix + "k" + std::to_string(1000 + i)] = Entry{
        static_cast<uint64_t>(i + 1), i % 7 == 3, i % 7 == 3 ? "" : "value-" + std::to_string(i)};
  }
  c.cursor = keys + 5;
  c.bucket = "cfg";
  c.scope = scope;
  c.stream_created = "2026-01-01T00:00:00Z";
  EXPECT_TRUE(fold->Commit(c).ok());
  return fold;
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

class ArtifactTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = OpenTransport("dir:" + dir_.path() + "/arts", ConnectOptions{},
                           TransportOptions{.create_if_missing = true, .s3 = {}});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    to_ = std::move(t).value();
    source_ = SourceFold(300);
  }

  ArtifactManifest Export(ExportOptions o = {}) {
    if (o.chunk_raw_bytes == (size_t{4} << 20)) o.chunk_raw_bytes = 2000;  // several chunks
    auto m = ExportArtifact(*source_, *to_, o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : ArtifactManifest{};
  }

  std::string Path(const std::string& name) { return dir_.path() + "/arts/" + name; }

  // Seeds a fresh fold; expects failure with `needle` in the message and the
  // fold untouched.
  // The same into a RocksDB fold, whose seed stages the entries in a loader
  // (and leaves nothing staged behind).
  void ExpectSeedRefused(const std::string& needle, SeedOptions o = {}) {
    auto fold = NewMemoryFold();
    auto m = SeedFold(*fold, *to_, o);
    ASSERT_FALSE(m.ok()) << "seed should fail with: " << needle;
    EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().ToString();
    EXPECT_EQ(*fold->ReadMeta(), *NewMemoryFold()->ReadMeta());  // untouched
    EXPECT_TRUE(LiveEntries(*fold).empty());

    TestDir dir;
    auto rocks = OpenRocksFold(dir.path() + "/fold");
    ASSERT_TRUE(rocks.ok()) << rocks.status().ToString();
    const FoldMeta fresh = *(*rocks)->ReadMeta();
    m = SeedFold(**rocks, *to_, o);
    ASSERT_FALSE(m.ok()) << "seed should fail with: " << needle;
    EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().ToString();
    EXPECT_EQ(*(*rocks)->ReadMeta(), fresh);
    EXPECT_TRUE(LiveEntries(**rocks).empty());
    EXPECT_FALSE(fs::exists(dir.path() + "/fold/kvfold-load"));
  }

  // Rewrites the manifest of `id` through `edit` with a valid frame.
  void RewriteManifest(const std::string& id, const std::function<void(wire::Manifest*)>& edit) {
    wire::ManifestEnvelope env;
    wire::Manifest m;
    ASSERT_TRUE(
        artifact::DecodeManifestFrame(ReadWholeFile(Path(id + "/manifest")), "m", &env, &m).ok());
    edit(&m);
    env.set_manifest(m.SerializeAsString());
    WriteFile(Path(id + "/manifest"), artifact::EncodeManifestFrame(env));
  }

  TestDir dir_;
  std::unique_ptr<Transport> to_;
  std::unique_ptr<Fold> source_;
};

// Records are written by hand; they must be exactly the protobuf encoding
// (length-prefixed ChunkRecord) any reader of the format expects.
TEST(ChunkRecordTest, HandWrittenRecordsAreTheProtobufEncoding) {
  const std::string long_value(300, 'x');  // two-byte length varints
  const std::string long_key(200, 'k');
  for (auto [key, rev, value] : std::vector<std::tuple<std::string, uint64_t, std::string>>{
           {"a", 1, "v"},
           {"a.b", 0, ""},
           {long_key, 1ull << 40, long_value},
           {"t", 127, ""},
           {"u", 128, std::string(1, '\0')}}) {
    std::string mine;
    artifact::AppendRecord(&mine, key, rev, value);
    EXPECT_EQ(mine.size(), artifact::RecordBytes(key, rev, value));
    wire::ChunkRecord r;
    r.set_key(key);
    r.set_revision(rev);
    r.set_value(value);
    const std::string body = r.SerializeAsString();
    std::string expected;
    uint64_t n = body.size();
    while (n >= 0x80) {
      expected.push_back(static_cast<char>((n & 0x7f) | 0x80));
      n >>= 7;
    }
    expected.push_back(static_cast<char>(n));
    expected += body;
    EXPECT_EQ(mine, expected) << key.substr(0, 8) << " " << rev;
  }
}

// Records are read in place by hand. Whatever protobuf refuses, the hand
// parser refuses; whatever it accepts, protobuf accepts with the same
// fields. Checked over valid records and thousands of mutations of them.
TEST(ChunkRecordTest, HandParserNeverDisagreesWithProtobuf) {
  std::mt19937_64 rng(20261130);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    wire::ChunkRecord r;
    r.set_key(std::string(1 + rng() % 40, static_cast<char>('a' + rng() % 26)));
    r.set_revision(rng() >> (rng() % 64));
    r.set_value(std::string(rng() % 300, static_cast<char>(rng())));
    std::string body = r.SerializeAsString();
    const int mutations = round % 4;  // a quarter stay valid
    for (int i = 0; i < mutations && !body.empty(); ++i) {
      switch (rng() % 4) {
        case 0:
          body[rng() % body.size()] ^= static_cast<char>(1u << (rng() % 8));
          break;
        case 1:
          body.resize(rng() % body.size());
          break;
        case 2:
          body.insert(body.begin() + static_cast<long>(rng() % (body.size() + 1)),
                      static_cast<char>(rng()));
          break;
        default:
          body[rng() % body.size()] = static_cast<char>(rng());
          break;
      }
    }
    std::string_view key, value;
    uint64_t rev = 0;
    const bool mine = artifact::ParseChunkRecord(body, &key, &rev, &value);
    wire::ChunkRecord theirs;
    const bool pb = theirs.ParseFromString(body);
    if (mutations == 0) {
      ASSERT_TRUE(mine);
    }
    if (mine) {
      ++accepted;
      ASSERT_TRUE(pb) << round;
      ASSERT_EQ(key, theirs.key()) << round;
      ASSERT_EQ(rev, theirs.revision()) << round;
      ASSERT_EQ(value, theirs.value()) << round;
    }
  }
  EXPECT_GT(accepted, 5000);
  // Over-long tag and length varints (6 bytes) are refused by both.
  for (const std::string& body : {std::string("\x8a\x80\x80\x80\x80\x00\x01k", 8),
                                  std::string("\x0a\x81\x80\x80\x80\x80\x00k", 8)}) {
    std::string_view key, value;
    uint64_t rev = 0;
    wire::ChunkRecord theirs;
    EXPECT_FALSE(theirs.ParseFromString(body));
    EXPECT_FALSE(artifact::ParseChunkRecord(body, &key, &rev, &value));
  }
}

TEST_F(ArtifactTest, RoundTripIsIdentical) {
  ArtifactManifest m = Export();
  EXPECT_GE(m.chunks.size(), 3u);
  EXPECT_EQ(m.entry_count, LiveEntries(*source_).size());
  EXPECT_EQ(m.cursor, 305u);
  EXPECT_EQ(*LatestArtifactId(*to_), m.artifact_id);
  ASSERT_TRUE(VerifyArtifact(*to_, m.artifact_id, {}).ok());
  auto fold = NewMemoryFold();
  auto seeded = SeedFold(*fold, *to_, {});
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(LiveEntries(*fold), LiveEntries(*source_));
  auto meta = *fold->ReadMeta();
  auto src = *source_->ReadMeta();
  EXPECT_EQ(meta.cursor, src.cursor);
  EXPECT_EQ(meta.bucket, src.bucket);
  EXPECT_EQ(meta.scope, src.scope);
  EXPECT_EQ(meta.stream_created, src.stream_created);
  EXPECT_EQ(meta.seeding, "");
  EXPECT_EQ(meta.live_keys, src.live_keys);
}

// The eviction memo travels with the snapshot, and so does what it saw
// (issue 30): a fold seeded from an artifact of a volume-evicting bucket
// keeps the cause, through the manifest's wire form, in a memory fold and
// in a RocksDB fold; a manifest an older kvfold wrote (the memo without a
// cause) reads as a memo of unknown cause.
// Issue 32, 5: a seeded fold keeps the exporter's cursor anchor, marker
// TTL and eviction memo, so `seed` then `mirror` on a bucket with limit
// markers can show its cursor inside the marker window. Through commits
// and through the loader. Mutant seed-drop-anchor loses the anchor.
TEST_F(ArtifactTest, ASeededFoldKeepsTheAnchorMarkerTtlAndMemo) {
  FoldCommit meta;
  meta.cursor = 305;  // SourceFold's, anchored
  meta.cursor_time_ns = 1'796'122'413'204'078'132;
  meta.marker_ttl_ns = 7'000'000'000;
  meta.eviction_observed = true;
  meta.eviction_cause = "unmarked age";
  ASSERT_TRUE(source_->Commit(meta).ok());
  Export();
  TestDir dir;
  auto rocks = OpenRocksFold(dir.path() + "/fold");
  ASSERT_TRUE(rocks.ok()) << rocks.status().ToString();
  std::unique_ptr<Fold> memory = NewMemoryFold();
  for (Fold* fold : {memory.get(), rocks->get()}) {
    ASSERT_TRUE(SeedFold(*fold, *to_, {}).ok());
    const FoldMeta got = *fold->ReadMeta();
    EXPECT_EQ(got.cursor, 305u);
    EXPECT_EQ(got.cursor_time_ns, meta.cursor_time_ns);
    EXPECT_EQ(got.marker_ttl_ns, meta.marker_ttl_ns);
    EXPECT_TRUE(got.eviction_observed);
    EXPECT_EQ(got.eviction_cause, "unmarked age");
  }
}

// A key's deadline (per-message TTL) travels in its record, into a seeded
// fold by either seed path and through a restore's merge.
TEST_F(ArtifactTest, ASeededFoldKeepsEachKeysDeadline) {
  FoldCommit ttl;
  ttl.entries["a.0001"] = Entry{301, false, "expiring", 1'796'122'413'000'000'000};
  ttl.cursor = 305;
  ASSERT_TRUE(source_->Commit(ttl).ok());
  Export();
  TestDir dir;
  auto rocks = OpenRocksFold(dir.path() + "/fold");
  ASSERT_TRUE(rocks.ok()) << rocks.status().ToString();
  std::unique_ptr<Fold> memory = NewMemoryFold();
  for (Fold* fold : {memory.get(), rocks->get()}) {
    ASSERT_TRUE(SeedFold(*fold, *to_, {}).ok());
    Entry got;
    ASSERT_TRUE(fold->Get("a.0001", &got).ok());
    EXPECT_EQ(got.expires_ns, 1'796'122'413'000'000'000);
    EXPECT_EQ(LiveEntries(*fold), LiveEntries(*source_));
  }
}

TEST_F(ArtifactTest, TheEvictionMemoCarriesItsCauseIntoASeededFold) {
  FoldCommit memo;
  memo.eviction_observed = true;
  memo.eviction_cause = "volume";
  ASSERT_TRUE(source_->Commit(memo).ok());
  ArtifactManifest m = Export();
  auto read = ReadArtifactManifest(*to_, m.artifact_id, {});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(read->eviction_observed);
  EXPECT_EQ(read->eviction_cause, "volume");

  auto fold = NewMemoryFold();
  ASSERT_TRUE(SeedFold(*fold, *to_, {}).ok());
  EXPECT_TRUE(fold->ReadMeta()->eviction_observed);
  EXPECT_EQ(fold->ReadMeta()->eviction_cause, "volume");
  TestDir dir;
  {
    auto rocks = OpenRocksFold(dir.path() + "/fold");
    ASSERT_TRUE(rocks.ok()) << rocks.status().ToString();
    ASSERT_TRUE(SeedFold(**rocks, *to_, {}).ok());
  }
  auto rocks = OpenRocksFold(dir.path() + "/fold");
  ASSERT_TRUE(rocks.ok()) << rocks.status().ToString();
  EXPECT_TRUE((*rocks)->ReadMeta()->eviction_observed);
  EXPECT_EQ((*rocks)->ReadMeta()->eviction_cause, "volume");

  RewriteManifest(m.artifact_id, [](wire::Manifest* w) { w->clear_eviction_cause(); });
  read = ReadArtifactManifest(*to_, m.artifact_id, {});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(read->eviction_observed);
  EXPECT_EQ(read->eviction_cause, kEvictionCauseUnknown);
}

// Into an empty RocksDB fold a seed stages every entry and commits them
// with the cursor in one step (SST ingestion): the same fold as a seed
// through commits, nothing staged left behind, and it survives a reopen.
TEST_F(ArtifactTest, SeedIntoARocksFoldLoadsEverythingInOneStep) {
  ArtifactManifest m = Export();
  TestDir dir;
  const std::string path = dir.path() + "/fold";
  auto through_commits = NewMemoryFold();
  ASSERT_TRUE(SeedFold(*through_commits, *to_, {}).ok());
  {
    auto fold = OpenRocksFold(path);
    ASSERT_TRUE(fold.ok()) << fold.status().ToString();
    auto seeded = SeedFold(**fold, *to_, {});
    ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  }
  auto fold = OpenRocksFold(path);
  ASSERT_TRUE(fold.ok()) << fold.status().ToString();
  EXPECT_EQ(LiveEntries(**fold), LiveEntries(*source_));
  FoldMeta meta = *(*fold)->ReadMeta();
  EXPECT_EQ(meta, *through_commits->ReadMeta());
  EXPECT_EQ(meta.cursor, m.cursor);
  EXPECT_EQ(meta.live_keys, m.entry_count);
  EXPECT_EQ(meta.entries, m.entry_count);
  EXPECT_FALSE(fs::exists(path + "/kvfold-load"));
  // And it takes commits as any fold.
  FoldCommit next;
  next.entries["k1000"] = Entry{m.cursor + 1, true, ""};
  next.cursor = m.cursor + 1;
  ASSERT_TRUE((*fold)->Commit(next).ok());
  EXPECT_EQ((*fold)->ReadMeta()->live_keys, m.entry_count - 1);
}

// An unfinished seed (left by a build that seeded through commits) is
// discarded and replaced by the loader's one step.
TEST_F(ArtifactTest, ALoadedSeedDiscardsAnUnfinishedOne) {
  ArtifactManifest m = Export();
  TestDir dir;
  auto fold = OpenRocksFold(dir.path() + "/fold");
  ASSERT_TRUE(fold.ok()) << fold.status().ToString();
  FoldCommit unfinished;
  unfinished.entries["stale"] = Entry{3, false, "from an older artifact"};
  unfinished.seeding = "older-artifact";
  ASSERT_TRUE((*fold)->Commit(unfinished).ok());
  SeedOptions o;
  o.discard_unfinished = true;
  auto seeded = SeedFold(**fold, *to_, o);
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(LiveEntries(**fold), LiveEntries(*source_));
  const FoldMeta meta = *(*fold)->ReadMeta();
  EXPECT_EQ(meta.seeding, "");
  EXPECT_EQ(meta.cursor, m.cursor);
  EXPECT_EQ(meta.entries, m.entry_count);
}

// Issue 35: the manifest's fold digest names the (key, revision) pairs the
// chunks must hold. A manifest edited and re-checksummed to disagree (or an
// exporter that lost an entry) is refused by verify and seed, and the fold
// is untouched. Mutant fold-digest-ignored accepts it.
TEST_F(ArtifactTest, AManifestWhoseFoldDigestDisagreesIsRefused) {
  ArtifactManifest m = Export();
  ASSERT_EQ(m.fold_digest.size(), 32u);
  RewriteManifest(m.artifact_id,
                  [](wire::Manifest* w) { w->set_fold_digest(std::string(32, 'x')); });
  Status s = VerifyArtifact(*to_, m.artifact_id, {});
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("fold digest"), std::string::npos) << s.ToString();
  ExpectSeedRefused("fold digest");
  RewriteManifest(m.artifact_id, [](wire::Manifest* w) { w->set_fold_digest("short"); });
  EXPECT_TRUE(VerifyArtifact(*to_, m.artifact_id, {}).IsCorruption());
}

// Artifacts written before the digest still verify and seed.
TEST_F(ArtifactTest, AnArtifactWithoutAFoldDigestStillVerifiesAndSeeds) {
  ArtifactManifest m = Export();
  RewriteManifest(m.artifact_id, [](wire::Manifest* w) { w->clear_fold_digest(); });
  EXPECT_TRUE(VerifyArtifact(*to_, m.artifact_id, {}).ok());
  auto fold = NewMemoryFold();
  ASSERT_TRUE(SeedFold(*fold, *to_, {}).ok());
  EXPECT_EQ(LiveEntries(*fold), LiveEntries(*source_));
}

// Issue 35: a seed reads back what it wrote and checks it against the fold
// digest before the cursor lands, through commits (the memory fold) and
// through the loader (RocksDB). A store that keeps one entry at a wrong
// revision while reporting success leaves an unfinished seed, which the
// watcher refuses, and a re-run that discards it seeds right. Mutant
// seed-skip-readback gives the wrong fold its cursor.
TEST_F(ArtifactTest, ASeedThatWroteWrongIsCaughtByReadingBackAndGetsNoCursor) {
  ArtifactManifest m = Export();
  const std::string victim = LiveEntries(*source_).begin()->first;
  TestDir dir;
  auto rocks = OpenRocksFold(dir.path() + "/fold");
  ASSERT_TRUE(rocks.ok()) << rocks.status().ToString();
  std::unique_ptr<Fold> memory = NewMemoryFold();
  for (Fold* inner : {memory.get(), rocks->get()}) {
    sim::FaultFold lying(*inner);
    lying.MisrememberRevisionOf(victim);
    auto seeded = SeedFold(lying, *to_, {});
    ASSERT_FALSE(seeded.ok());
    EXPECT_NE(seeded.status().message().find("read back"), std::string::npos)
        << seeded.status().ToString();
    const FoldMeta meta = *inner->ReadMeta();
    EXPECT_FALSE(meta.cursor.has_value());
    EXPECT_TRUE(meta.unfinished_seed());
    SeedOptions o;
    o.discard_unfinished = true;
    auto again = SeedFold(*inner, *to_, o);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(LiveEntries(*inner), LiveEntries(*source_));
    EXPECT_EQ(inner->ReadMeta()->cursor, m.cursor);
  }
}

// An unfinished seed discarded for an artifact without chunks, through
// commits: the discard lands before the read-back, which sees only the new
// (empty) seed, not the old one's entries.
TEST_F(ArtifactTest, DiscardingForAnEmptyArtifactPassesTheReadBack) {
  auto empty_source = SourceFold(0);
  auto m = ExportArtifact(*empty_source, *to_, ExportOptions{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(m->chunks.empty());
  auto fold = NewMemoryFold();
  FoldCommit unfinished;
  unfinished.entries["k1"] = Entry{3, false, "old"};
  unfinished.seeding = "00000000000000000001-aaaaaaaaaaaa";
  ASSERT_TRUE(fold->Commit(unfinished).ok());
  SeedOptions o;
  o.discard_unfinished = true;
  auto seeded = SeedFold(*fold, *to_, o);
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_TRUE(LiveEntries(*fold).empty());
  EXPECT_EQ(fold->ReadMeta()->cursor, m->cursor);
}

TEST_F(ArtifactTest, SeedRefusesANonEmptyFold) {
  Export();
  auto fold = SourceFold(3);
  auto m = SeedFold(*fold, *to_, {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("not empty"), std::string::npos);
}

// A first mirror whose delivery broke before any message leaves bucket,
// scope and identity but no entries and no cursor: still empty for a seed.
TEST_F(ArtifactTest, SeedFillsAFoldThatHasOnlyMetadata) {
  ArtifactManifest m = Export();
  FoldCommit first_run;
  first_run.bucket = "cfg";
  first_run.scope = std::vector<std::string>{""};
  first_run.stream_created = "2026-01-01T00:00:00Z";
  auto fold = NewMemoryFold();
  ASSERT_TRUE(fold->Commit(first_run).ok());
  auto seeded = SeedFold(*fold, *to_, {});
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(LiveEntries(*fold), LiveEntries(*source_));
  EXPECT_EQ(fold->ReadMeta()->cursor, m.cursor);

  // Its recorded bucket still counts: an artifact of another is refused.
  auto other = NewMemoryFold();
  first_run.bucket = "other";
  ASSERT_TRUE(other->Commit(first_run).ok());
  auto refused = SeedFold(*other, *to_, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("is of bucket cfg, not other"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(other->ReadMeta()->entries, 0u);
}

TEST_F(ArtifactTest, TruncatedChunk) {
  ArtifactManifest m = Export();
  const std::string p = Path(m.chunks[1].name);
  std::string bytes = ReadWholeFile(p);
  WriteFile(p, bytes.substr(0, bytes.size() / 2));
  ExpectSeedRefused("chunk 1 (" + m.chunks[1].name + ") of artifact " + m.artifact_id + " is " +
                    std::to_string(bytes.size() / 2) + " bytes; the manifest says");
}

TEST_F(ArtifactTest, FlippedByteInAChunk) {
  ArtifactManifest m = Export();
  const std::string p = Path(m.chunks[2].name);
  std::string bytes = ReadWholeFile(p);
  bytes[bytes.size() / 2] ^= 0x40;
  WriteFile(p, bytes);
  ExpectSeedRefused("chunk 2 (" + m.chunks[2].name + ") of artifact " + m.artifact_id +
                    " does not match its SHA-256");
  EXPECT_FALSE(VerifyArtifact(*to_, m.artifact_id, {}).ok());
}

TEST_F(ArtifactTest, MissingChunk) {
  ArtifactManifest m = Export();
  fs::remove(Path(m.chunks.back().name));
  ExpectSeedRefused("chunk " + std::to_string(m.chunks.size() - 1) + " (" + m.chunks.back().name +
                    ") of artifact " + m.artifact_id + " is missing");
}

// Every single flipped byte of a (small) manifest is caught, with an error
// that names the manifest, and nothing reaches the fold.
TEST_F(ArtifactTest, FlippedByteInEveryPositionOfTheManifest) {
  source_ = SourceFold(3);
  ArtifactManifest m = Export();
  const std::string p = Path(m.artifact_id + "/manifest");
  const std::string good = ReadWholeFile(p);
  ASSERT_LT(good.size(), 2000u);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    WriteFile(p, bad);
    auto fold = NewMemoryFold();
    auto seeded = SeedFold(*fold, *to_, {});
    ASSERT_FALSE(seeded.ok()) << "flip at " << i << " went unnoticed";
    EXPECT_TRUE(seeded.status().IsCorruption()) << i << ": " << seeded.status().ToString();
    EXPECT_NE(seeded.status().message().find("manifest of artifact " + m.artifact_id),
              std::string::npos)
        << seeded.status().ToString();
    EXPECT_EQ(*fold->ReadMeta(), *NewMemoryFold()->ReadMeta());  // untouched
  }
  WriteFile(p, good);
  EXPECT_TRUE(VerifyArtifact(*to_, m.artifact_id, {}).ok());
}

TEST_F(ArtifactTest, WrongBucket) {
  Export();
  SeedOptions o;
  o.expected_bucket = "other";
  ExpectSeedRefused("is of bucket cfg, not other", o);
}

TEST_F(ArtifactTest, UnknownNewerSchemaNamesBothVersions) {
  ArtifactManifest m = Export();
  RewriteManifest(m.artifact_id, [](wire::Manifest* pm) {
    pm->set_schema_version(7);
    pm->set_min_reader_version(5);
  });
  ExpectSeedRefused(
      "has schema version 7 and needs a reader of schema 5 or newer; this kvfold "
      "reads schema " +
      std::to_string(kArtifactSchemaVersion));
}

TEST_F(ArtifactTest, MissingScopeIsRefused) {
  ArtifactManifest m = Export();
  RewriteManifest(m.artifact_id, [](wire::Manifest* pm) {
    pm->set_has_scope(false);
    pm->clear_scope();
  });
  ExpectSeedRefused("records no scope");
}

// An empty identity would turn off the stream-identity check, an empty
// bucket would make the fold accept any bucket, and a scope not in canonical
// form would not compare equal to the watch's: all refused as corrupt.
TEST_F(ArtifactTest, ManifestWithoutIdentityOrCanonicalScopeIsRefused) {
  ArtifactManifest m = Export();
  const std::vector<std::pair<std::function<void(wire::Manifest*)>, std::string>> cases = {
      {[](wire::Manifest* pm) { pm->set_bucket(""); }, "records no bucket"},
      {[](wire::Manifest* pm) { pm->set_stream_created(""); }, "records no stream identity"},
      {[](wire::Manifest* pm) {
         pm->clear_scope();
         pm->add_scope("k1");
         pm->add_scope("k");
       },
       "not a valid scope in canonical form"},
      {[](wire::Manifest* pm) { pm->clear_scope(); }, "not a valid scope in canonical form"},
      {[](wire::Manifest* pm) {
         pm->clear_scope();
         pm->add_scope("..");
       },
       "not a valid scope in canonical form"},
  };
  const std::string original = ReadWholeFile(Path(m.artifact_id + "/manifest"));
  for (const auto& [edit, needle] : cases) {
    SCOPED_TRACE(needle);
    WriteFile(Path(m.artifact_id + "/manifest"), original);
    RewriteManifest(m.artifact_id, edit);
    ExpectSeedRefused(needle);
    auto fold = NewMemoryFold();
    EXPECT_TRUE(SeedFold(*fold, *to_, {}).status().IsCorruption());
  }
}

// Naming a trusted key requires a signature by it: stripping the signature
// must not be a way past the trust check.
TEST_F(ArtifactTest, TrustedKeyAloneRequiresASignature) {
  auto [priv, pub] = MakeKeyPair(dir_.path(), "exporter");
  ArtifactManifest m = Export();
  SeedOptions o;
  o.verify.trusted_key_files = {pub};
  ExpectSeedRefused("is unsigned, and a signature is required", o);
  EXPECT_TRUE(VerifyArtifact(*to_, m.artifact_id, o.verify).IsFailedPrecondition());
}

TEST_F(ArtifactTest, SignedArtifactsAndTrust) {
  auto [priv, pub] = MakeKeyPair(dir_.path(), "exporter");
  auto [other_priv, other_pub] = MakeKeyPair(dir_.path(), "stranger");
  ExportOptions eo;
  eo.sign_key_file = priv;
  ArtifactManifest m = Export(eo);
  EXPECT_TRUE(m.is_signed);

  SeedOptions trusted;
  trusted.verify.trusted_key_files = {pub};
  trusted.verify.require_signature = true;
  auto fold = NewMemoryFold();
  ASSERT_TRUE(SeedFold(*fold, *to_, trusted).ok());

  SeedOptions untrusted;
  untrusted.verify.trusted_key_files = {other_pub};
  untrusted.verify.require_signature = true;
  ExpectSeedRefused("which is not among the trusted keys", untrusted);

  // A signature over a manifest someone edited (and re-framed) fails.
  RewriteManifest(m.artifact_id, [](wire::Manifest* pm) { pm->set_cursor(pm->cursor() + 1); });
  ExpectSeedRefused("carries a signature that does not verify", trusted);
}

TEST_F(ArtifactTest, UnsignedWhenRequired) {
  auto [priv, pub] = MakeKeyPair(dir_.path(), "exporter");
  Export();
  SeedOptions o;
  o.verify.trusted_key_files = {pub};
  o.verify.require_signature = true;
  ExpectSeedRefused("is unsigned, and a signature is required", o);
}

TEST_F(ArtifactTest, TraversalNamesAreRefused) {
  for (const char* name :
       {"../escape", "a/../../etc/passwd", "/abs", "a//b", ".", "a/./b", "bad name", "a\\b"}) {
    EXPECT_TRUE(to_->Put(name, "x").IsInvalidArgument()) << name;
    EXPECT_TRUE(to_->Get(name, 1 << 20).status().IsInvalidArgument()) << name;
  }
  EXPECT_FALSE(fs::exists(dir_.path() + "/escape"));
  SeedOptions o;
  o.artifact_id = "../../etc";
  ExpectSeedRefused("path traversal", o);
  // A manifest that points a chunk outside its artifact is refused too.
  ArtifactManifest m = Export();
  RewriteManifest(m.artifact_id,
                  [](wire::Manifest* pm) { pm->mutable_chunks(0)->set_name("../x"); });
  ExpectSeedRefused("outside the artifact");
}

// Only an exporter creates a location; a reader of a missing one is told
// so and nothing is created.
TEST_F(ArtifactTest, AMissingDirectoryIsNotFoundAndNotCreated) {
  const std::string missing = dir_.path() + "/typo";
  auto t = OpenTransport("dir:" + missing, ConnectOptions{});
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(t.status().IsNotFound()) << t.status().ToString();
  EXPECT_NE(t.status().message().find("no artifact directory at " + missing), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(missing));
  auto created = OpenTransport("dir:" + missing, ConnectOptions{},
                               TransportOptions{.create_if_missing = true, .s3 = {}});
  ASSERT_TRUE(created.ok());
  EXPECT_TRUE(std::filesystem::is_directory(missing));
}

TEST_F(ArtifactTest, ListInspectAndPruneKeepThePointer) {
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    FoldCommit c;
    c.entries["k" + std::to_string(i)] = Entry{static_cast<uint64_t>(400 + i), false, "v"};
    c.cursor = 400 + i;
    ASSERT_TRUE(source_->Commit(c).ok());
    ids.push_back(Export().artifact_id);
  }
  auto all = ListArtifacts(*to_, nullptr);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ(all->back().artifact_id, ids.back());
  std::vector<std::string> removed;
  // Young artifacts are kept whatever --keep says: a seed may be reading one.
  ASSERT_TRUE(PruneArtifacts(*to_, PruneOptions{.keep = 1}, &removed).ok());
  EXPECT_TRUE(removed.empty());
  EXPECT_EQ(ListArtifacts(*to_, nullptr)->size(), 4u);
  ASSERT_TRUE(PruneArtifacts(*to_, PruneOptions{.keep = 2, .min_age = {}}, &removed).ok());
  EXPECT_EQ(removed, (std::vector<std::string>{ids[1], ids[0]}));
  EXPECT_EQ(ListArtifacts(*to_, nullptr)->size(), 2u);
  EXPECT_FALSE(fs::exists(Path(ids[0])));
  ASSERT_TRUE(PruneArtifacts(*to_, PruneOptions{.keep = 1, .min_age = {}}, nullptr).ok());
  EXPECT_EQ(*LatestArtifactId(*to_), ids.back());
  EXPECT_TRUE(VerifyArtifact(*to_, ids.back(), {}).ok());
}

TEST_F(ArtifactTest, AnOlderExportNeverMovesThePointerBack) {
  ArtifactManifest newer = Export();
  auto old_fold = SourceFold(10);  // cursor 15 < 305
  auto m = ExportArtifact(*old_fold, *to_, ExportOptions{});
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().IsAlreadyExists()) << m.status().ToString();
  EXPECT_NE(m.status().message().find("is not newer"), std::string::npos);
  // Refused before writing: no orphan artifact.
  EXPECT_EQ(ListArtifacts(*to_, nullptr)->size(), 1u);
  EXPECT_EQ(*LatestArtifactId(*to_), newer.artifact_id);
}

// The latest pointer is a hint anyone who can write the location can
// rewrite. One at or past the fold's cursor would make every export
// "unchanged": it must name a valid artifact that agrees with it, or the
// export replaces it (issue 36, item 3). Mutants export-trust-pointer and
// pointer-keep-invalid leave the forged pointer in place.
TEST_F(ArtifactTest, APointerThatNamesNoValidArtifactIsReplacedByTheNextExport) {
  const ArtifactManifest real = Export();
  struct Forgery {
    std::string what;
    ArtifactPointer pointer;
  };
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  for (const Forgery& f : std::vector<Forgery>{
           {"no such artifact, highest cursor", {"forged", max, "cfg", real.stream_created}},
           {"no such artifact, the fold's cursor",
            {"forged", real.cursor, "cfg", real.stream_created}},
           {"a real artifact, a cursor it does not have",
            {real.artifact_id, real.cursor + 1000, "cfg", real.stream_created}},
           {"another bucket's name on nothing", {"forged", max, "other", "x"}},
           {"a real artifact, another stream's identity",
            {real.artifact_id, real.cursor, "cfg", "2020-01-01T00:00:00Z"}},
           // Its manifest's name is too long to be an object: InvalidArgument.
           {"an id no manifest can have", {std::string(250, 'i'), max, "cfg", real.stream_created}},
       }) {
    SCOPED_TRACE(f.what);
    WriteFile(Path("LATEST"), artifact::EncodePointer(f.pointer));
    std::string why;
    ExportOptions o;
    o.replaced_pointer = [&why](const std::string& w) { why = w; };
    const ArtifactManifest next = Export(o);
    ASSERT_FALSE(next.artifact_id.empty());
    EXPECT_EQ(*LatestArtifactId(*to_), next.artifact_id);
    EXPECT_NE(why.find("named artifact " + f.pointer.artifact_id), std::string::npos) << why;
  }
  // A valid artifact ahead of this fold (another node's) stops it, as before.
  auto ahead = SourceFold(400);
  auto m = ExportArtifact(*ahead, *to_, ExportOptions{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto refused = ExportArtifact(*source_, *to_, ExportOptions{});
  EXPECT_TRUE(refused.status().IsAlreadyExists()) << refused.status().ToString();
  EXPECT_EQ(*LatestArtifactId(*to_), m->artifact_id);
}

// A transport that answers reads of one object with `fault` for the next
// `times` reads: the store's denials and hiccups.
class FlakyReads final : public Transport {
 public:
  FlakyReads(Transport& inner, std::string name, Status fault, int times)
      : inner_(inner), name_(std::move(name)), faults_(static_cast<size_t>(times), fault) {}
  // The faults in turn, one per read, then real reads.
  FlakyReads(Transport& inner, std::string name, std::vector<Status> faults)
      : inner_(inner), name_(std::move(name)), faults_(std::move(faults)) {}
  const std::string& location() const override { return inner_.location(); }
  Status Put(const std::string& n, std::string_view b) override { return inner_.Put(n, b); }
  StatusOr<std::string> Get(const std::string& n, uint64_t max_bytes) override {
    if (n == name_ && next_ < faults_.size()) return faults_[next_++];
    return inner_.Get(n, max_bytes);
  }
  Status Remove(const std::string& n) override { return inner_.Remove(n); }
  StatusOr<std::vector<std::string>> List() override { return inner_.List(); }
  StatusOr<std::optional<ArtifactPointer>> ReadPointer() override { return inner_.ReadPointer(); }
  Status AdvancePointer(const ArtifactPointer& p) override { return inner_.AdvancePointer(p); }

 private:
  Transport& inner_;
  std::string name_;
  std::vector<Status> faults_;
  size_t next_ = 0;
};

// Only a read that proves the named manifest absent or damaged, twice,
// makes a pointer invalid: a denial (an S3 403 reads as FailedPrecondition),
// a manifest of a newer schema, or one missing read leaves a valid newer
// artifact named (replacing it would move the pointer back).
TEST_F(ArtifactTest, APointerToAValidArtifactIsNotReplacedOnAReadThatProvesNothing) {
  auto ahead = SourceFold(400);
  auto newer = ExportArtifact(*ahead, *to_, ExportOptions{});
  ASSERT_TRUE(newer.ok()) << newer.status().ToString();
  for (const Status& fault : {Status::FailedPrecondition("HTTP 403 AccessDenied"),
                              Status::Unavailable("timeout"), Status::NotFound("gone?")}) {
    SCOPED_TRACE(fault.ToString());
    FlakyReads flaky(*to_, newer->artifact_id + "/manifest", fault, 1);
    auto m = ExportArtifact(*source_, flaky, ExportOptions{});
    EXPECT_TRUE(m.status().IsAlreadyExists()) << m.status().ToString();
    EXPECT_EQ(*LatestArtifactId(*to_), newer->artifact_id);
  }
  // Absent, then unreachable, on each check: no two reads agree, nothing
  // is proven.
  FlakyReads mixed(*to_, newer->artifact_id + "/manifest",
                   {Status::NotFound("gone?"), Status::Unavailable("timeout"),
                    Status::NotFound("gone?"), Status::Unavailable("timeout")});
  EXPECT_TRUE(ExportArtifact(*source_, mixed, ExportOptions{}).status().IsAlreadyExists());
  EXPECT_EQ(*LatestArtifactId(*to_), newer->artifact_id);
  // Gone on every read (both before the chunks and again before the swap):
  // replaced. Back after the first two, it is judged valid again and kept.
  FlakyReads back(*to_, newer->artifact_id + "/manifest", Status::NotFound("no manifest"), 2);
  EXPECT_TRUE(ExportArtifact(*source_, back, ExportOptions{}).status().IsAlreadyExists());
  EXPECT_EQ(*LatestArtifactId(*to_), newer->artifact_id);
  FlakyReads gone(*to_, newer->artifact_id + "/manifest", Status::NotFound("no manifest"), 100);
  auto m = ExportArtifact(*source_, gone, ExportOptions{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*LatestArtifactId(*to_), m->artifact_id);
}

// A pointer of another bucket naming nothing stops every export as surely
// as one ahead of the fold: it is checked whatever its cursor.
TEST_F(ArtifactTest, APointerOfAnotherBucketNamingNothingIsReplacedAtAnyCursor) {
  WriteFile(Path("LATEST"), artifact::EncodePointer(ArtifactPointer{"nope", 1, "other", "t0"}));
  auto m = ExportArtifact(*source_, *to_, ExportOptions{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*LatestArtifactId(*to_), m->artifact_id);
}

// A restore that trusts a signing key's own file (a mirror with --sign-key
// trusts its own key) refuses an unsigned artifact and one signed by
// another key.
TEST_F(ArtifactTest, TrustingTheSigningKeyRefusesUnsignedAndForeignArtifacts) {
  auto [priv, pub] = MakeKeyPair(dir_.path(), "own");
  auto [other_priv, other_pub] = MakeKeyPair(dir_.path(), "other");
  VerifyOptions trusting;
  trusting.trusted_key_files = {priv};
  const ArtifactManifest unsigned_one = Export();
  EXPECT_TRUE(ReadArtifactManifest(*to_, unsigned_one.artifact_id, trusting)
                  .status()
                  .IsFailedPrecondition());
  ExportOptions foreign;
  foreign.sign_key_file = other_priv;
  auto bigger = SourceFold(350);
  auto f = ExportArtifact(*bigger, *to_, foreign);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(ReadArtifactManifest(*to_, f->artifact_id, trusting).status().IsFailedPrecondition());
  ExportOptions mine;
  mine.sign_key_file = priv;
  auto biggest = SourceFold(380);
  auto ok = ExportArtifact(*biggest, *to_, mine);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(ReadArtifactManifest(*to_, ok->artifact_id, trusting).ok());
}

// Where the exporter signs, a pointer must name an artifact signed by its
// key or a trusted one: an unsigned or stranger-signed one ahead of the
// fold is replaced; one signed by a trusted key stays.
TEST_F(ArtifactTest, ASigningExporterReplacesAPointerToAnArtifactItDoesNotTrust) {
  auto [priv, pub] = MakeKeyPair(dir_.path(), "exporter");
  auto [other_priv, other_pub] = MakeKeyPair(dir_.path(), "peer");
  auto [stranger_priv, stranger_pub] = MakeKeyPair(dir_.path(), "stranger");
  ExportOptions mine;
  mine.sign_key_file = priv;
  mine.trusted_key_files = {other_pub};
  auto ahead = SourceFold(400);
  for (const std::string& key : {std::string(), stranger_priv}) {
    SCOPED_TRACE(key.empty() ? "unsigned" : "a stranger's key");
    ExportOptions theirs;
    theirs.sign_key_file = key;
    auto m = ExportArtifact(*ahead, *to_, theirs);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_EQ(*LatestArtifactId(*to_), m->artifact_id);
    const ArtifactManifest replaced = Export(mine);
    EXPECT_EQ(*LatestArtifactId(*to_), replaced.artifact_id);
  }
  // An exporter that does not sign but names trusted keys judges the same.
  {
    auto m = ExportArtifact(*ahead, *to_, ExportOptions{});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ExportOptions trusting;
    trusting.trusted_key_files = {other_pub};
    const ArtifactManifest replaced = Export(trusting);
    EXPECT_EQ(*LatestArtifactId(*to_), replaced.artifact_id);
  }
  ExportOptions peer;
  peer.sign_key_file = other_priv;
  auto m = ExportArtifact(*ahead, *to_, peer);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(ExportArtifact(*source_, *to_, mine).status().IsAlreadyExists());
  EXPECT_EQ(*LatestArtifactId(*to_), m->artifact_id);
}

// A restore or a seed that follows the pointer checks it against the
// manifest it names (mutant reader-trust-pointer).
TEST_F(ArtifactTest, ASeedRefusesAPointerThatDisagreesWithItsManifest) {
  const ArtifactManifest real = Export();
  WriteFile(Path("LATEST"), artifact::EncodePointer(ArtifactPointer{
                                real.artifact_id, real.cursor + 1000, "cfg", real.stream_created}));
  ExpectSeedRefused("was damaged or rewritten by hand");
  auto source = NewArtifactSource(*to_, VerifyOptions{});
  EXPECT_TRUE(source->Newest().status().IsCorruption());
  // The same artifact and cursor under another stream's identity.
  WriteFile(Path("LATEST"), artifact::EncodePointer(ArtifactPointer{
                                real.artifact_id, real.cursor, "cfg", "2020-01-01T00:00:00Z"}));
  ExpectSeedRefused("was damaged or rewritten by hand");
  EXPECT_TRUE(source->Newest().status().IsCorruption());
  SeedOptions named;
  named.artifact_id = real.artifact_id;  // naming it explicitly still works
  auto fold = NewMemoryFold();
  EXPECT_TRUE(SeedFold(*fold, *to_, named).ok());
}

// Anyone who can open the directory's .lock can hold it: the pointer swap
// waits a bounded time, then fails the round (the mirror's shutdown never
// waits on it) and says how to find the holder.
TEST(PointerLockTest, AHeldLockIsWaitedOnForABoundedTime) {
  TestDir dir;
  const std::string path = dir.path() + "/.lock";
  const int held = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  const auto start = std::chrono::steady_clock::now();
  auto lock = artifact::PosixFileOps()->LockFile(path, std::chrono::milliseconds(200));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(lock.ok());
  EXPECT_TRUE(lock.status().IsUnavailable()) << lock.status().ToString();
  EXPECT_NE(lock.status().message().find("fuser"), std::string::npos);
  EXPECT_GE(took, std::chrono::milliseconds(200));
  // Polled in short steps: it gives up near its timeout, not a growing
  // pause later (a doubling without a cap would end past 3 s here).
  const auto again = std::chrono::steady_clock::now();
  EXPECT_FALSE(artifact::PosixFileOps()->LockFile(path, std::chrono::milliseconds(2000)).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - again, std::chrono::milliseconds(2800));
  ::close(held);  // released: taken at once
  EXPECT_TRUE(artifact::PosixFileOps()->LockFile(path, std::chrono::milliseconds(200)).ok());
}

TEST(PointerRuleTest, OnlyForwardWithinOneStream) {
  ArtifactPointer a{"a", 10, "b", "t1"};
  EXPECT_TRUE(core::CheckPointerAdvance(std::nullopt, a).ok());
  EXPECT_TRUE(core::CheckPointerAdvance(a, ArtifactPointer{"b", 11, "b", "t1"}).ok());
  EXPECT_FALSE(core::CheckPointerAdvance(a, ArtifactPointer{"b", 10, "b", "t1"}).ok());
  EXPECT_FALSE(core::CheckPointerAdvance(a, ArtifactPointer{"b", 9, "b", "t1"}).ok());
  EXPECT_FALSE(core::CheckPointerAdvance(a, ArtifactPointer{"b", 99, "b", "t2"}).ok());
  EXPECT_FALSE(core::CheckPointerAdvance(a, ArtifactPointer{"b", 99, "c", "t1"}).ok());
  // A pointer beyond the stream's head (restored from a backup: same
  // identity, shorter history) is replaced by an export that read that head
  // after reading this very pointer; by nothing else (issue 31, defect 4).
  auto behind = [](uint64_t cursor, std::string replaced, uint64_t head) {
    return ArtifactPointer{"b", cursor, "b", "t1",
                           ArtifactPointer::BeyondHead{std::move(replaced), head}};
  };
  EXPECT_TRUE(core::CheckPointerAdvance(a, behind(7, "a", 8)).ok());
  EXPECT_TRUE(core::CheckPointerAdvance(a, behind(8, "a", 8)).ok());
  EXPECT_TRUE(core::CheckPointerAdvance(a, behind(7, "other", 8)).IsAlreadyExists());
  EXPECT_TRUE(core::CheckPointerAdvance(a, behind(7, "a", 10)).IsAlreadyExists());
  EXPECT_TRUE(core::CheckPointerAdvance(a, behind(9, "a", 8)).IsAlreadyExists());
  EXPECT_FALSE(core::CheckPointerAdvance(
                   a, ArtifactPointer{"b", 7, "b", "t2", ArtifactPointer::BeyondHead{"a", 8}})
                   .ok());
  // One found to name no valid artifact is replaced whatever its cursor and
  // bucket; only that very pointer (another exporter may have moved it).
  auto instead_of = [](std::string invalid) {
    ArtifactPointer p{"b", 3, "b", "t1"};
    p.replaces_invalid = std::move(invalid);
    return p;
  };
  EXPECT_TRUE(core::CheckPointerAdvance(a, instead_of("a")).ok());
  EXPECT_TRUE(core::CheckPointerAdvance(ArtifactPointer{"a", 99, "x", "t9"}, instead_of("a")).ok());
  EXPECT_TRUE(core::CheckPointerAdvance(a, instead_of("other")).IsAlreadyExists());
}

// Two exporters race on one directory: the pointer ends at the highest
// cursor and a reader never sees it go back.
TEST_F(ArtifactTest, ConcurrentExportersNeverMoveThePointerBackward) {
  RacePointer(
      [&] {
        return std::move(OpenTransport("dir:" + dir_.path() + "/arts", ConnectOptions{},
                                       TransportOptions{.create_if_missing = true, .s3 = {}}))
            .value();
      },
      200);
}

// A seed killed at any commit leaves a fold the watcher refuses, and a
// re-run finishes it to exactly the artifact.
TEST_F(ArtifactTest, SeedKilledAtEveryCommitFinishesOnReRun) {
  ArtifactManifest m = Export();
  const int commits = static_cast<int>(m.chunks.size()) + 1;
  for (int at = 1; at <= commits; ++at) {
    for (sim::Fault fault : {sim::Fault::kCrashBefore, sim::Fault::kCrashAfter}) {
      SCOPED_TRACE(std::string(sim::FaultName(fault)) + " at commit " + std::to_string(at));
      TestDir dir;
      FoldOptions fo;
      fo.sync = false;
      {
        auto inner = OpenRocksFold(dir.path() + "/fold", fo);
        sim::FaultFold fold(**inner);
        fold.Arm(at, fault);
        ASSERT_FALSE(SeedFold(fold, *to_, {}).ok());
      }
      auto fold = OpenRocksFold(dir.path() + "/fold", fo);
      auto meta = *(*fold)->ReadMeta();
      const bool finished = at == commits && fault == sim::Fault::kCrashAfter;
      if (!finished) {
        EXPECT_FALSE(meta.cursor.has_value());
        auto again = SeedFold(**fold, *to_, {});
        ASSERT_TRUE(again.ok()) << again.status().ToString();
      }
      EXPECT_EQ(LiveEntries(**fold), LiveEntries(*source_));
      EXPECT_EQ((*fold)->ReadMeta()->cursor, m.cursor);
      EXPECT_EQ((*fold)->ReadMeta()->seeding, "");
    }
  }
}

// Every key the fold holds travels (issue 31, defect 7): one folded from a
// raw publish to "$KV.cfg.user@x" is no valid KV key, yet it is part of the
// fold, and a seed or restore that silently lacked it would report success
// with a key missing. Such an artifact needs a schema-2 reader: an older
// one refuses it by name instead of calling it corrupt.
TEST_F(ArtifactTest, EveryKeyTheFoldHoldsIsCarried) {
  FoldCommit odd;
  odd.entries["user@x"] = Entry{3, false, "odd"};
  odd.entries["k1000 x"] = Entry{4, false, "odd"};
  ASSERT_TRUE(source_->Commit(odd).ok());
  std::vector<std::string> skipped;
  ExportOptions eo;
  eo.skipped_key = [&](std::string_view key, const Status&) { skipped.emplace_back(key); };
  ArtifactManifest m = Export(eo);
  EXPECT_TRUE(skipped.empty());
  EXPECT_EQ(m.min_reader_version, 2u);
  ASSERT_TRUE(VerifyArtifact(*to_, m.artifact_id, {}).ok());
  auto fold = NewMemoryFold();
  auto seeded = SeedFold(*fold, *to_, {});
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(LiveEntries(*fold), LiveEntries(*source_));
  EXPECT_TRUE(LiveEntries(*fold).contains("user@x"));
  // Labelled schema 1, the same chunks are corrupt: a schema-1 writer never
  // writes such a key.
  RewriteManifest(m.artifact_id, [](wire::Manifest* pm) {
    pm->set_schema_version(1);
    pm->set_min_reader_version(1);
  });
  ExpectSeedRefused("is not a valid key in the artifact's scope");
}

// Records are checked against the reader's chunk cap before they are
// appended: two large values go to two chunks, and one value larger than
// any chunk may hold fails the export with nothing published.
TEST_F(ArtifactTest, LargeValuesNeverMakeAChunkReadersRefuse) {
  auto big = NewMemoryFold();
  FoldCommit c;
  c.entries["a"] = Entry{1, false, std::string(30 << 20, 'a')};
  c.entries["b"] = Entry{2, false, std::string(40 << 20, 'b')};
  c.cursor = 2;
  c.bucket = "cfg";
  c.scope = std::vector<std::string>{""};
  c.stream_created = "2026-01-01T00:00:00Z";
  ASSERT_TRUE(big->Commit(c).ok());
  ExportOptions eo;
  eo.chunk_raw_bytes = artifact::kMaxChunkRawBytes / 2;
  auto m = ExportArtifact(*big, *to_, eo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->chunks.size(), 2u);
  for (const auto& chunk : m->chunks) EXPECT_LE(chunk.raw_size, artifact::kMaxChunkRawBytes);
  ASSERT_TRUE(VerifyArtifact(*to_, m->artifact_id, {}).ok());

  FoldCommit huge;
  huge.entries["c"] = Entry{3, false, std::string(artifact::kMaxChunkRawBytes, 'c')};
  huge.cursor = 3;
  ASSERT_TRUE(big->Commit(huge).ok());
  auto refused = ExportArtifact(*big, *to_, eo);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsInvalidArgument()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("key \"c\" holds a value of"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(*LatestArtifactId(*to_), m->artifact_id);
  EXPECT_EQ(*to_->List(), (std::vector<std::string>{m->chunks[0].name, m->chunks[1].name,
                                                    m->artifact_id + "/manifest"}));
}

// A prune on another node removed the artifact a seed was reading: the
// re-run says so and names the way out, and discarding the unfinished seed
// for the latest artifact lands in one commit (no key of the old seed
// survives it, whatever crashes around it).
TEST_F(ArtifactTest, SeedWhoseArtifactVanishedCanBeDiscardedForTheLatest) {
  ArtifactManifest old = Export();
  ASSERT_GE(old.chunks.size(), 3u);
  // The next artifact differs: one key of the old one is deleted.
  const std::string dropped = LiveEntries(*source_).begin()->first;
  FoldCommit next;
  next.entries[dropped] = Entry{400, true, ""};
  next.entries["new-key"] = Entry{401, false, "n"};
  next.cursor = 401;
  ASSERT_TRUE(source_->Commit(next).ok());

  for (sim::Fault fault : {sim::Fault::kNone, sim::Fault::kCrashBefore, sim::Fault::kCrashAfter}) {
    SCOPED_TRACE(sim::FaultName(fault));
    TestDir dir;
    auto to = OpenTransport("dir:" + dir.path() + "/arts", ConnectOptions{},
                            TransportOptions{.create_if_missing = true, .s3 = {}});
    ASSERT_TRUE(to.ok());
    ExportOptions eo;
    eo.chunk_raw_bytes = 2000;
    auto old_fold = SourceFold(300);
    auto first = ExportArtifact(*old_fold, **to, eo);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    auto fold = NewMemoryFold();
    {
      sim::FaultFold faulty(*fold);
      faulty.Arm(2, sim::Fault::kCrashBefore);  // one chunk of the old seed applied
      ASSERT_FALSE(SeedFold(faulty, **to, {}).ok());
    }
    ASSERT_EQ(fold->ReadMeta()->seeding, first->artifact_id);
    auto latest = ExportArtifact(*source_, **to, eo);
    ASSERT_TRUE(latest.ok());
    ASSERT_TRUE(PruneArtifacts(**to, PruneOptions{.keep = 1, .min_age = {}}, nullptr).ok());

    auto rerun = SeedFold(*fold, **to, {});
    ASSERT_FALSE(rerun.ok());
    EXPECT_TRUE(rerun.status().IsNotFound()) << rerun.status().ToString();
    EXPECT_NE(rerun.status().message().find("which is gone from"), std::string::npos);
    EXPECT_NE(rerun.status().message().find("--discard-unfinished"), std::string::npos);

    SeedOptions discard;
    discard.discard_unfinished = true;
    if (fault != sim::Fault::kNone) {
      sim::FaultFold faulty(*fold);
      faulty.Arm(1, fault);
      ASSERT_FALSE(SeedFold(faulty, **to, discard).ok());
      // All of the old seed, or none of it: never a mix.
      const auto entries = LiveEntries(*fold);
      if (fault == sim::Fault::kCrashBefore) {
        EXPECT_EQ(fold->ReadMeta()->seeding, first->artifact_id);
      } else {
        EXPECT_EQ(fold->ReadMeta()->seeding, latest->artifact_id);
        EXPECT_EQ(entries.size(), latest->chunks[0].entry_count);
        EXPECT_FALSE(entries.contains(dropped));
      }
    }
    auto seeded = SeedFold(*fold, **to, discard);
    ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
    EXPECT_EQ(seeded->artifact_id, latest->artifact_id);
    EXPECT_EQ(LiveEntries(*fold), LiveEntries(*source_));
    EXPECT_EQ(fold->ReadMeta()->cursor, 401u);
    EXPECT_EQ(fold->ReadMeta()->seeding, "");
  }
}

TEST(ChunkCodecTest, RecordBytesIsWhatAppendRecordAdds) {
  for (const auto& [key, rev, value] : std::vector<std::tuple<std::string, uint64_t, std::string>>{
           {"a", 1, "x"},
           {"k", 0, ""},
           {std::string(200, 'k'), uint64_t{1} << 40, ""},
           {"b", 300, std::string(70000, 'v')}}) {
    std::string raw;
    artifact::AppendRecord(&raw, key, rev, value);
    EXPECT_EQ(artifact::RecordBytes(key, rev, value), raw.size()) << key.size() << " " << rev;
  }
}

TEST(ChunkCodecTest, RecordsRoundTripAndDamageIsCaught) {
  std::string raw;
  artifact::AppendRecord(&raw, "a", 1, "x");
  artifact::AppendRecord(&raw, "b", 2, std::string(300, 'y'), 1'700'000'000'123'456'789);
  EXPECT_EQ(raw.size(),
            artifact::RecordBytes("a", 1, "x") +
                artifact::RecordBytes("b", 2, std::string(300, 'y'), 1'700'000'000'123'456'789));
  std::vector<std::string> keys;
  std::vector<int64_t> deadlines;
  ASSERT_TRUE(artifact::ForEachRecord(
                  raw, "c",
                  [&](std::string_view k, uint64_t, std::string_view, int64_t expires_ns) {
                    keys.emplace_back(k);
                    deadlines.push_back(expires_ns);
                    return Status::OK();
                  })
                  .ok());
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(deadlines, (std::vector<int64_t>{0, 1'700'000'000'123'456'789}));
  // The deadline is ChunkRecord's field 4, as protobuf writes it.
  wire::ChunkRecord pb;
  pb.set_key("b");
  pb.set_revision(2);
  pb.set_value(std::string(300, 'y'));
  pb.set_expires_ns(1'700'000'000'123'456'789);
  EXPECT_NE(raw.find(pb.SerializeAsString()), std::string::npos);
  // A negative deadline (int64 on the wire, from some other writer) is no
  // deadline: never a key that expired before the Unix epoch.
  pb.set_expires_ns(-5);
  const std::string body = pb.SerializeAsString();
  ASSERT_LT(body.size(), 0x4000u);
  std::string negative;
  negative.push_back(static_cast<char>(0x80 | (body.size() & 0x7f)));
  negative.push_back(static_cast<char>(body.size() >> 7));
  negative += body;
  std::vector<int64_t> read;
  ASSERT_TRUE(artifact::ForEachRecord(negative, "c",
                                      [&](std::string_view, uint64_t, std::string_view, int64_t e) {
                                        read.push_back(e);
                                        return Status::OK();
                                      })
                  .ok());
  EXPECT_EQ(read, (std::vector<int64_t>{0}));
  auto none = [](std::string_view, uint64_t, std::string_view, int64_t) { return Status::OK(); };
  EXPECT_TRUE(artifact::ForEachRecord(raw.substr(0, raw.size() - 1), "c", none).IsCorruption());
  const std::string z = artifact::Compress(raw);
  EXPECT_EQ(*artifact::Decompress(z, raw.size(), "c"), raw);
  EXPECT_TRUE(artifact::Decompress(z, raw.size() + 1, "c").status().IsCorruption());
  EXPECT_TRUE(
      artifact::Decompress(z.substr(0, z.size() - 3), raw.size(), "c").status().IsCorruption());
  EXPECT_TRUE(artifact::Decompress(z, uint64_t{1} << 40, "c").status().IsCorruption());
}

}  // namespace
}  // namespace kvfold
