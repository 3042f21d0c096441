// Artifacts against a real nats-server: the round trip over both
// transports, the object store layout read back over plain JetStream, the
// pointer under concurrent exporters, the export lease and the CLI.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "artifact/manifest_codec.h"
#include "artifact/object_store_transport.h"
#include "artifact/signer.h"
#include "core/base64.h"
#include "fold_view.h"
#include "kvfold/kvfold.h"
#include "live/bounded_watch.h"
#include "live/cli_process.h"
#include "live/kv_client.h"
#include "live/nats_server.h"
#include "pointer_race.h"

namespace kvfold::live {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

class ArtifactLiveTest : public ::testing::Test {
 protected:
  ArtifactLiveTest() : kv_(server_.url()) { connect_.url = server_.url(); }

  std::unique_ptr<Fold> NewFold(const std::string& name) {
    FoldOptions fo;
    fo.sync = false;
    return std::move(OpenRocksFold(dir_.path() + "/" + name, fo)).value();
  }

  Status CatchUp(Fold& fold, std::vector<uint64_t>* revisions = nullptr) {
    auto source = OpenNatsBucket(connect_, "app");
    if (!source.ok()) return source.status();
    WatchOptions o;
    o.linger = milliseconds(5);
    o.apply = [revisions](const Change& c) {
      if (revisions) revisions->push_back(c.revision);
      return Status::OK();
    };
    return WatchUntilCaughtUp(**source, fold, o);
  }

  json Api(const std::string& subject, const json& body) {
    natsMsg* reply = nullptr;
    const std::string data = body.is_null() ? "" : body.dump();
    EXPECT_EQ(natsConnection_Request(&reply, raw_, subject.c_str(), data.data(),
                                     static_cast<int>(data.size()), 5000),
              NATS_OK);
    json j = json::parse(std::string(natsMsg_GetData(reply), natsMsg_GetDataLength(reply)));
    natsMsg_Destroy(reply);
    return j;
  }

  void SetUp() override {
    ASSERT_EQ(natsConnection_ConnectTo(&raw_, server_.url().c_str()), NATS_OK);
  }
  void TearDown() override { natsConnection_Destroy(raw_); }

