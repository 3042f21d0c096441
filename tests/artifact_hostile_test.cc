// Artifact code against a hostile writer to the artifact location (a shared
// directory, a bucket) who does not hold the signing key: whatever it
// plants, prune never removes anything outside the location nor because of
// a manifest a restore would refuse, and no object makes a reader hang or
// read without bound. Also the files kvfold makes there (modes that follow
// the umask, a .lock never followed) and a signing key no one else reads.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include "artifact.pb.h"
#include "artifact/manifest_codec.h"
#include "artifact/signer.h"
#include "fold_view.h"
#include "kvfold/artifact.h"
#include "kvfold/scheduled_export.h"
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

// Runs `read` on a thread of its own and returns what it returned. A read
// still running after 10 s fails the test, and is unblocked by opening the
// FIFO `fifo` (if any) for writing and closing it.
Status ReadWithin10s(const std::function<Status()>& read, const std::string& fifo = "") {
  std::promise<Status> done;
  std::future<Status> result = done.get_future();
  std::thread reader([&] { done.set_value(read()); });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "the read hung";
    if (!fifo.empty()) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
  }
  reader.join();
  return result.get();
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
  StatusOr<std::string> Get(const std::string& name, uint64_t max_bytes) override {
    return inner_.Get(name, max_bytes);
  }
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

// A frame whose length field says 2^31 bytes or more is refused before that
// length, as an int, could reach the protobuf parser as a negative size
// (in a build with assertions protobuf aborts on it; without, it takes
// the size as about 2^64). Here the frame is whole: 2 GiB of envelope (an
// anonymous mapping of zeros; untouched pages cost no memory) and a valid
// checksum (worked out once, not to hash 2 GiB on every run), so nothing
// but a size limit stops it.
TEST(ManifestFrameTest, AFrameOfTwoGiBOrMoreIsRefusedBeforeTheParser) {
  const uint64_t n = uint64_t{1} << 31;
  const size_t size = n + 40;
  void* mapped = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  char* bytes = static_cast<char*>(mapped);
  std::memcpy(bytes, "KVFM\x80\0\0\0", 8);
  // SHA-256 of "KVFM" 80 00 00 00 and 2^31 zero bytes.
  const char sum[] =
      "\x0b\xf8\x36\xb5\xe8\x15\x2c\x24\x08\xb1\x21\x3a\xc5\x74\x6a\x25"
      "\x39\x26\x6e\xaa\xa9\x83\xcf\xdc\x8f\xa2\x6b\x6c\x0d\x84\x1f\x3c";
  std::memcpy(bytes + 8 + n, sum, 32);
  wire::ManifestEnvelope env;
  wire::Manifest m;
  const auto start = std::chrono::steady_clock::now();
  Status s = artifact::DecodeManifestFrame(std::string_view(bytes, size), "m", &env, &m);
  const auto took = std::chrono::steady_clock::now() - start;
  ::munmap(mapped, size);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("m is 2147483688 bytes, more than the 16777216 a manifest may hold"),
            std::string::npos)
      << s.ToString();
  EXPECT_LT(took, std::chrono::milliseconds(500)) << "read before it was refused";

  // Only the header, claiming as much.
  s = artifact::DecodeManifestFrame(std::string("KVFM\x80\0\0\0", 8) + std::string(32, '\0'), "m",
                                    &env, &m);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("m frame says 2147483648 envelope bytes, more than"),
            std::string::npos)
      << s.ToString();
}

// An export never publishes a manifest its own readers refuse as too large:
// one whose chunk list outgrows the cap fails with nothing left behind.
TEST_F(HostileLocationTest, AnExportWhoseManifestOutgrowsTheCapPublishesNothing) {
  auto fold = NewMemoryFold();
  FoldCommit c;
  // Each chunk (one record) lists its 200 kB key twice: 45 of them pass
  // 16 MiB.
  for (int i = 0; i < 45; ++i) {
    c.entries[std::string(200000, 'k') + std::to_string(1000 + i)] =
        Entry{uint64_t(i + 1), false, ""};
  }
  c.cursor = 300;
  c.bucket = "cfg";
  c.scope = std::vector<std::string>{""};
  c.stream_created = "2026-01-01T00:00:00Z";
  ASSERT_TRUE(fold->Commit(c).ok());
  ExportOptions o;
  o.chunk_raw_bytes = 1;
  auto m = ExportArtifact(*fold, *to_, o);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().IsInvalidArgument()) << m.status().ToString();
  EXPECT_NE(m.status().message().find("(45 chunks), more than the 16777216 readers take"),
            std::string::npos)
      << m.status().ToString();
  EXPECT_TRUE(to_->List()->empty());
  EXPECT_FALSE(*to_->ReadPointer());
}

