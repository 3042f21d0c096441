// Every parser of untrusted bytes, fed valid inputs and tens of thousands
// of random mutations of them (flips, truncations, insertions, splices).
// Under ASan+UBSan in CI this is a deterministic fuzzing pass; the same
// entry points drive libFuzzer in tests/fuzz/.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "artifact/chunk_codec.h"
#include "artifact/manifest_codec.h"
#include "artifact/object_meta.h"
#include "artifact/pointer_codec.h"
#include "fuzz/fuzz_targets.h"
#include "nats/lease_record.h"
#include "store/record_codec.h"

namespace kvfold {
namespace {

std::string Mutate(std::string s, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < edits; ++i) {
    switch (rng() % 5) {
      case 0:
        if (!s.empty()) s[rng() % s.size()] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        if (!s.empty()) s.resize(rng() % s.size());
        break;
      case 2:
        s.insert(s.begin() + static_cast<long>(s.empty() ? 0 : rng() % s.size()),
                 static_cast<char>(rng() % 256));
        break;
      case 3:
        if (!s.empty()) s[rng() % s.size()] = static_cast<char>(rng() % 256);
        break;
      case 4:
        if (s.size() > 2) {
          const size_t a = rng() % s.size();
          s += s.substr(a, rng() % (s.size() - a));
        }
        break;
    }
  }
  return s;
}

void Hammer(const std::vector<std::string>& seeds,
            const std::function<void(std::string_view)>& target, int rounds = 20000) {
  std::mt19937_64 rng(42);
  for (const auto& s : seeds) target(s);
  for (int i = 0; i < rounds; ++i) target(Mutate(seeds[rng() % seeds.size()], rng));
}

std::string ValidManifestFrame() {
  ArtifactManifest m;
  m.artifact_id = "00000000000000000007-abc";
  m.schema_version = m.min_reader_version = 1;
  m.bucket = "b";
  m.scope = {"a."};
  m.has_scope = true;
  m.cursor = 7;
  m.chunks.push_back(ArtifactChunk{"00000000000000000007-abc/chunk-000000", 2, "a.1", "a.2", 10, 20,
                                   std::string(32, 'x')});
  wire::ManifestEnvelope env;
  env.set_manifest(artifact::ToProto(m).SerializeAsString());
  return artifact::EncodeManifestFrame(env);
}

std::string ValidRecords() {
  std::string raw;
  artifact::AppendRecord(&raw, "a.1", 1, "one");
  artifact::AppendRecord(&raw, "a.2", 2, std::string(200, 'z'));
  return raw;
}

TEST(ParserRobustnessTest, ManifestFrame) { Hammer({ValidManifestFrame()}, fuzz::ManifestFrame); }
TEST(ParserRobustnessTest, ManifestEnvelope) {
  // The frame's envelope bytes: magic (4) and length (4) before them, the
  // SHA-256 (32) after.
  const std::string frame = ValidManifestFrame();
  Hammer({frame.substr(8, frame.size() - 8 - 32)}, fuzz::ManifestEnvelope);
}
TEST(ParserRobustnessTest, ChunkRecords) { Hammer({ValidRecords()}, fuzz::ChunkRecords); }
TEST(ParserRobustnessTest, ChunkObject) {
  Hammer({artifact::Compress(ValidRecords())}, fuzz::ChunkObject, 5000);
}
// JSON of the right syntax but the wrong types or shape: nlohmann throws
// type_error on these unless every read checks the type first.
const std::vector<std::string> kWrongShapes = {
    "{}", "[]", "null", "1", "\"s\"", "true", "{\"a\":{}}",
};

TEST(ParserRobustnessTest, Pointer) {
  std::vector<std::string> seeds = {artifact::EncodePointer(ArtifactPointer{"id-1", 9, "b", "t"}),
                                    R"({"artifact":"a","cursor":1,"bucket":1})",
                                    R"({"artifact":"a","cursor":1,"stream_created":[]})",
                                    R"({"artifact":"a","cursor":-1})",
                                    R"({"artifact":"a","cursor":1.5})",
                                    R"({"artifact":7,"cursor":1})"};
  seeds.insert(seeds.end(), kWrongShapes.begin(), kWrongShapes.end());
  Hammer(seeds, fuzz::Pointer);
}
TEST(ParserRobustnessTest, ObjectMeta) {
  std::vector<std::string> seeds = {
      R"({"name":"LATEST","bucket":"b","nuid":"N","size":10,"chunks":1,"digest":"SHA-256=x"})",
      R"({"nuid":"N","deleted":"yes"})",
      R"({"nuid":"N","size":"10"})",
      R"({"nuid":"N","chunks":-1})",
      R"({"nuid":1})",
      R"({"nuid":"N","digest":{}})"};
  seeds.insert(seeds.end(), kWrongShapes.begin(), kWrongShapes.end());
  Hammer(seeds, fuzz::ObjectMeta);
}
TEST(ParserRobustnessTest, LeaseRecord) {
  std::vector<std::string> seeds = {nats::EncodeLeaseRecord({"node-1", 1700000000000}),
                                    R"({"holder":1,"expires_unix_ms":5})",
                                    R"({"holder":"h","expires_unix_ms":"soon"})",
                                    R"({"holder":"h","expires_unix_ms":18446744073709551615})"};
  seeds.insert(seeds.end(), kWrongShapes.begin(), kWrongShapes.end());
  Hammer(seeds, fuzz::LeaseRecord);
}

// Wrong-typed fields are Corruption, never an exception through the API.
TEST(ParserRobustnessTest, WrongTypedJsonIsCorruption) {
  EXPECT_TRUE(artifact::DecodePointer(R"({"artifact":"a","cursor":1,"bucket":1})", "t")
                  .status()
                  .IsCorruption());
  EXPECT_TRUE(artifact::DecodePointer(R"({"artifact":"a","cursor":1,"stream_created":{}})", "t")
                  .status()
                  .IsCorruption());
  auto ok = artifact::DecodePointer(R"({"artifact":"a","cursor":1})", "t");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->bucket, "");
  for (const char* meta : {R"({"nuid":"0123456789ABCDEFGHIJKL","deleted":"yes"})",
                           R"({"nuid":"0123456789ABCDEFGHIJKL","size":"10"})",
                           R"({"nuid":"0123456789ABCDEFGHIJKL","chunks":-1})",
                           R"({"nuid":"0123456789ABCDEFGHIJKL","digest":5})", "[1]"}) {
    EXPECT_TRUE(artifact::ParseObjectMeta(meta, "t").status().IsCorruption()) << meta;
  }
  EXPECT_TRUE(
      artifact::ParseObjectMeta(R"({"nuid":"0123456789ABCDEFGHIJKL","size":3,"chunks":1})", "t")
          .ok());
  // The nuid becomes a subject token: anything but a NATS nuid is refused.
  for (const std::string nuid :
       {">", "*", "", "0123456789ABCDEFGHIJK", "0123456789ABCDEFGHIJKLM", "0123456789.BCDEFGHIJKL",
        "0123456789*BCDEFGHIJKL", "0123456789>BCDEFGHIJKL", "0123456789 BCDEFGHIJKL",
        "0123456789\\tBCDEFGHIJKL", "0123456789-BCDEFGHIJKL", "0123456789\\u00e9CDEFGHIJK"}) {
    const std::string meta = R"({"nuid":")" + nuid + R"(","size":3,"chunks":1})";
    auto parsed = artifact::ParseObjectMeta(meta, "object x in obj:b");
    ASSERT_TRUE(parsed.status().IsCorruption()) << meta;
    EXPECT_NE(parsed.status().message().find("is not a NATS nuid"), std::string::npos)
        << parsed.status().ToString();
  }
  for (const char* lease :
       {R"({"holder":1,"expires_unix_ms":5})", R"({"holder":"h","expires_unix_ms":"soon"})",
        R"({"holder":"h"})", R"({"holder":"h","expires_unix_ms":18446744073709551615})"}) {
    EXPECT_TRUE(nats::DecodeLeaseRecord(lease, "t").status().IsCorruption()) << lease;
  }
  auto lease = nats::DecodeLeaseRecord(nats::EncodeLeaseRecord({"h", 42}), "t");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->holder, "h");
  EXPECT_EQ(lease->expires_unix_ms, 42);
}
TEST(ParserRobustnessTest, FoldRecords) {
  Hammer({store::EncodeEntry(Entry{5, false, "v"}), store::EncodeStringList({"a.", ""}),
          store::EncodeU64(99)},
         fuzz::FoldRecord);
}
TEST(ParserRobustnessTest, AckReply) {
  Hammer({"$JS.ACK.KV_b.c.1.2.3.4.5", "$JS.ACK.d.h.KV_b.c.1.2.3.4.5.r"}, fuzz::AckReply);
}
TEST(ParserRobustnessTest, Base64) { Hammer({"Zm9vYmFy", "-_8="}, fuzz::Base64); }