  NatsServer server_;
  KvClient kv_;
  TestDir dir_;
  ConnectOptions connect_;
  natsConnection* raw_ = nullptr;
};

TEST_F(ArtifactLiveTest, MirrorExportSeedResumeOverBothTransports) {
  kv_.CreateBucket("app");
  for (int i = 0; i < 2000; ++i)
    kv_.Put("app", "k" + std::to_string(i % 700), "v" + std::to_string(i));
  for (int i = 0; i < 50; ++i) kv_.Delete("app", "k" + std::to_string(i * 3));
  auto exporter = NewFold("exporter");
  ASSERT_TRUE(CatchUp(*exporter).ok());
  int n = 0;
  for (const std::string& loc : {"dir:" + dir_.path() + "/arts", std::string("obj:snapshots")}) {
    SCOPED_TRACE(loc);
    auto to = OpenTransport(loc, connect_, TransportOptions{.create_if_missing = true, .s3 = {}});
    ASSERT_TRUE(to.ok()) << to.status().ToString();
    ExportOptions eo;
    eo.chunk_raw_bytes = 8192;
    auto m = ExportArtifact(*exporter, **to, eo);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_GT(m->chunks.size(), 1u);
    ASSERT_TRUE(VerifyArtifact(**to, m->artifact_id, {}).ok());

    auto seeded = NewFold("seeded" + std::to_string(n++));
    auto s = SeedFold(*seeded, **to, {});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(LiveEntries(*seeded), LiveEntries(*exporter));
    EXPECT_EQ(seeded->ReadMeta()->cursor, exporter->ReadMeta()->cursor);

    // The seeded fold resumes from the artifact's cursor: delta only.
    const uint64_t cursor = *seeded->ReadMeta()->cursor;
    for (int i = 0; i < 5; ++i)
      kv_.Put("app", "new" + std::to_string(n) + "." + std::to_string(i), "x");
    std::vector<uint64_t> revisions;
    ASSERT_TRUE(CatchUp(*seeded, &revisions).ok());
    ASSERT_EQ(revisions.size(), 5u);
    for (uint64_t r : revisions) EXPECT_GT(r, cursor);
    EXPECT_EQ(LiveEntries(*seeded), kv_.Truth("app"));
    ASSERT_TRUE(CatchUp(*exporter).ok());

    // A second, newer export; list shows both, prune keeps the latest.
    auto newer = ExportArtifact(*exporter, **to, eo);
    ASSERT_TRUE(newer.ok()) << newer.status().ToString();
    auto all = ListArtifacts(**to, nullptr);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    ASSERT_EQ(all->size(), 2u);
    EXPECT_EQ(all->back().artifact_id, newer->artifact_id);
    std::vector<std::string> removed;
    ASSERT_TRUE(PruneArtifacts(**to, PruneOptions{.keep = 1, .min_age = {}}, &removed).ok());
    EXPECT_EQ(removed, std::vector<std::string>{m->artifact_id});
    EXPECT_EQ(ListArtifacts(**to, nullptr)->size(), 1u);
    EXPECT_EQ((*(*to)->ReadPointer())->artifact_id, newer->artifact_id);
    EXPECT_TRUE(VerifyArtifact(**to, newer->artifact_id, {}).ok());
  }
}

// What kvfold writes to obj:BUCKET is a NATS object store: read it back
// with nothing but JetStream and check the ADR-20 layout.
TEST_F(ArtifactLiveTest, ObjectStoreLayoutReadsBackOverPlainJetStream) {
  auto to =
      OpenTransport("obj:interop", connect_, TransportOptions{.create_if_missing = true, .s3 = {}});
  ASSERT_TRUE(to.ok());
  std::string payload(300 * 1024 + 17, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>((i * 131) % 251);
  ASSERT_TRUE((*to)->Put("some-artifact/chunk-000000", payload).ok());

  json stream = Api("$JS.API.STREAM.INFO.OBJ_interop", nullptr);
  EXPECT_EQ(stream["config"]["subjects"], json::array({"$O.interop.C.>", "$O.interop.M.>"}));
  EXPECT_EQ(stream["config"]["allow_rollup_hdrs"], true);
  EXPECT_EQ(stream["config"]["discard"], "new");

  const std::string meta_subject =
      "$O.interop.M." + core::Base64UrlEncode("some-artifact/chunk-000000");
  json got = Api("$JS.API.STREAM.MSG.GET.OBJ_interop", {{"last_by_subj", meta_subject}});
  ASSERT_TRUE(got.contains("message")) << got.dump();
  const std::string headers = *core::Base64Decode(got["message"]["hdrs"].get<std::string>());
  EXPECT_NE(headers.find("Nats-Rollup: sub"), std::string::npos) << headers;
  json meta = json::parse(*core::Base64Decode(got["message"]["data"].get<std::string>()));
  EXPECT_EQ(meta["name"], "some-artifact/chunk-000000");
  EXPECT_EQ(meta["bucket"], "interop");
  EXPECT_EQ(meta["size"], payload.size());
  EXPECT_EQ(meta["chunks"], 3);  // 128 KiB object chunks
  EXPECT_EQ(meta["options"]["max_chunk_size"], 128 * 1024);
  EXPECT_EQ(meta["digest"], "SHA-256=" + core::Base64UrlEncode(artifact::Sha256(payload)));
  const std::string nuid = meta["nuid"];
  EXPECT_EQ(nuid.size(), 22u);

  // The data, through an ordered consumer on the chunk subject.
  jsCtx* js = nullptr;
  ASSERT_EQ(natsConnection_JetStream(&js, raw_, nullptr), NATS_OK);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Ordered = true;
  natsSubscription* sub = nullptr;
  const std::string chunk_subject = "$O.interop.C." + nuid;
  ASSERT_EQ(js_SubscribeSync(&sub, js, chunk_subject.c_str(), nullptr, &so, nullptr), NATS_OK);
  std::string data;
  for (int i = 0; i < 3; ++i) {
    natsMsg* m = nullptr;
    ASSERT_EQ(natsSubscription_NextMsg(&m, sub, 5000), NATS_OK);
    EXPECT_LE(natsMsg_GetDataLength(m), 128 * 1024);
    data.append(natsMsg_GetData(m), natsMsg_GetDataLength(m));
    natsMsg_Destroy(m);
  }
  natsSubscription_Destroy(sub);
  jsCtx_Destroy(js);
  EXPECT_EQ(data, payload);

  // Replacing an object purges the old chunks; removing marks it deleted.
  ASSERT_TRUE((*to)->Put("some-artifact/chunk-000000", "short").ok());
  json purged = Api("$JS.API.STREAM.MSG.GET.OBJ_interop", {{"last_by_subj", chunk_subject}});
  EXPECT_TRUE(purged.contains("error")) << "old chunks must be purged";
  ASSERT_TRUE((*to)->Remove("some-artifact/chunk-000000").ok());
  got = Api("$JS.API.STREAM.MSG.GET.OBJ_interop", {{"last_by_subj", meta_subject}});
  meta = json::parse(*core::Base64Decode(got["message"]["data"].get<std::string>()));
  EXPECT_EQ(meta["deleted"], true);
  EXPECT_TRUE((*to)->Get("some-artifact/chunk-000000", 1 << 20).status().IsNotFound());
}

// A publish whose ack is lost after the write landed: the transport must
// find out by reading back, never purge the data the new meta names (that
// left LATEST unreadable and every later export failing).
TEST_F(ArtifactLiveTest, LostPublishAckNeverBricksThePointerOrAnObject) {
  std::atomic<int> lose{0};
  std::string lose_subject;
  artifact::ObjectStoreFaults faults;
  faults.lose_ack = [&](const std::string& subject) {
    if (subject != lose_subject || lose.load() == 0) return false;
    --lose;
    return true;
  };
  auto to = artifact::OpenObjectStoreTransport(connect_, "lossy", true, faults);
  ASSERT_TRUE(to.ok()) << to.status().ToString();
  ASSERT_TRUE((*to)->AdvancePointer({"a", 1, "app", "t"}).ok());

  lose_subject = "$O.lossy.M." + core::Base64UrlEncode("LATEST");
  lose = 1;
  Status swapped = (*to)->AdvancePointer({"b", 2, "app", "t"});
  EXPECT_EQ(lose.load(), 0);
  EXPECT_TRUE(swapped.ok()) << swapped.ToString();
  auto pointer = (*to)->ReadPointer();
  ASSERT_TRUE(pointer.ok()) << pointer.status().ToString();
  ASSERT_TRUE(pointer->has_value());
  EXPECT_EQ((*pointer)->artifact_id, "b");
  EXPECT_TRUE((*to)->AdvancePointer({"c", 3, "app", "t"}).ok());

  const std::string payload(200 * 1024, 'p');  // two object chunks
  ASSERT_TRUE((*to)->Put("x/obj", "old").ok());
  lose_subject = "$O.lossy.M." + core::Base64UrlEncode("x/obj");
  lose = 1;
  Status put = (*to)->Put("x/obj", payload);
  EXPECT_TRUE(put.ok()) << put.ToString();
  auto got = (*to)->Get("x/obj", uint64_t{1} << 30);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, payload);
}

// A pointer whose data is gone (as the old purge-on-any-error left it) is
// reported with the way to reset it, not retried as if it kept changing.
TEST_F(ArtifactLiveTest, APointerNamingPurgedDataSaysHowToResetIt) {
  auto to =
      OpenTransport("obj:bricked", connect_, TransportOptions{.create_if_missing = true, .s3 = {}});
  ASSERT_TRUE(to.ok());
  ASSERT_TRUE((*to)->AdvancePointer({"a", 1, "app", "t"}).ok());
  const std::string meta_subject = "$O.bricked.M." + core::Base64UrlEncode("LATEST");
  json got = Api("$JS.API.STREAM.MSG.GET.OBJ_bricked", {{"last_by_subj", meta_subject}});
  json meta = json::parse(*core::Base64Decode(got["message"]["data"].get<std::string>()));
  Api("$JS.API.STREAM.PURGE.OBJ_bricked",
      {{"filter", "$O.bricked.C." + meta["nuid"].get<std::string>()}});
  Status s = (*to)->AdvancePointer({"b", 2, "app", "t"});
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("purge subject " + meta_subject), std::string::npos) << s.ToString();
  Api("$JS.API.STREAM.PURGE.OBJ_bricked", {{"filter", meta_subject}});
  EXPECT_TRUE((*to)->AdvancePointer({"b", 2, "app", "t"}).ok());
}

