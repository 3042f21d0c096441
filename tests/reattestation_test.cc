// Re-attestation: an exporter whose fold still holds exactly the latest
// artifact's records at a later cursor writes a new manifest naming that
// artifact's chunks, with its own cursor and anchor, instead of new chunks.
// Each test here fails when one of its rules is switched off (mutation
// points reattest-*, reader-trust-attested-chunks, reader-owner-prefix-loose,
// prune-drop-attested, prune-attested-by-latest-only,
// export-trust-attested-chunks, exporter-trust-needs-sign-key).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "artifact.pb.h"
#include "artifact/manifest_codec.h"
#include "fold_view.h"
#include "kvfold/artifact.h"
#include "test_dir.h"
#include "test_keys.h"

namespace kvfold {
namespace {

namespace fs = std::filesystem;

// A fold of `keys` entries (every seventh a tombstone) at cursor keys + 5;
// `value` makes the values differ between folds of the same revisions.
std::unique_ptr<Fold> MirroredFold(int keys, const std::string& value = "value-") {
  auto fold = NewMemoryFold();
  FoldCommit c;
  for (int i = 0; i < keys; ++i) {
    c.entries["k" + std::to_string(1000 + i)] = Entry{static_cast<uint64_t>(i + 1), i % 7 == 3,
                                                      i % 7 == 3 ? "" : value + std::to_string(i)};
  }
  c.cursor = keys + 5;
  c.cursor_time_ns = 1'000'000'000;
  c.bucket = "cfg";
  c.scope = std::vector<std::string>{""};
  c.stream_created = "2026-01-01T00:00:00Z";
  EXPECT_TRUE(fold->Commit(c).ok());
  return fold;
}

// The fold's cursor moves past messages that changed no live entry (out of
// its scope, say), with a fresh anchor.
void MovePast(Fold& fold, uint64_t cursor, int64_t anchor_ns) {
  FoldCommit c;
  c.cursor = cursor;
  c.cursor_time_ns = anchor_ns;
  ASSERT_TRUE(fold.Commit(c).ok());
}

class ReattestationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = OpenTransport("dir:" + dir_.path() + "/arts", ConnectOptions{},
                           TransportOptions{.create_if_missing = true, .s3 = {}});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    to_ = std::move(t).value();
    fold_ = MirroredFold(300);
  }