// A sparse 64 GiB file where a manifest belongs costs no disk, and once
// killed every exporter that pruned (reading it whole) and every seed when
// LATEST named it. It is refused by its size, unread.
TEST_F(HostileLocationTest, AHugeSparseManifestIsRefusedUnread) {
  const ArtifactManifest real = ExportAt(61, "");
  const std::string path = Arts() + "/" + real.artifact_id + "/manifest";
  ASSERT_EQ(::truncate(path.c_str(), int64_t{64} << 30), 0) << std::strerror(errno);
  const auto start = std::chrono::steady_clock::now();
  auto m = ReadArtifactManifest(*to_, real.artifact_id, {});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().IsCorruption()) << m.status().ToString();
  EXPECT_NE(m.status().message().find("is 68719476736 bytes, more than the 16777216"),
            std::string::npos)
      << m.status().ToString();

  std::vector<std::string> unreadable;
  ASSERT_TRUE(ListArtifacts(*to_, &unreadable).ok());
  ASSERT_EQ(unreadable.size(), 1u);
  EXPECT_NE(unreadable[0].find("68719476736 bytes"), std::string::npos) << unreadable[0];
  EXPECT_TRUE(PruneArtifacts(*to_, PruneOptions{.keep = 1, .min_age = {}}, nullptr).ok());
  auto fold = NewMemoryFold();
  auto seeded = SeedFold(*fold, *to_, {});
  ASSERT_FALSE(seeded.ok());
  EXPECT_NE(seeded.status().message().find("68719476736 bytes"), std::string::npos)
      << seeded.status().ToString();
}

// A FIFO (no writer: opening it to read waits forever) or a link to
// /dev/zero (endless) where a manifest, a chunk or LATEST belongs is
// refused at once, by what it is, without hanging or reading it.
TEST_F(HostileLocationTest, FifosAndLinksToDevicesAreRefusedWithoutHanging) {
  const ArtifactManifest real = ExportAt(61, "");
  const std::string manifest = Arts() + "/" + real.artifact_id + "/manifest";
  const std::string chunk = Arts() + "/" + real.chunks[0].name;
  const std::string pointer = Arts() + "/LATEST";
  const std::string fold_dir = dir_.path() + "/fold";
  for (const std::string& target : {manifest, chunk, pointer}) {
    for (const bool fifo : {true, false}) {
      SCOPED_TRACE(target + (fifo ? " as a FIFO" : " as a link to /dev/zero"));
      const std::string saved = ReadWholeFile(target);
      fs::remove(target);
      if (fifo) {
        ASSERT_EQ(::mkfifo(target.c_str(), 0600), 0) << std::strerror(errno);
      } else {
        fs::create_symlink("/dev/zero", target);
      }
      auto fold = NewMemoryFold();
      Status s =
          ReadWithin10s([&] { return SeedFold(*fold, *to_, {}).status(); }, fifo ? target : "");
      EXPECT_FALSE(s.ok());
      EXPECT_NE(s.message().find(fifo ? "is a FIFO" : "is a symbolic link"), std::string::npos)
          << s.ToString();
      EXPECT_TRUE(LiveEntries(*fold).empty());
      fs::remove(target);
      WriteFile(target, saved);
    }
  }
  auto fold = NewMemoryFold();
  EXPECT_TRUE(SeedFold(*fold, *to_, {}).ok());
}

// Sets the process's umask for the life of this object.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t old_;
};

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
  return st.st_mode & 0777;
}