// The server dies between storing the new pointer meta and answering: the
// outcome is unknown, the transport says so and purges nothing; after a
// restart the pointer is whole and moves on.
TEST_F(ArtifactLiveTest, ServerKilledMidSwapLeavesAWholePointer) {
  bool kill = false;
  artifact::ObjectStoreFaults faults;
  faults.lose_ack = [&](const std::string& subject) {
    if (!kill || subject.find(".M.") == std::string::npos) return false;
    kill = false;
    server_.Kill();
    return true;
  };
  {
    auto to = artifact::OpenObjectStoreTransport(connect_, "killed", true, faults);
    ASSERT_TRUE(to.ok()) << to.status().ToString();
    ASSERT_TRUE((*to)->AdvancePointer({"a", 1, "app", "t"}).ok());
    kill = true;
    Status swapped = (*to)->AdvancePointer({"b", 2, "app", "t"});
    EXPECT_FALSE(swapped.ok());
    EXPECT_NE(swapped.message().find("the outcome is unknown"), std::string::npos)
        << swapped.ToString();
  }
  server_.Start();
  auto to = OpenTransport("obj:killed", connect_);
  ASSERT_TRUE(to.ok()) << to.status().ToString();
  auto pointer = (*to)->ReadPointer();
  ASSERT_TRUE(pointer.ok()) << pointer.status().ToString();
  ASSERT_TRUE(pointer->has_value());
  EXPECT_EQ((*pointer)->artifact_id, "b");  // it landed before the kill
  EXPECT_TRUE((*to)->AdvancePointer({"c", 3, "app", "t"}).ok());
  EXPECT_EQ((*(*to)->ReadPointer())->artifact_id, "c");
}

