// Artifact code against a hostile writer to the artifact location (a shared
// directory, a bucket) who does not hold the signing key: whatever it
// plants, prune never removes anything outside the location nor because of
// a manifest a restore would refuse.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "artifact.pb.h"
#include "artifact/manifest_codec.h"
#include "artifact/signer.h"
#include "fold_view.h"
#include "kvfold/artifact.h"
#include "test_dir.h"
#include "test_keys.h"

namespace kvfold {
namespace {

namespace fs = std::filesystem;

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A fold as a mirror leaves it.
std::unique_ptr<Fold> SourceFold() {
  auto fold = NewMemoryFold();
  FoldCommit c;
  for (int i = 0; i < 50; ++i)
    c.entries["k" + std::to_string(i)] = Entry{uint64_t(i + 1), false, "v"};
  c.cursor = 60;
  c.bucket = "cfg";
  c.scope = std::vector<std::string>{""};
  c.stream_created = "2026-01-01T00:00:00Z";
  EXPECT_TRUE(fold->Commit(c).ok());
  return fold;
}

// A manifest anyone can write: a valid frame, no signature.
std::string ForgedManifest(const std::string& id,
                           const std::function<void(wire::Manifest*)>& edit = nullptr) {
  wire::Manifest m;
  m.set_artifact_id(id);
  m.set_schema_version(1);
  m.set_min_reader_version(1);
  m.set_bucket("cfg");
  m.set_stream_created("2026-01-01T00:00:00Z");
  m.set_created_unix_ms(0);  // "old"
  m.set_cursor(0);           // "oldest"
  if (edit) edit(&m);
  wire::ManifestEnvelope env;
  env.set_manifest(m.SerializeAsString());
  return artifact::EncodeManifestFrame(env);
}

// Every regular file of `dir` with its size.
std::map<std::string, uintmax_t> FilesOf(const std::string& dir) {
  std::map<std::string, uintmax_t> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) out[e.path().filename().string()] = e.file_size();
  }
  return out;
}

// Runs `swap` right before each Remove reaches `inner`: what a hostile
// writer racing prune can do between its listing and each removal, made
// deterministic.
class SwapBeforeRemove final : public Transport {
 public:
  SwapBeforeRemove(Transport& inner, std::function<void()> swap)
      : inner_(inner), swap_(std::move(swap)) {}
  const std::string& location() const override { return inner_.location(); }
  Status Put(const std::string& name, std::string_view bytes) override {
    return inner_.Put(name, bytes);
  }
  StatusOr<std::string> Get(const std::string& name) override { return inner_.Get(name); }
  Status Remove(const std::string& name) override {
    swap_();
    return inner_.Remove(name);
  }
  StatusOr<std::vector<std::string>> List() override { return inner_.List(); }
  StatusOr<std::optional<ArtifactPointer>> ReadPointer() override { return inner_.ReadPointer(); }
  Status AdvancePointer(const ArtifactPointer& next) override {
    return inner_.AdvancePointer(next);
  }

 private:
  Transport& inner_;
  std::function<void()> swap_;
};

class HostileLocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = OpenTransport("dir:" + Arts(), ConnectOptions{},
                           TransportOptions{.create_if_missing = true, .s3 = {}});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    to_ = std::move(t).value();
    source_ = SourceFold();
  }

  std::string Arts() const { return dir_.path() + "/arts"; }

  // Exports the source fold at `cursor`, signed with `key`.
  ArtifactManifest ExportAt(uint64_t cursor, const std::string& key) {
    FoldCommit c;
    c.entries["k-" + std::to_string(cursor)] = Entry{cursor, false, "v"};
    c.cursor = cursor;
    EXPECT_TRUE(source_->Commit(c).ok());
    ExportOptions o;
    o.sign_key_file = key;
    auto m = ExportArtifact(*source_, *to_, o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : ArtifactManifest{};
  }

  // Replaces the manifest of `id` by its own content edited by `edit`,
  // unsigned, or signed by `key` when given.
  void ForgeManifest(const std::string& id, const std::function<void(wire::Manifest*)>& edit,
                     const std::string& key = "") {
    wire::ManifestEnvelope env;
    wire::Manifest m;
    ASSERT_TRUE(
        artifact::DecodeManifestFrame(ReadWholeFile(Arts() + "/" + id + "/manifest"), "m", &env, &m)
            .ok());
    edit(&m);
    env.Clear();
    env.set_manifest(m.SerializeAsString());
    if (!key.empty()) {
      auto signer = artifact::SigningKey::Load(key);
      ASSERT_TRUE(signer.ok()) << signer.status().ToString();
      env.set_signature(*(*signer)->Sign(env.manifest()));
      env.set_signer_public_key((*signer)->public_key());
    }
    WriteFile(Arts() + "/" + id + "/manifest", artifact::EncodeManifestFrame(env));
  }

  TestDir dir_;
  std::unique_ptr<Transport> to_;
  std::unique_ptr<Fold> source_;
};