// What an export creates (chunks, manifest, LATEST, .lock) gets the
// permissions the operator's umask leaves: never more (a umask of 077 keeps
// the artifacts, and the values in them, to their owner) and never less (a
// group of exporters under umask 002 can all open the .lock to take it).
TEST_F(HostileLocationTest, ArtifactFilesFollowTheUmask) {
  uint64_t cursor = 70;
  for (const mode_t mask : {mode_t{002}, mode_t{022}, mode_t{027}, mode_t{077}}) {
    SCOPED_TRACE("umask " + std::to_string(mask));
    TestDir dir;
    const std::string arts = dir.path() + "/arts";
    ScopedUmask umask(mask);
    auto to = OpenTransport("dir:" + arts, ConnectOptions{},
                            TransportOptions{.create_if_missing = true, .s3 = {}});
    ASSERT_TRUE(to.ok()) << to.status().ToString();
    FoldCommit c;
    c.cursor = ++cursor;
    ASSERT_TRUE(source_->Commit(c).ok());
    auto m = ExportArtifact(*source_, **to, ExportOptions{});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const mode_t want = 0666 & ~mask;
    EXPECT_EQ(ModeOf(arts + "/" + m->chunks[0].name), want);
    EXPECT_EQ(ModeOf(arts + "/" + m->artifact_id + "/manifest"), want);
    EXPECT_EQ(ModeOf(arts + "/LATEST"), want);
    EXPECT_EQ(ModeOf(arts + "/.lock"), want);
    EXPECT_EQ(ModeOf(arts + "/" + m->artifact_id), 0777 & ~mask);
  }
}

// .lock is opened without following a link: a writer to the location that
// replaced it by a link to a path of its choosing must not get an exporter
// (perhaps root) to create a file there, nor to lock someone else's file.
TEST_F(HostileLocationTest, TheLockIsNeverOpenedThroughALink) {
  const ArtifactManifest first = ExportAt(61, "");
  const std::string victim = dir_.path() + "/etc-nologin";
  fs::remove(Arts() + "/.lock");
  fs::create_symlink(victim, Arts() + "/.lock");
  FoldCommit c;
  c.cursor = 62;
  ASSERT_TRUE(source_->Commit(c).ok());
  auto m = ExportArtifact(*source_, *to_, ExportOptions{});
  EXPECT_FALSE(fs::exists(victim)) << "the exporter created a file where .lock pointed";
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("/.lock is a symbolic link"), std::string::npos)
      << m.status().ToString();
  EXPECT_EQ(*LatestArtifactId(*to_), first.artifact_id);
}

// A signing key others can read lets anyone on the machine sign artifacts
// every trusting node accepts: it is refused (as ssh refuses such a key),
// before anything is exported, naming the fix.
TEST_F(HostileLocationTest, ASigningKeyOthersCanReadIsRefused) {
  const std::string key = MakeKeyPair(dir_.path(), "exporter").first;
  for (const mode_t mode : {mode_t{0644}, mode_t{0604}, mode_t{0640}, mode_t{0660}}) {
    SCOPED_TRACE(mode);
    ASSERT_EQ(::chmod(key.c_str(), mode), 0);
    ExportOptions o;
    o.sign_key_file = key;
    auto m = ExportArtifact(*source_, *to_, o);
    ASSERT_FALSE(m.ok());
    EXPECT_TRUE(m.status().IsInvalidArgument()) << m.status().ToString();
    EXPECT_NE(m.status().message().find("can be read by"), std::string::npos)
        << m.status().ToString();
    EXPECT_NE(m.status().message().find("chmod 600 " + key), std::string::npos)
        << m.status().ToString();
    EXPECT_TRUE(to_->List()->empty());
    ScheduledExportOptions scheduled;
    scheduled.bucket = "cfg";
    scheduled.every = std::chrono::minutes(1);
    scheduled.sign_key_file = key;
    EXPECT_TRUE(ScheduledExport::Check(scheduled).IsInvalidArgument());
  }
  uint64_t cursor = 70;
  for (const mode_t mode : {mode_t{0600}, mode_t{0400}}) {
    ASSERT_EQ(::chmod(key.c_str(), mode), 0);
    ExportOptions o;
    o.sign_key_file = key;
    FoldCommit c;
    c.cursor = ++cursor;
    ASSERT_TRUE(source_->Commit(c).ok());
    auto m = ExportArtifact(*source_, *to_, o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_TRUE(m->is_signed);
  }
  // Provisioned by root for the service's group (root:kvfold 0640): the
  // group may read a key that is not the user's own; others never.
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(key.c_str(), 65534, 65534), 0);
    ASSERT_EQ(::chmod(key.c_str(), 0640), 0);
    ExportOptions o;
    o.sign_key_file = key;
    FoldCommit c;
    c.cursor = 2000;
    ASSERT_TRUE(source_->Commit(c).ok());
    auto m = ExportArtifact(*source_, *to_, o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
    EXPECT_TRUE(ExportArtifact(*source_, *to_, o).status().IsInvalidArgument());
  }
}

}  // namespace
}  // namespace kvfold