// Meta and lease values of the right syntax but the wrong types are
// Corruption, never an exception through the API (or a dead export thread).
TEST_F(ArtifactLiveTest, WrongTypedObjectMetaAndLeaseAreCorruption) {
  auto to =
      OpenTransport("obj:typed", connect_, TransportOptions{.create_if_missing = true, .s3 = {}});
  ASSERT_TRUE(to.ok());
  auto publish = [&](const std::string& subject, const std::string& data) {
    natsMsg* reply = nullptr;
    ASSERT_EQ(natsConnection_Request(&reply, raw_, subject.c_str(), data.data(),
                                     static_cast<int>(data.size()), 5000),
              NATS_OK);
    natsMsg_Destroy(reply);
  };
  publish("$O.typed.M." + core::Base64UrlEncode("bad/deleted"),
          R"({"nuid":"0123456789ABCDEFGHIJKL","deleted":"yes"})");
  publish("$O.typed.M." + core::Base64UrlEncode("bad/size"),
          R"({"nuid":"0123456789ABCDEFGHIJKL","size":"10"})");
  for (const char* name : {"bad/deleted", "bad/size"}) {
    EXPECT_TRUE((*to)->Get(name, 1 << 20).status().IsCorruption()) << name;
    EXPECT_TRUE((*to)->Remove(name).IsCorruption()) << name;
  }
  EXPECT_TRUE((*to)->List().status().IsCorruption());
  publish("$O.typed.M." + core::Base64UrlEncode("LATEST"),
          R"({"nuid":"0123456789ABCDEFGHIJKL","chunks":"1"})");
  EXPECT_TRUE((*to)->ReadPointer().status().IsCorruption());

  auto lease = ExportLease::Open(connect_, "leases");
  ASSERT_TRUE(lease.ok());
  publish("$KV.leases.export.app", R"({"holder":1,"expires_unix_ms":5})");
  auto won = (*lease)->TryAcquire("export.app", "node-a", milliseconds(1000));
  EXPECT_TRUE(won.status().IsCorruption()) << won.status().ToString();
  publish("$KV.leases.export.app", "");  // deleting the key frees it
  won = (*lease)->TryAcquire("export.app", "node-a", milliseconds(1000));
  ASSERT_TRUE(won.ok()) << won.status().ToString();
  EXPECT_TRUE(*won);
}

// A meta record's nuid goes into the chunk subject that reads and purges
// filter on: one that is not a NATS nuid ('>' would purge every object's
// chunks, "a.*" a whole sub-tree) is corruption, and no Get, Put or Remove
// of its object touches another object's data.
TEST_F(ArtifactLiveTest, AMetaWhoseNuidIsNoNuidIsCorruptionAndPurgesNothing) {
  auto to =
      OpenTransport("obj:crafted", connect_, TransportOptions{.create_if_missing = true, .s3 = {}});
  ASSERT_TRUE(to.ok()) << to.status().ToString();
  const std::string good(300 * 1024, 'g');  // three chunks
  ASSERT_TRUE((*to)->Put("keep/obj", good).ok());
  auto publish = [&](const std::string& name, const std::string& nuid) {
    const json meta = {{"name", name}, {"bucket", "crafted"}, {"nuid", nuid},
                       {"size", 3},    {"chunks", 1},         {"digest", "SHA-256=x"}};
    const std::string data = meta.dump();
    const std::string subject = "$O.crafted.M." + core::Base64UrlEncode(name);
    natsMsg* reply = nullptr;
    ASSERT_EQ(natsConnection_Request(&reply, raw_, subject.c_str(), data.data(),
                                     static_cast<int>(data.size()), 5000),
              NATS_OK);
    natsMsg_Destroy(reply);
  };
  for (const std::string nuid : {">", "*", "keep.>", "0123456789 BCDEFGHIJKL", "a.b"}) {
    SCOPED_TRACE("nuid \"" + nuid + "\"");
    publish("bad/obj", nuid);
    auto read = (*to)->Get("bad/obj", 1 << 20);
    EXPECT_TRUE(read.status().IsCorruption()) << read.status().ToString();
    EXPECT_NE(read.status().message().find("is not a NATS nuid"), std::string::npos)
        << read.status().ToString();
    Status removed = (*to)->Remove("bad/obj");
    EXPECT_TRUE(removed.IsCorruption()) << removed.ToString();
    Status replaced = (*to)->Put("bad/obj", "new data");
    EXPECT_TRUE(replaced.IsCorruption()) << replaced.ToString();
    auto kept = (*to)->Get("keep/obj", 1 << 20);
    ASSERT_TRUE(kept.ok()) << "another object's chunks were purged: " << kept.status().ToString();
    EXPECT_EQ(*kept, good);
  }
  // The pointer's meta too: the swap refuses it and purges nothing.
  publish("LATEST", ">");
  EXPECT_TRUE((*to)->ReadPointer().status().IsCorruption());
  auto kept = (*to)->Get("keep/obj", 1 << 20);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
}

