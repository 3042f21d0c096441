// The golden artifacts in artifacts/golden/ decode to exactly what they were
// made from, and exporting the same fold today yields the same bytes: a
// format change cannot slip in unnoticed.

#include <gtest/gtest.h>

#include <filesystem>

#include "artifact/signer.h"
#include "golden/golden_fold.h"
#include "test_dir.h"

namespace kvfold {
namespace {

namespace fs = std::filesystem;

TEST(GoldenTest, SchemaV1DecodesExactly) {
  const std::string dir = std::string(KVFOLD_GOLDEN_DIR) + "/v1";
  ASSERT_TRUE(fs::exists(dir + "/" + golden::kV1Id + "/manifest")) << dir;
  auto from = OpenTransport("dir:" + dir, ConnectOptions{});
  ASSERT_TRUE(from.ok());
  auto m = ReadArtifactManifest(**from, golden::kV1Id, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->schema_version, 1u);
  EXPECT_EQ(m->min_reader_version, 1u);
  EXPECT_EQ(m->bucket, "golden");
  EXPECT_EQ(m->stream_created, "2026-01-01T00:00:00.000000000Z");
  EXPECT_EQ(m->scope, (std::vector<std::string>{"a.", "b."}));
  EXPECT_TRUE(m->has_scope);
  EXPECT_EQ(m->cursor, 42u);
  EXPECT_EQ(m->created_unix_ms, 1767225600000);
  EXPECT_EQ(m->exporter_id, "kvfold-golden");
  EXPECT_FALSE(m->is_signed);
  EXPECT_TRUE(m->fold_digest.empty()) << "v1 was written before the fold digest";
  EXPECT_EQ(m->entry_count, 36u);  // 40 minus 4 tombstones
  ASSERT_GE(m->chunks.size(), 2u);
  EXPECT_EQ(m->chunks[0].name, std::string(golden::kV1Id) + "/chunk-000000");
  EXPECT_EQ(m->chunks[0].first_key, "a.key100");
  EXPECT_EQ(*LatestArtifactId(**from), golden::kV1Id);
  ASSERT_TRUE(VerifyArtifact(**from, golden::kV1Id, {}).ok());

  auto fold = NewMemoryFold();
  ASSERT_TRUE(SeedFold(*fold, **from, {}).ok());
  FoldCommit expected = golden::V1Fold();
  size_t live = 0;
  for (const auto& [key, e] : expected.entries) {
    Entry got;
    if (e.deleted) {
      EXPECT_TRUE(fold->Get(key, &got).IsNotFound()) << key;
      continue;
    }
    ++live;
    ASSERT_TRUE(fold->Get(key, &got).ok()) << key;
    EXPECT_EQ(got, e) << key;
  }
  EXPECT_EQ(fold->ReadMeta()->live_keys, live);
}

// The fold digest as artifacts/FORMAT.md lays it out, computed here from
// the golden fold, not by the code under test.
std::string DigestByTheFormat(const FoldCommit& fold) {
  std::string bytes;
  for (const auto& [key, e] : fold.entries) {
    if (e.deleted) continue;
    const auto n = static_cast<uint32_t>(key.size());
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(n >> shift));
    bytes += key;
    for (int shift = 56; shift >= 0; shift -= 8) {
      bytes.push_back(static_cast<char>(e.revision >> shift));
    }
  }
  return artifact::Sha256(bytes);
}

TEST(GoldenTest, V1WithADigestRecordsTheFormatsDigestAndSeeds) {
  const std::string dir = std::string(KVFOLD_GOLDEN_DIR) + "/v1-digest";
  auto from = OpenTransport("dir:" + dir, ConnectOptions{});
  ASSERT_TRUE(from.ok());
  auto m = ReadArtifactManifest(**from, golden::kV1Id, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->schema_version, 1u);
  EXPECT_EQ(m->entry_count, 36u);
  EXPECT_EQ(artifact::HexEncode(m->fold_digest),
            artifact::HexEncode(DigestByTheFormat(golden::V1Fold())));
  ASSERT_TRUE(VerifyArtifact(**from, golden::kV1Id, {}).ok());
  auto fold = NewMemoryFold();
  ASSERT_TRUE(SeedFold(*fold, **from, {}).ok());
  EXPECT_EQ(fold->ReadMeta()->live_keys, 36u);
}

TEST(GoldenTest, TodaysExportIsByteIdentical) {
  TestDir dir;
  auto fold = NewMemoryFold();
  ASSERT_TRUE(fold->Commit(golden::V1Fold()).ok());
  auto to = OpenTransport("dir:" + dir.path(), ConnectOptions{},
                          TransportOptions{.create_if_missing = true, .s3 = {}});
  auto m = ExportArtifact(*fold, **to, golden::V1Options());
  ASSERT_TRUE(m.ok());
  const fs::path golden_dir = fs::path(KVFOLD_GOLDEN_DIR) / "v1-digest" / golden::kV1Id;
  const fs::path fresh_dir = fs::path(dir.path()) / golden::kV1Id;
  size_t compared = 0;
  for (const auto& entry : fs::directory_iterator(golden_dir)) {
    const auto name = entry.path().filename();
    EXPECT_EQ(ReadWholeFile(entry.path().string()), ReadWholeFile((fresh_dir / name).string()))
        << name << " changed";
    ++compared;
  }
  EXPECT_EQ(compared, m->chunks.size() + 1);
}

}  // namespace
}  // namespace kvfold