// Guards §2.6 (bad input leaves the fold untouched) against prune: a forged
// artifact whose directory is swapped for a symbolic link to the exporter's
// own fold between the listing and the removals must not make prune unlink
// the fold's files (CURRENT, MANIFEST-*), which the exporter may write.
TEST_F(HostileLocationTest, PruneNeverRemovesThroughASymlinkSwappedInAfterTheListing) {
  const ArtifactManifest old = ExportAt(61, "");
  const ArtifactManifest real = ExportAt(70, "");
  const std::string fold_dir = dir_.path() + "/fold";
  {
    auto fold = OpenRocksFold(fold_dir);
    ASSERT_TRUE(fold.ok()) << fold.status().ToString();
    FoldCommit c;
    c.entries["precious"] = Entry{1, false, "v"};
    c.cursor = 1;
    ASSERT_TRUE((*fold)->Commit(c).ok());
  }
  const auto fold_files = FilesOf(fold_dir);
  ASSERT_TRUE(fold_files.contains("CURRENT"));

  // The forged artifact lists an object of every name the fold holds.
  const std::string evil = "00000000000000000065-000000000000";
  fs::create_directories(Arts() + "/" + evil);
  WriteFile(Arts() + "/" + evil + "/manifest",
            ForgedManifest(evil, [](wire::Manifest* m) { m->set_cursor(65); }));
  for (const auto& [name, _] : fold_files) WriteFile(Arts() + "/" + evil + "/" + name, "x");

  const std::string evil_dir = Arts() + "/" + evil;
  SwapBeforeRemove swapping(*to_, [&] {
    if (fs::is_symlink(evil_dir)) return;
    if (fs::exists(evil_dir)) fs::rename(evil_dir, dir_.path() + "/moved-away");
    fs::create_directory_symlink(fold_dir, evil_dir);
  });
  std::vector<std::string> removed;
  Status s = PruneArtifacts(swapping, PruneOptions{.keep = 1, .min_age = {}}, &removed);
  EXPECT_EQ(FilesOf(fold_dir), fold_files) << "prune reached into the fold: " << s.ToString();
  EXPECT_TRUE(fs::exists(fold_dir + "/CURRENT"));
  auto fold = OpenRocksFold(fold_dir);
  ASSERT_TRUE(fold.ok()) << fold.status().ToString();
  Entry e;
  EXPECT_TRUE((*fold)->Get("precious", &e).ok());
  // Said, and the other old artifact is pruned all the same.
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(evil + " is a symbolic link, where kvfold keeps a directory"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(removed, std::vector<std::string>{old.artifact_id});
  EXPECT_EQ(*LatestArtifactId(*to_), real.artifact_id);
  EXPECT_TRUE(VerifyArtifact(*to_, real.artifact_id, {}).ok());
}

// With a trusted key, a manifest no trusted key signed is never the reason
// anything is removed: not an artifact whose manifest was replaced by one
// claiming it is ancient (created_unix_ms 0), unsigned or signed by a
// stranger. Artifacts the trusted key signed are still pruned.
TEST_F(HostileLocationTest, UnsignedManifestsNeverDecideARemovalUnderATrustedKey) {
  auto [priv, pub] = MakeKeyPair(dir_.path(), "exporter");
  auto [stranger, stranger_pub] = MakeKeyPair(dir_.path(), "stranger");
  const ArtifactManifest a0 = ExportAt(61, priv);
  const ArtifactManifest a1 = ExportAt(62, priv);
  const ArtifactManifest a2 = ExportAt(63, priv);
  const ArtifactManifest a3 = ExportAt(64, priv);
  ForgeManifest(a1.artifact_id, [](wire::Manifest* m) { m->set_created_unix_ms(0); });
  ForgeManifest(
      a2.artifact_id, [](wire::Manifest* m) { m->set_created_unix_ms(0); }, stranger);

  const PruneOptions trusted{.keep = 1, .verify = VerifyOptions{.trusted_key_files = {pub}}};
  std::vector<std::string> removed;
  ASSERT_TRUE(PruneArtifacts(*to_, trusted, &removed).ok());
  EXPECT_TRUE(removed.empty()) << removed.front();
  for (const auto& m : {a0, a1, a2, a3}) {
    for (const auto& c : m.chunks) EXPECT_TRUE(fs::exists(Arts() + "/" + c.name)) << c.name;
  }

  PruneOptions old_enough = trusted;
  old_enough.min_age = {};
  ASSERT_TRUE(PruneArtifacts(*to_, old_enough, &removed).ok());
  EXPECT_EQ(removed, std::vector<std::string>{a0.artifact_id});
  EXPECT_TRUE(fs::exists(Arts() + "/" + a1.chunks[0].name));
  EXPECT_TRUE(fs::exists(Arts() + "/" + a2.chunks[0].name));
  EXPECT_TRUE(VerifyArtifact(*to_, a3.artifact_id, trusted.verify).ok());
}

// Forged manifests with a higher cursor do not take the places `keep`
// holds for real artifacts.
TEST_F(HostileLocationTest, ForgedNewerManifestsDoNotPushRealOnesOutOfKeep) {
  auto [priv, pub] = MakeKeyPair(dir_.path(), "exporter");
  const ArtifactManifest a1 = ExportAt(61, priv);
  const ArtifactManifest a2 = ExportAt(62, priv);
  for (const std::string id :
       {"00000000000000009998-aaaaaaaaaaaa", "00000000000000009999-bbbbbbbbbbbb"}) {
    fs::create_directories(Arts() + "/" + id);
    WriteFile(Arts() + "/" + id + "/manifest",
              ForgedManifest(id, [](wire::Manifest* m) { m->set_cursor(9999); }));
  }
  ASSERT_EQ(ListArtifacts(*to_, nullptr)->size(), 4u);
  std::vector<std::string> removed;
  ASSERT_TRUE(PruneArtifacts(*to_,
                             PruneOptions{.keep = 2,
                                          .min_age = {},
                                          .verify = VerifyOptions{.trusted_key_files = {pub}}},
                             &removed)
                  .ok());
  EXPECT_TRUE(removed.empty()) << removed.front();
  EXPECT_TRUE(VerifyArtifact(*to_, a1.artifact_id, {}).ok());
  EXPECT_TRUE(VerifyArtifact(*to_, a2.artifact_id, {}).ok());
}

}  // namespace
}  // namespace kvfold