// A multi-chunk object whose chunks were purged (a concurrent prune) fails
// at once, not after the connection timeout.
TEST_F(ArtifactLiveTest, MultiChunkReadOfPurgedChunksFailsFast) {
  auto to =
      OpenTransport("obj:purged", connect_, TransportOptions{.create_if_missing = true, .s3 = {}});
  ASSERT_TRUE(to.ok());
  ASSERT_TRUE((*to)->Put("x/obj", std::string(300 * 1024, 'q')).ok());
  json got = Api("$JS.API.STREAM.MSG.GET.OBJ_purged",
                 {{"last_by_subj", "$O.purged.M." + core::Base64UrlEncode("x/obj")}});
  json meta = json::parse(*core::Base64Decode(got["message"]["data"].get<std::string>()));
  Api("$JS.API.STREAM.PURGE.OBJ_purged",
      {{"filter", "$O.purged.C." + meta["nuid"].get<std::string>()}});
  const auto start = std::chrono::steady_clock::now();
  auto read = (*to)->Get("x/obj", uint64_t{1} << 30);
  EXPECT_TRUE(read.status().IsNotFound()) << read.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1500));
}

TEST_F(ArtifactLiveTest, PointerNeverMovesBackwardUnderTwoConcurrentExporters) {
  RacePointer(
      [&] {
        return std::move(OpenTransport("obj:race", connect_,
                                       TransportOptions{.create_if_missing = true, .s3 = {}}))
            .value();
      },
      60);
}

// nats.c runs a closed connection's disconnect callback on its own thread,
// possibly after the connection object is gone; opening and dropping many
// connections must never touch freed memory (this fails under ASan when a
// callback is handed a raw pointer to the connection).
TEST_F(ArtifactLiveTest, ConnectionsOpenedAndDroppedRepeatedlyCloseCleanly) {
  auto first =
      OpenTransport("obj:churn", connect_, TransportOptions{.create_if_missing = true, .s3 = {}});
  ASSERT_TRUE(first.ok());
  first->reset();
  for (int i = 0; i < 400; ++i) {
    auto t = OpenTransport("obj:churn", connect_);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    auto pointer = (*t)->ReadPointer();
    ASSERT_TRUE(pointer.ok() && !*pointer);
  }
}

TEST_F(ArtifactLiveTest, ExportLeaseHasOneHolderPerRound) {
  auto a = ExportLease::Open(connect_, "leases");
  auto b = ExportLease::Open(connect_, "leases");
  ASSERT_TRUE(a.ok() && b.ok());
  // Long leases where a check must not see them expire; one short one to
  // watch expire, so a stalled test machine cannot flip an outcome.
  EXPECT_TRUE(*(*a)->TryAcquire("export.app", "node-a", milliseconds(60000)));
  EXPECT_FALSE(*(*b)->TryAcquire("export.app", "node-b", milliseconds(60000)));
  EXPECT_TRUE(*(*a)->TryAcquire("export.app", "node-a", milliseconds(500)));  // renew, shorter
  std::this_thread::sleep_for(milliseconds(700));
  EXPECT_TRUE(*(*b)->TryAcquire("export.app", "node-b", milliseconds(60000)));
  EXPECT_FALSE(*(*a)->TryAcquire("export.app", "node-a", milliseconds(60000)));
  // Racing for a free lease: exactly one of many wins.
  std::atomic<int> winners{0};
  std::vector<std::thread> racers;
  for (int i = 0; i < 6; ++i) {
    racers.emplace_back([&, i] {
      auto l = ExportLease::Open(connect_, "leases");
      if (*(*l)->TryAcquire("export.race", "node-" + std::to_string(i), milliseconds(60000)))
        ++winners;
    });
  }
  for (auto& t : racers) t.join();
  EXPECT_EQ(winners.load(), 1);
}

// A lease record written by hand with a far-future expiry would make every
// node "other node" forever: past a few periods it is no holder's, and the
// next node takes it over and says so (issue 36, item 4).
TEST_F(ArtifactLiveTest, ASquattedLeaseIsTakenOverAndSaid) {
  std::vector<std::string> warned;
  auto lease = ExportLease::Open(
      connect_, "leases",
      LeaseOptions{.warn = [&warned](const std::string& line) { warned.push_back(line); }});
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  natsMsg* reply = nullptr;
  const std::string squat = R"({"holder":"squatter","expires_unix_ms":32503680000000})";
  ASSERT_EQ(natsConnection_Request(&reply, raw_, "$KV.leases.export.app", squat.data(),
                                   static_cast<int>(squat.size()), 5000),
            NATS_OK);
  natsMsg_Destroy(reply);
  auto won = (*lease)->TryAcquire("export.app", "node-a", milliseconds(60000));
  ASSERT_TRUE(won.ok()) << won.status().ToString();
  EXPECT_TRUE(*won);
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_NE(warned[0].find("\"squatter\""), std::string::npos) << warned[0];
  EXPECT_NE(warned[0].find("taking it over"), std::string::npos) << warned[0];
  // Taken: node-a's record now, honoured as any other.
  auto b = ExportLease::Open(connect_, "leases");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(*(*b)->TryAcquire("export.app", "node-b", milliseconds(60000)));
}