  ArtifactManifest Export(Fold& fold, ExportOptions o = {}) {
    o.chunk_raw_bytes = 2000;  // several chunks
    auto m = ExportArtifact(fold, *to_, o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : ArtifactManifest{};
  }

  size_t Objects() {
    auto names = to_->List();
    EXPECT_TRUE(names.ok());
    return names.ok() ? names->size() : 0;
  }

  // Seeds a new fold from the latest artifact.
  std::unique_ptr<Fold> Seeded(SeedOptions o = {}) {
    auto fold = NewMemoryFold();
    auto m = SeedFold(*fold, *to_, o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return fold;
  }

  std::string Path(const std::string& name) { return dir_.path() + "/arts/" + name; }

  TestDir dir_;
  std::unique_ptr<Transport> to_;
  std::unique_ptr<Fold> fold_;
};

TEST_F(ReattestationTest, AFoldThatMovedOnlyPastUnchangedRecordsIsReattestedWithoutNewChunks) {
  const ArtifactManifest first = Export(*fold_);
  ASSERT_GT(first.chunks.size(), 1u);
  ASSERT_TRUE(first.attests.empty());
  const size_t objects = Objects();

  MovePast(*fold_, 400, 2'000'000'000);
  const ArtifactManifest again = Export(*fold_);
  EXPECT_EQ(again.attests, first.artifact_id);
  EXPECT_NE(again.artifact_id, first.artifact_id);
  EXPECT_EQ(again.cursor, 400u);
  EXPECT_EQ(again.cursor_time_ns, 2'000'000'000);
  EXPECT_EQ(again.min_reader_version, kArtifactSchemaAttestation);
  ASSERT_EQ(again.chunks.size(), first.chunks.size());
  EXPECT_EQ(again.chunks[0].name, first.chunks[0].name);
  EXPECT_EQ(again.fold_digest, first.fold_digest);
  EXPECT_EQ(Objects(), objects + 1) << "one new object: the manifest";
  EXPECT_EQ(*LatestArtifactId(*to_), again.artifact_id);
  EXPECT_TRUE(VerifyArtifact(*to_, again.artifact_id, {}).ok());

  auto seeded = Seeded();
  EXPECT_EQ(LiveEntries(*seeded), LiveEntries(*fold_));
  EXPECT_EQ(seeded->ReadMeta()->cursor, 400u);
  EXPECT_EQ(seeded->ReadMeta()->cursor_time_ns, 2'000'000'000);

  // A re-attestation of a re-attestation names the chunks' owner.
  MovePast(*fold_, 450, 3'000'000'000);
  const ArtifactManifest third = Export(*fold_);
  EXPECT_EQ(third.attests, first.artifact_id);
  EXPECT_EQ(third.cursor, 450u);

  // Unchanged since: nothing to publish.
  EXPECT_TRUE(ExportArtifact(*fold_, *to_, ExportOptions{}).status().IsAlreadyExists());
  // And switched off, the same export writes chunks.
  MovePast(*fold_, 460, 4'000'000'000);
  ExportOptions full;
  full.reattest = false;
  EXPECT_TRUE(Export(*fold_, full).attests.empty());
}

// The cheap gates (entry count, revisions no newer than the latest's
// cursor) pass here; only the fold digest tells these records apart.
TEST_F(ReattestationTest, AFoldWithOtherRecordsOfTheSameCountAndAgeIsExportedInFull) {
  Export(*fold_);
  auto other = MirroredFold(300);
  FoldCommit swap;
  swap.entries["k1000"] = Entry{301, true, ""};  // a delete, as a tombstone
  swap.entries["k0999"] = Entry{2, false, "v"};  // a key it never had, at an old revision
  swap.cursor = 310;
  ASSERT_TRUE(other->Commit(swap).ok());
  ASSERT_EQ(other->ReadMeta()->live_keys, fold_->ReadMeta()->live_keys);

  const ArtifactManifest m = Export(*other);
  EXPECT_TRUE(m.attests.empty());
  auto seeded = Seeded();
  EXPECT_EQ(LiveEntries(*seeded), LiveEntries(*other));
}

// A fold whose in-scope record changed exports in full.
TEST_F(ReattestationTest, AFoldThatChangedARecordIsExportedInFull) {
  Export(*fold_);
  FoldCommit put;
  put.entries["k1001"] = Entry{320, false, "new"};
  put.cursor = 330;
  ASSERT_TRUE(fold_->Commit(put).ok());
  const ArtifactManifest m = Export(*fold_);
  EXPECT_TRUE(m.attests.empty());
  EXPECT_EQ(LiveEntries(*Seeded()), LiveEntries(*fold_));
}

// The digest covers keys and revisions, not values: an exporter that signs
// re-attests only what its own or a trusted key signed, or a forged
// artifact of the same pairs and other values would go out under its
// signature.
TEST_F(ReattestationTest, ASigningExporterReattestsOnlyWhatItsKeysSigned) {
  auto [priv, pub] = MakeKeyPair(dir_.path(), "exporter");
  auto forged = MirroredFold(300, "poison-");
  Export(*forged);  // unsigned, at the pointer
  MovePast(*fold_, 400, 2'000'000'000);
  ExportOptions signing;
  signing.sign_key_file = priv;
  const ArtifactManifest m = Export(*fold_, signing);
  EXPECT_TRUE(m.attests.empty());
  EXPECT_TRUE(m.is_signed);
  SeedOptions trusted;
  trusted.verify.trusted_key_files = {pub};
  EXPECT_EQ(LiveEntries(*Seeded(trusted)), LiveEntries(*fold_));

  // What it signed itself it re-attests, signed.
  MovePast(*fold_, 410, 3'000'000'000);
  const ArtifactManifest again = Export(*fold_, signing);
  EXPECT_EQ(again.attests, m.artifact_id);
  EXPECT_TRUE(again.is_signed);
  EXPECT_EQ(LiveEntries(*Seeded(trusted)), LiveEntries(*fold_));
}

TEST_F(ReattestationTest, PruneKeepsTheArtifactAKeptReattestationNames) {
  const ArtifactManifest first = Export(*fold_);
  MovePast(*fold_, 400, 2'000'000'000);
  const ArtifactManifest again = Export(*fold_);
  ASSERT_EQ(again.attests, first.artifact_id);
  std::vector<std::string> removed;
  ASSERT_TRUE(
      PruneArtifacts(*to_, PruneOptions{.keep = 1, .min_age = {}, .verify = {}}, &removed).ok());
  EXPECT_TRUE(removed.empty());
  EXPECT_TRUE(VerifyArtifact(*to_, again.artifact_id, {}).ok());
  EXPECT_EQ(LiveEntries(*Seeded()), LiveEntries(*fold_));

  // Once the fold changes, a full export leaves both to prune.
  FoldCommit put;
  put.entries["k1001"] = Entry{420, false, "new"};
  put.cursor = 430;
  ASSERT_TRUE(fold_->Commit(put).ok());
  const ArtifactManifest full = Export(*fold_);
  ASSERT_TRUE(full.attests.empty());
  ASSERT_TRUE(
      PruneArtifacts(*to_, PruneOptions{.keep = 1, .min_age = {}, .verify = {}}, &removed).ok());
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(fs::exists(Path(first.chunks[0].name)));
  EXPECT_TRUE(VerifyArtifact(*to_, full.artifact_id, {}).ok());
}

// A latest re-attestation whose chunks are gone (a prune elsewhere) is no
// valid artifact: the next export replaces it, though its cursor is the
// fold's own.
TEST_F(ReattestationTest, AReattestationWhoseChunksAreGoneIsReplacedByAFullExport) {
  const ArtifactManifest first = Export(*fold_);
  MovePast(*fold_, 400, 2'000'000'000);
  const ArtifactManifest again = Export(*fold_);
  ASSERT_EQ(again.attests, first.artifact_id);
  ASSERT_TRUE(to_->Remove(first.chunks[1].name).ok());

  auto m = ExportArtifact(*fold_, *to_, ExportOptions{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->attests.empty());
  EXPECT_EQ(m->cursor, 400u);
  EXPECT_EQ(*LatestArtifactId(*to_), m->artifact_id);
  EXPECT_EQ(LiveEntries(*Seeded()), LiveEntries(*fold_));
}

// A record written at the latest artifact's own cursor is in that artifact:
// it is no change since.
TEST_F(ReattestationTest, ARecordAtTheLatestCursorIsNoChangeSince) {
  FoldCommit put;
  put.entries["k2000"] = Entry{310, false, "at-the-cursor"};
  put.cursor = 310;
  ASSERT_TRUE(fold_->Commit(put).ok());
  const ArtifactManifest first = Export(*fold_);
  ASSERT_EQ(first.cursor, 310u);
  MovePast(*fold_, 400, 2'000'000'000);
  EXPECT_EQ(Export(*fold_).attests, first.artifact_id);
  EXPECT_EQ(LiveEntries(*Seeded()), LiveEntries(*fold_));
}

// The latest artifact lost a chunk (a prune or an operator elsewhere): it
// is not re-attested, the export writes its own chunks.
TEST_F(ReattestationTest, ALatestArtifactMissingAChunkIsNotReattested) {
  const ArtifactManifest first = Export(*fold_);
  ASSERT_GT(first.chunks.size(), 1u);
  ASSERT_TRUE(to_->Remove(first.chunks[1].name).ok());
  MovePast(*fold_, 400, 2'000'000'000);
  const ArtifactManifest m = Export(*fold_);
  EXPECT_TRUE(m.attests.empty());
  EXPECT_TRUE(VerifyArtifact(*to_, m.artifact_id, {}).ok());
  EXPECT_EQ(LiveEntries(*Seeded()), LiveEntries(*fold_));
}

// An exporter that only trusts keys (it signs nothing) re-attests only what
// a trusted key signed: an unsigned artifact of the same pairs and other
// values is exported over in full.
TEST_F(ReattestationTest, AnExporterThatTrustsKeysDoesNotReattestAnUnsignedArtifact) {
  auto [priv, pub] = MakeKeyPair(dir_.path(), "fleet");
  auto forged = MirroredFold(300, "poison-");
  Export(*forged);  // unsigned, at the pointer
  MovePast(*fold_, 400, 2'000'000'000);
  ExportOptions trusting;
  trusting.trusted_key_files = {pub};
  const ArtifactManifest m = Export(*fold_, trusting);
  EXPECT_TRUE(m.attests.empty());
  EXPECT_EQ(LiveEntries(*Seeded()), LiveEntries(*fold_));
}

// Prune keeps what a kept re-attestation names whichever artifact is the
// latest.
TEST_F(ReattestationTest, PruneKeepsWhatAnOlderKeptReattestationNames) {
  const ArtifactManifest first = Export(*fold_);
  MovePast(*fold_, 400, 2'000'000'000);
  const ArtifactManifest again = Export(*fold_);
  ASSERT_EQ(again.attests, first.artifact_id);
  FoldCommit put;
  put.entries["k1001"] = Entry{420, false, "new"};
  put.cursor = 430;
  ASSERT_TRUE(fold_->Commit(put).ok());
  ASSERT_TRUE(Export(*fold_).attests.empty());
  std::vector<std::string> removed;
  ASSERT_TRUE(
      PruneArtifacts(*to_, PruneOptions{.keep = 2, .min_age = {}, .verify = {}}, &removed).ok());
  EXPECT_TRUE(removed.empty());
  EXPECT_TRUE(VerifyArtifact(*to_, again.artifact_id, {}).ok());
}

// The eviction memo is the fold's, as of its cursor: one recorded since the
// latest artifact travels in the re-attestation and into a seeded fold.
TEST_F(ReattestationTest, AReattestationCarriesTheFoldsEvictionMemo) {
  const ArtifactManifest first = Export(*fold_);
  ASSERT_FALSE(first.eviction_observed);
  FoldCommit memo;
  memo.cursor = 400;
  memo.cursor_time_ns = 2'000'000'000;
  memo.eviction_observed = true;
  memo.eviction_cause = "max_msgs";
  ASSERT_TRUE(fold_->Commit(memo).ok());
  const ArtifactManifest again = Export(*fold_);
  ASSERT_EQ(again.attests, first.artifact_id);
  EXPECT_TRUE(again.eviction_observed);
  EXPECT_EQ(again.eviction_cause, "max_msgs");
  auto seeded = Seeded();
  EXPECT_TRUE(seeded->ReadMeta()->eviction_observed);
  EXPECT_EQ(seeded->ReadMeta()->eviction_cause, "max_msgs");
}

// What a reader takes from a manifest that says it re-attests.
TEST_F(ReattestationTest, AReattestationNamesOnlyTheChunksOfTheArtifactItAttests) {
  const ArtifactManifest first = Export(*fold_);
  MovePast(*fold_, 400, 2'000'000'000);
  const ArtifactManifest again = Export(*fold_);
  ASSERT_EQ(again.attests, first.artifact_id);
  auto rewrite = [&](const std::function<void(wire::Manifest*)>& edit) {
    const std::string path = Path(again.artifact_id + "/manifest");
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    wire::ManifestEnvelope env;
    wire::Manifest m;
    ASSERT_TRUE(artifact::DecodeManifestFrame(bytes, "m", &env, &m).ok());
    edit(&m);
    env.set_manifest(m.SerializeAsString());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << artifact::EncodeManifestFrame(env);
  };
  auto refused = [&](const std::string& needle) {
    auto m = ReadArtifactManifest(*to_, again.artifact_id, {});
    ASSERT_FALSE(m.ok()) << "should be refused: " << needle;
    EXPECT_TRUE(m.status().IsCorruption()) << m.status().ToString();
    EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().ToString();
  };
  // Another artifact's id than the chunks' owner.
  rewrite([](wire::Manifest* m) { m->set_attests("00000000000000000001-aaaaaaaaaaaa"); });
  refused("outside the artifact it re-attests");
  // An id the owner's id merely begins with.
  rewrite([&](wire::Manifest* m) {
    m->set_attests(first.artifact_id.substr(0, first.artifact_id.size() - 1));
  });
  refused("outside the artifact it re-attests");
  // Its own id.
  rewrite([&](wire::Manifest* m) { m->set_attests(again.artifact_id); });
  refused("which is no other artifact's id");
  // A schema that older readers would take, naming chunks they would refuse.
  rewrite([&](wire::Manifest* m) {
    m->set_attests(first.artifact_id);
    m->set_min_reader_version(2);
  });
  refused("claims reader schema 2");
}

// Readers of schema 2 refuse a re-attestation by its version (not as
// corrupt), so an older node says "upgrade".
TEST_F(ReattestationTest, AReattestationIsSchemaThree) {
  Export(*fold_);
  MovePast(*fold_, 400, 2'000'000'000);
  const ArtifactManifest again = Export(*fold_);
  EXPECT_EQ(again.schema_version, 3u);
  EXPECT_EQ(again.min_reader_version, 3u);
  EXPECT_EQ(kArtifactSchemaVersion, 3u);
}

}  // namespace
}  // namespace kvfold