TEST(ParserRobustnessTest, ObjectName) {
  Hammer({"00000000000000000042-abcdef/manifest.pb", "a/../b", "LATEST"}, fuzz::ObjectName);
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string ReadCorpusFile(const std::string& target, const std::string& name) {
  return ReadFile(std::string(KVFOLD_SOURCE_DIR) + "/tests/fuzz/corpus/" + target + "/" + name);
}

// The valid seeds stay valid: a format change that left them behind would
// turn them into shallow inputs without a word.
TEST(ParserRobustnessTest, FuzzSeedsDecode) {
  wire::ManifestEnvelope envelope;
  wire::Manifest manifest;
  EXPECT_TRUE(artifact::DecodeManifestFrame(ReadCorpusFile("manifestframe", "golden-v1-manifest"),
                                            "seed", &envelope, &manifest)
                  .ok());
  EXPECT_TRUE(envelope.ParseFromString(ReadCorpusFile("manifestenvelope", "golden-v1-envelope")));
  EXPECT_EQ(artifact::EncodeManifestFrame(envelope),
            ReadCorpusFile("manifestframe", "golden-v1-manifest"));
  for (const char* chunk : {"golden-v1-chunk0", "golden-v1-chunk1"}) {
    const std::string raw = ReadCorpusFile("chunkrecords", std::string(chunk) + "-raw");
    auto decompressed =
        artifact::Decompress(ReadCorpusFile("chunkobject", chunk), raw.size(), "seed");
    ASSERT_TRUE(decompressed.ok()) << chunk << ": " << decompressed.status().ToString();
    EXPECT_EQ(*decompressed, raw) << chunk;
    int records = 0;
    EXPECT_TRUE(artifact::ForEachRecord(raw, "seed",
                                        [&](std::string_view, uint64_t, std::string_view, int64_t) {
                                          ++records;
                                          return Status::OK();
                                        })
                    .ok());
    EXPECT_GT(records, 0) << chunk;
  }
  EXPECT_TRUE(artifact::DecodePointer(ReadCorpusFile("pointer", "golden-v1-latest"), "seed").ok());
  EXPECT_TRUE(artifact::ParseObjectMeta(ReadCorpusFile("objectmeta", "valid"), "seed").ok());
  EXPECT_TRUE(nats::DecodeLeaseRecord(ReadCorpusFile("leaserecord", "valid"), "seed").ok());
  Entry entry;
  EXPECT_TRUE(store::DecodeEntry(ReadCorpusFile("foldrecord", "entry"), &entry).ok());
  EXPECT_EQ(entry.revision, 5u);
  std::vector<std::string> list;
  EXPECT_TRUE(store::DecodeStringList(ReadCorpusFile("foldrecord", "list"), &list).ok());
  EXPECT_EQ(list, (std::vector<std::string>{"a.", ""}));
  uint64_t u = 0;
  EXPECT_TRUE(store::DecodeU64(ReadCorpusFile("foldrecord", "u64"), &u).ok());
  EXPECT_EQ(u, 99u);
}

// Every input kept in tests/fuzz/corpus/<target>: the seeds scripts/fuzz.sh
// starts from and each crash it ever found (kept there once fixed), run
// through its target, under ASan+UBSan in CI.
TEST(ParserRobustnessTest, FuzzCorpusReplays) {
  namespace fs = std::filesystem;
  const std::map<std::string, std::function<void(std::string_view)>> targets = {
      {"manifestframe", fuzz::ManifestFrame},
      {"manifestenvelope", fuzz::ManifestEnvelope},
      {"chunkobject", fuzz::ChunkObject},
      {"chunkrecords", fuzz::ChunkRecords},
      {"pointer", fuzz::Pointer},
      {"objectmeta", fuzz::ObjectMeta},
      {"leaserecord", fuzz::LeaseRecord},
      {"foldrecord", fuzz::FoldRecord},
      {"ackreply", fuzz::AckReply},
      {"base64", fuzz::Base64},
      {"objectname", fuzz::ObjectName}};
  const fs::path root = fs::path(KVFOLD_SOURCE_DIR) / "tests/fuzz/corpus";
  size_t inputs = 0;
  for (const auto& [name, target] : targets) {
    ASSERT_TRUE(fs::is_directory(root / name)) << "no corpus for fuzz target " << name;
    for (const auto& file : fs::directory_iterator(root / name)) {
      SCOPED_TRACE(file.path().string());
      target(ReadFile(file.path()));
      ++inputs;
    }
  }
  // A directory with no target behind it would never be replayed.
  for (const auto& dir : fs::directory_iterator(root)) {
    EXPECT_TRUE(targets.count(dir.path().filename().string())) << dir.path();
  }
  EXPECT_GE(inputs, targets.size());
}

}  // namespace
}  // namespace kvfold