// The CLI end to end: scheduled export from a running mirror, then list,
// inspect, verify, seed into a new fold, and a corrupt chunk caught.
TEST_F(ArtifactLiveTest, CliScheduledExportSeedAndVerify) {
  kv_.CreateBucket("app");
  for (int i = 0; i < 500; ++i) kv_.Put("app", "k" + std::to_string(i), "v");
  const std::string arts = "dir:" + dir_.path() + "/arts";
  auto run = [&](const std::vector<std::string>& args, std::string* out = nullptr) {
    CliExit e = RunCli(args, dir_.path());
    if (out) *out = e.out;
    return e.code;
  };
  pid_t mirror = SpawnCli(
      {"mirror", "--server", server_.url(), "--bucket", "app", "--fold", dir_.path() + "/fold",
       "--export-to", arts, "--export-every", "300ms", "--lease-bucket", "leases"},
      dir_.path() + "/mirror.out", dir_.path() + "/mirror.err");
  std::string listing;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (run({"artifacts", "list", arts}, &listing) == 0 &&
        listing.find("latest") != std::string::npos &&
        listing.find("500 entries") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  kill(mirror, SIGTERM);
  EXPECT_EQ(WaitExit(mirror), 0) << ReadWholeFile(dir_.path() + "/mirror.err");
  ASSERT_NE(listing.find("500 entries"), std::string::npos) << listing;

  std::string inspect;
  ASSERT_EQ(run({"artifacts", "inspect", arts, "--json"}, &inspect), 0);
  json m = json::parse(inspect);
  EXPECT_EQ(m["bucket"], "app");
  EXPECT_EQ(m["entries"], 500);
  EXPECT_EQ(m["latest"], true);
  EXPECT_TRUE(m["anchored"].is_string()) << m.dump();
  EXPECT_TRUE(m["current_by_window_until"].is_null()) << m.dump();  // no limit markers
  EXPECT_EQ(run({"artifacts", "verify", arts}), 0);
  EXPECT_EQ(run({"seed", "--fold", dir_.path() + "/seeded", "--from", arts, "--bucket", "app"}), 0);
  EXPECT_EQ(run({"seed", "--fold", dir_.path() + "/seeded", "--from", arts}), 1);  // not empty
  std::string a, b;
  run({"dump", "--fold", dir_.path() + "/fold", "--json"}, &a);
  run({"dump", "--fold", dir_.path() + "/seeded", "--json"}, &b);
  EXPECT_EQ(a, b);

  // Corrupt one chunk: verify names it and fails.
  const std::string chunk =
      dir_.path() + "/arts/" + m["artifact"].get<std::string>() + "/chunk-000000";
  std::string bytes = ReadWholeFile(chunk);
  bytes[bytes.size() / 2] ^= 1;
  std::ofstream(chunk, std::ios::binary) << bytes;
  EXPECT_EQ(run({"artifacts", "verify", arts}), 1);
  EXPECT_EQ(run({"seed", "--fold", dir_.path() + "/other", "--from", arts}), 1);
  // The refused seed left nothing behind: not even the directory.
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/other"));
  // Into an existing empty directory: it stays empty.
  std::filesystem::create_directory(dir_.path() + "/empty");
  EXPECT_EQ(run({"seed", "--fold", dir_.path() + "/empty", "--from", arts}), 1);
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path() + "/empty"));
}

// LATEST rewritten by hand, by anyone who can write the directory, to name
// an artifact that does not exist at the stream's head (a quiet bucket: the
// fold stays there) or at the highest cursor: the mirror's next round
// replaces it and says so, instead of counting "unchanged" forever (issue
// 36, item 3; before, no artifact was written again and nothing was said).
TEST_F(ArtifactLiveTest, CliMirrorReplacesAForgedLatestPointer) {
  kv_.CreateBucket("app");
  for (int i = 0; i < 50; ++i) kv_.Put("app", "k" + std::to_string(i), "v");
  const std::string arts = dir_.path() + "/arts";
  pid_t mirror = SpawnCli(
      {"mirror", "--server", server_.url(), "--bucket", "app", "--fold", dir_.path() + "/fold",
       "--export-to", "dir:" + arts, "--export-every", "300ms", "--lease-bucket", "leases"},
      dir_.path() + "/mirror.out", dir_.path() + "/mirror.err");
  auto latest = [&] {
    const json p = json::parse(ReadWholeFile(arts + "/LATEST"), nullptr, false);
    return p.is_discarded() ? json::object() : p;
  };
  auto wait_for = [&](const std::function<bool(const json&)>& ok) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (ok(latest())) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  };
  ASSERT_TRUE(wait_for([](const json& p) { return p.value("cursor", 0) == 50; }))
      << ReadWholeFile(dir_.path() + "/mirror.err");
  for (const std::string cursor : {"50", "18446744073709551615"}) {
    SCOPED_TRACE("forged at cursor " + cursor);
    json forged = latest();
    forged["artifact"] = "forged-" + cursor;
    forged["cursor"] = std::stoull(cursor);
    std::ofstream(arts + "/LATEST.tmp") << forged.dump();
    std::filesystem::rename(arts + "/LATEST.tmp", arts + "/LATEST");
    EXPECT_TRUE(wait_for([&](const json& p) {
      return p.value("cursor", uint64_t{0}) == 50 && p.value("artifact", "") != forged["artifact"];
    })) << latest().dump();
  }
  kill(mirror, SIGTERM);
  EXPECT_EQ(WaitExit(mirror), 0);
  const std::string err = ReadWholeFile(dir_.path() + "/mirror.err");
  EXPECT_NE(err.find("replaced the latest pointer"), std::string::npos) << err;
  EXPECT_NE(err.find("named artifact forged-50"), std::string::npos) << err;
  EXPECT_EQ(
      RunCli({"seed", "--fold", dir_.path() + "/seeded", "--from", "dir:" + arts}, dir_.path())
          .code,
      0);
}

// Prune keeps what a seed may still be reading (--min-age); when an
// artifact is pruned from under an unfinished seed anyway, seed says so and
// --discard-unfinished seeds from the latest instead.
TEST_F(ArtifactLiveTest, CliPruneMinAgeAndDiscardingAnUnfinishedSeed) {
  kv_.CreateBucket("app");
  for (int i = 0; i < 50; ++i) kv_.Put("app", "k" + std::to_string(i), "v");
  const std::string arts = "dir:" + dir_.path() + "/arts";
  const std::string fold = dir_.path() + "/fold", seeded = dir_.path() + "/seeded";
  auto run = [&](const std::vector<std::string>& args) { return RunCli(args, dir_.path()); };
  auto mirror_and_export = [&] {
    ASSERT_EQ(run({"mirror", "--server", server_.url(), "--bucket", "app", "--fold", fold,
                   "--until-caught-up"})
                  .code,
              0);
    ASSERT_EQ(run({"export", "--fold", fold, "--to", arts}).code, 0);
  };
  mirror_and_export();
  auto to = OpenTransport(arts, connect_);
  ASSERT_TRUE(to.ok());
  const std::string first = *LatestArtifactId(**to);
  {
    // A seed killed after its first chunk, as the fold records it.
    auto partial = OpenRocksFold(seeded);
    ASSERT_TRUE(partial.ok());
    FoldCommit c;
    c.entries["stale"] = Entry{1, false, "from the old artifact"};
    c.seeding = first;
    ASSERT_TRUE((*partial)->Commit(c).ok());
  }
  kv_.Delete("app", "k0");
  kv_.Put("app", "k50", "v");
  mirror_and_export();

  CliExit young = run({"artifacts", "prune", arts, "--keep", "1"});
  EXPECT_EQ(young.code, 0) << young.err;
  EXPECT_EQ(young.out, "");
  EXPECT_EQ(ListArtifacts(**to, nullptr)->size(), 2u);
  CliExit pruned = run({"artifacts", "prune", arts, "--keep", "1", "--min-age", "0s"});
  EXPECT_EQ(pruned.code, 0) << pruned.err;
  EXPECT_EQ(pruned.out, "removed " + first + "\n");

  CliExit gone = run({"seed", "--fold", seeded, "--from", arts});
  EXPECT_EQ(gone.code, 1);
  EXPECT_NE(gone.err.find("which is gone from"), std::string::npos) << gone.err;
  EXPECT_NE(gone.err.find("--discard-unfinished"), std::string::npos) << gone.err;
  CliExit discarded = run({"seed", "--fold", seeded, "--from", arts, "--discard-unfinished"});
  EXPECT_EQ(discarded.code, 0) << discarded.err;
  EXPECT_EQ(run({"dump", "--fold", seeded}).out, run({"dump", "--fold", fold}).out);
}

// Invariant: an artifact of bucket A never seeds a fold for bucket B, asked
// for by --bucket or recorded in the fold; the refusal names both and
// leaves nothing behind. The unit tests (artifact_test.cc) pin the rule on
// the library; this is the kvfold binary, RocksDB and a real export.
TEST_F(ArtifactLiveTest, CliSeedRefusesAnArtifactOfAnotherBucket) {
  kv_.CreateBucket("app");
  for (int i = 0; i < 20; ++i) kv_.Put("app", "k" + std::to_string(i), "v");
  const std::string arts = "dir:" + dir_.path() + "/arts";
  auto run = [&](const std::vector<std::string>& args) { return RunCli(args, dir_.path()); };
  ASSERT_EQ(run({"mirror", "--server", server_.url(), "--bucket", "app", "--fold",
                 dir_.path() + "/fold", "--until-caught-up"})
                .code,
            0);
  ASSERT_EQ(run({"export", "--fold", dir_.path() + "/fold", "--to", arts}).code, 0);

  const std::string fresh = dir_.path() + "/fresh";
  CliExit asked = run({"seed", "--fold", fresh, "--from", arts, "--bucket", "other"});
  EXPECT_EQ(asked.code, 1) << asked.err;
  EXPECT_NE(asked.err.find("is of bucket app, not other"), std::string::npos) << asked.err;
  EXPECT_FALSE(std::filesystem::exists(fresh));

  // A fold that records bucket other (its first mirror received nothing)
  // takes only that bucket's artifacts, with no --bucket to say so.
  const std::string recorded = dir_.path() + "/recorded";
  {
    auto fold = NewFold("recorded");
    FoldCommit first_run;
    first_run.bucket = "other";
    first_run.scope = std::vector<std::string>{""};
    ASSERT_TRUE(fold->Commit(first_run).ok());
  }
  const std::string before = run({"dump", "--fold", recorded, "--json"}).out;
  const std::string status_before = run({"status", "--fold", recorded, "--json"}).out;
  CliExit implied = run({"seed", "--fold", recorded, "--from", arts});
  EXPECT_EQ(implied.code, 1) << implied.err;
  EXPECT_NE(implied.err.find("is of bucket app, not other"), std::string::npos) << implied.err;
  EXPECT_EQ(run({"dump", "--fold", recorded, "--json"}).out, before);
  EXPECT_EQ(run({"status", "--fold", recorded, "--json"}).out, status_before);

  // The artifact itself is fine: the bucket was the only reason.
  EXPECT_EQ(run({"seed", "--fold", fresh, "--from", arts, "--bucket", "app"}).code, 0);
}

// Invariant: an artifact whose manifest needs a newer reader than this
// build is refused by every path that reads it -- verify, seed, and a
// running mirror's restore -- with an error naming both versions and the
// fix, and nothing is written. artifact_test.cc pins the rule on the
// library's seed; here a real mirror, which would otherwise restore from
// this very artifact (fresh, same stream, inside retention), must refuse it
// and leave its fold as it was.
TEST_F(ArtifactLiveTest, CliRefusesAnArtifactOfANewerSchemaOnEveryPath) {
  kv_.CreateBucket("app", {{"max_msgs", 30}, {"discard", "old"}});
  for (int i = 0; i < 10; ++i) kv_.Put("app", "k" + std::to_string(i), "v");
  const std::string arts = "dir:" + dir_.path() + "/arts";
  const std::string behind = dir_.path() + "/behind", ahead = dir_.path() + "/ahead";
  auto run = [&](const std::vector<std::string>& args) { return RunCli(args, dir_.path()); };
  auto mirror = [&](const std::string& fold, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"mirror", "--server", server_.url(), "--bucket",
                                     "app",    "--fold",   fold,          "--until-caught-up"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  ASSERT_EQ(mirror(behind, {}).code, 0);
  // The bucket evicts what `behind` has not read; a node that kept up (by
  // --repair none from a fresh start here) exports an artifact it could use.
  for (int i = 0; i < 50; ++i) kv_.Put("app", "n" + std::to_string(i), "w");
  ASSERT_EQ(mirror(ahead, {"--repair", "none"}).code, 0);
  ASSERT_EQ(run({"export", "--fold", ahead, "--to", arts}).code, 0);

  auto to = OpenTransport(arts, connect_);
  ASSERT_TRUE(to.ok());
  const std::string id = *LatestArtifactId(**to);
  const std::string manifest_path = dir_.path() + "/arts/" + id + "/manifest";
  wire::ManifestEnvelope env;
  wire::Manifest m;
  ASSERT_TRUE(artifact::DecodeManifestFrame(ReadWholeFile(manifest_path), "m", &env, &m).ok());
  m.set_schema_version(7);
  m.set_min_reader_version(5);
  env.set_manifest(m.SerializeAsString());
  const std::string newer = artifact::EncodeManifestFrame(env);
  std::ofstream(manifest_path, std::ios::binary | std::ios::trunc) << newer;
  const std::string why =
      "has schema version 7 and needs a reader of schema 5 or newer; this kvfold reads schema " +
      std::to_string(kArtifactSchemaVersion) + ". Upgrade kvfold on this node.";

  CliExit verify = run({"artifacts", "verify", arts});
  EXPECT_EQ(verify.code, 1) << verify.err;
  EXPECT_NE(verify.err.find(why), std::string::npos) << verify.err;

  CliExit seed = run({"seed", "--fold", dir_.path() + "/seeded", "--from", arts});
  EXPECT_EQ(seed.code, 1) << seed.err;
  EXPECT_NE(seed.err.find(why), std::string::npos) << seed.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/seeded"));

  const std::string dump_before = run({"dump", "--fold", behind, "--json"}).out;
  CliExit restore =
      mirror(behind, {"--repair", "restore", "--artifacts", arts, "--repair-timeout", "1s"});
  EXPECT_EQ(restore.code, 3) << restore.err;
  EXPECT_NE(restore.err.find(why), std::string::npos) << restore.err;
  EXPECT_EQ(run({"dump", "--fold", behind, "--json"}).out, dump_before);
  EXPECT_EQ(ReadWholeFile(manifest_path), newer);  // nobody rewrote or removed it
}

}  // namespace
}  // namespace kvfold::live
