// A message lost between a real nats-server and the ordered consumer
// (src/nats/ordered_delivery.cc): a proxy on the wire drops one delivery,
// and the watcher, through the product's own BucketSource, must notice the
// gap -- from the next message's consumer sequence, or, when the lost one
// was the last before a silence, from the idle heartbeat -- and fetch it
// again from the last sequence it received. Only the watcher's connection
// crosses the proxy; the test's writer talks to the server directly.

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "fold_view.h"
#include "kvfold/kvfold.h"
#include "live/bounded_watch.h"
#include "live/kv_client.h"
#include "live/must.h"
#include "live/nats_proxy.h"
#include "live/nats_server.h"

namespace kvfold::live {
namespace {

// Waits until the fold's committed cursor reaches SEQ, or LIMIT passes (the
// caller asserts the cursor: a bound, not a target).
void WaitForCursor(Fold& fold, uint64_t seq, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (fold.ReadMeta()->cursor.value_or(0) < seq && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

using std::chrono::milliseconds;

// The parser meets frames split at any byte (a TCP read returns what it
// has): it must forward every frame whole and drop exactly the armed one.
std::string Msg(const std::string& subject, const std::string& reply, const std::string& data) {
  return "MSG " + subject + " 7 " + (reply.empty() ? "" : reply + " ") +
         std::to_string(data.size()) + "\r\n" + data + "\r\n";
}

std::string HMsg(const std::string& subject, const std::string& reply, const std::string& header,
                 const std::string& data) {
  return "HMSG " + subject + " 7 " + (reply.empty() ? "" : reply + " ") +
         std::to_string(header.size()) + " " + std::to_string(header.size() + data.size()) +
         "\r\n" + header + data + "\r\n";
}

// The parser meets frames split at any byte (a TCP read returns what it
// has): it must forward every frame whole and drop exactly the armed one.
TEST(NatsProxyTest, FramesSplitAtEveryByteAreForwardedWholeOrDroppedWhole) {
  const std::string ack = "$JS.ACK.KV_b.c.1.";
  const std::string keep1 = Msg("$KV.b.k1", ack + "1.1.0.0", "v1");
  const std::string heartbeat =
      HMsg("_INBOX.x", "", "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1\r\n\r\n", "");
  const std::string no_ack = Msg("$KV.b.k2", "_INBOX.reply", "not a delivery\r\nMSG x 1 3");
  const std::string drop = HMsg("$KV.b.k2", ack + "2.2.0.0", "NATS/1.0\r\n\r\n", "v2");
  const std::string keep2 = HMsg("$KV.b.k2", ack + "3.3.0.0", "NATS/1.0\r\n\r\n", "v2b");
  const std::string ctl = "PING\r\n+OK\r\nINFO {\"a\":1}\r\n";
  const std::string wire = ctl + keep1 + heartbeat + no_ack + drop + keep2 + ctl;
  for (size_t step : {size_t{1}, size_t{2}, size_t{7}, wire.size()}) {
    SCOPED_TRACE(step);
    NatsProxy proxy(1);  // no client connects: only the parser runs
    proxy.DropNextDelivery("$KV.b.k2");
    std::string buffer, out;
    for (size_t i = 0; i < wire.size(); i += step) {
      buffer += wire.substr(i, step);
      proxy.FilterServerBytes(&buffer, &out);
    }
    EXPECT_EQ(buffer, "");
    EXPECT_EQ(out, ctl + keep1 + heartbeat + no_ack + keep2 + ctl);
    EXPECT_EQ(proxy.dropped(), 1);
  }
}

// The same for what a client sends: PUB and HPUB with and without a
// reply, a payload that looks like a frame, and CONNECT's JSON, split at
// any byte; exactly the consumer delete is lost while armed.
TEST(NatsProxyTest, ClientFramesSplitAtEveryByteAreForwardedWholeOrLostWhole) {
  const std::string connect = "CONNECT {\"verbose\":false,\"headers\":true}\r\n";
  const std::string sub = "SUB _INBOX.x.* 1\r\nPING\r\n";
  const std::string pub = "PUB $KV.b.k1 5\r\nhello\r\n";
  const std::string tricky = "PUB $JS.API.STREAM.INFO.KV_b _INBOX.x.1 14\r\nPUB x 3\r\nabc!!\r\n";
  const std::string hpub = "HPUB $KV.b.k2 _INBOX.x.2 12 14\r\nNATS/1.0\r\n\r\nv2\r\n";
  const std::string del = "PUB $JS.API.CONSUMER.DELETE.KV_b.c1 _INBOX.x.3 0\r\n\r\n";
  const std::string hdel =
      "HPUB $JS.API.CONSUMER.DELETE.KV_b.c2 _INBOX.x.4 12 12\r\nNATS/1.0\r\n\r\n\r\n";
  const std::string wire = connect + sub + pub + del + tricky + hdel + hpub + "PONG\r\n";
  for (bool losing : {false, true}) {
    for (size_t step : {size_t{1}, size_t{2}, size_t{7}, wire.size()}) {
      SCOPED_TRACE(std::to_string(step) + (losing ? " losing" : ""));
      NatsProxy proxy(1);  // no client connects: only the parser runs
      proxy.LoseConsumerDeletes(losing);
      std::string buffer, out;
      for (size_t i = 0; i < wire.size(); i += step) {
        buffer += wire.substr(i, step);
        proxy.FilterClientBytes(&buffer, &out);
      }
      EXPECT_EQ(buffer, "");
      EXPECT_EQ(out, losing ? connect + sub + pub + tricky + hpub + "PONG\r\n" : wire);
      EXPECT_EQ(proxy.lost_deletes(), losing ? 2 : 0);
    }
  }
}

class DeliveryGapLiveTest : public ::testing::Test {
 protected:
  DeliveryGapLiveTest() : proxy_(server_.port()), kv_(server_.url()) {}

  std::unique_ptr<BucketSource> SourceThroughProxy(const std::string& bucket) {
    ConnectOptions o;
    o.url = proxy_.url();
    auto s = OpenNatsBucket(o, bucket);
    return Must(std::move(s), "opening bucket " + bucket);
  }

  std::unique_ptr<Fold> OpenFold() {
    FoldOptions fo;
    fo.sync = false;
    auto f = OpenRocksFold(dir_.path() + "/fold", fo);
    return Must(std::move(f), "opening a fold");
  }

  // Options that record the log and every revision the hook is fed.
  WatchOptions Recorded() {
    WatchOptions o;
    o.linger = milliseconds(5);
    o.reconnect_backoff_min = milliseconds(50);
    o.log = [this](std::string_view line) {
      std::fprintf(stderr, "watch: %.*s\n", static_cast<int>(line.size()), line.data());
      std::lock_guard<std::mutex> lock(mu_);
      log_ += std::string(line) + "\n";
    };
    o.apply = [this](const Change& c) {
      std::lock_guard<std::mutex> lock(mu_);
      revisions_.push_back(c.revision);
      return Status::OK();
    };
    return o;
  }

  static size_t Count(const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      ++n;
    }
    return n;
  }

  std::string Log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  std::vector<uint64_t> Revisions() {
    std::lock_guard<std::mutex> lock(mu_);
    return revisions_;
  }

  static std::vector<uint64_t> Range(uint64_t first, uint64_t last) {
    std::vector<uint64_t> out;
    for (uint64_t s = first; s <= last; ++s) out.push_back(s);
    return out;
  }

  // A watch through the proxy, in a thread of its own; stopped and joined
  // when it dies, so a failed assertion cannot leave the thread running.
  struct RunningWatch {
    std::unique_ptr<BucketSource> source;
    std::unique_ptr<Fold> fold;
    std::stop_source stop;
    Status status;
    std::thread thread;
    ~RunningWatch() { Stop(); }
    // Stops and joins the watch; what it returned.
    const Status& Stop() {
      if (thread.joinable()) {
        stop.request_stop();
        thread.join();
      }
      return status;
    }
  };

  // Creates `bucket` with k0..k4 and starts *w watching it, through the
  // proxy, until the fold holds all five.
  void StartFiveKeyWatch(const std::string& bucket, RunningWatch* w) {
    kv_.CreateBucket(bucket);
    for (int i = 0; i < 5; ++i) kv_.Put(bucket, "k" + std::to_string(i), "v");
    w->source = SourceThroughProxy(bucket);
    w->fold = OpenFold();
    WatchOptions o = Recorded();
    o.stop = w->stop.get_token();
    w->thread = std::thread([w, o] { w->status = Watch(*w->source, *w->fold, o); });
    WaitForCursor(*w->fold, 5, std::chrono::seconds(5));
    ASSERT_EQ(w->fold->ReadMeta()->cursor, 5u);
  }

  uint64_t ConsumerCount(const std::string& bucket) {
    return kv_.StreamInfo(bucket)["state"].value("consumer_count", uint64_t{0});
  }

  NatsServer server_;
  NatsProxy proxy_;
  KvClient kv_;
  TestDir dir_;
  std::mutex mu_;
  std::string log_;
  std::vector<uint64_t> revisions_;
};

// Invariant: a delivery that skipped a consumer sequence is reset and
// re-created from the last stream sequence received, so the lost message
// still reaches the hook and the fold, once and in order. Both starts: the
// first watch's state sync, and a running watch delivering by sequence.
TEST_F(DeliveryGapLiveTest, SkippedConsumerSequenceResetsAndRefetchesTheLostMessage) {
  kv_.CreateBucket("gap");
  // Distinct keys: a lost write is not hidden by a later one of its key.
  for (int i = 0; i < 20; ++i) kv_.Put("gap", "k" + std::to_string(i), "v" + std::to_string(i));
  auto source = SourceThroughProxy("gap");
  auto fold = OpenFold();

  proxy_.DropNextDelivery("$KV.gap.k7");  // seq 8, mid-sync
  WatchOptions sync = Recorded();
  Status s = WatchUntilCaughtUp(*source, *fold, sync);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(proxy_.dropped(), 1);
  EXPECT_EQ(Count(Log(), "delivery reset: consumer sequence jumped"), 1u) << Log();
  EXPECT_EQ(Revisions(), Range(1, 20));
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("gap"));

  // A running watch, caught up, then new writes with one lost on the wire.
  WatchOptions running = Recorded();
  std::stop_source stop;
  running.stop = stop.get_token();
  Status watch_status;
  std::thread watch([&] { watch_status = Watch(*source, *fold, running); });
  // Caught up when its consumer exists: writes before that would be read
  // from the store (delta_delivery.h), where the proxy drops nothing.
  const auto created_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ConsumerCount("gap") != 1 && std::chrono::steady_clock::now() < created_by) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(ConsumerCount("gap"), 1u) << Log();
  proxy_.DropNextDelivery("$KV.gap.k33");  // seq 34
  for (int i = 20; i < 50; ++i) kv_.Put("gap", "k" + std::to_string(i), "v" + std::to_string(i));
  const uint64_t last = kv_.LastSeq("gap");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (fold->ReadMeta()->cursor.value_or(0) < last &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  stop.request_stop();
  watch.join();
  ASSERT_TRUE(watch_status.ok()) << watch_status.ToString();
  EXPECT_EQ(proxy_.dropped(), 2);
  EXPECT_EQ(Count(Log(), "delivery reset: consumer sequence jumped"), 2u) << Log();
  EXPECT_EQ(fold->ReadMeta()->cursor, last);
  EXPECT_EQ(Revisions(), Range(1, last));
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("gap"));
  EXPECT_EQ(ConsumerCount("gap"), 0u);  // the broken consumers were deleted
}

// Invariant: when the lost message is the last before a silence, no next
// message reveals the gap; the idle heartbeat's Nats-Last-Consumer does, and
// the message is fetched again. The product runs the default heartbeat
// (5 s, not configurable through OpenNatsBucket), so this test takes ~5 s.
// Without the heartbeat check the watcher waits forever: its progress probe
// sees the message retained and still "on its way".
TEST_F(DeliveryGapLiveTest, LastMessageLostBeforeASilenceIsCaughtByTheIdleHeartbeat) {
  RunningWatch w;
  ASSERT_NO_FATAL_FAILURE(StartFiveKeyWatch("hb", &w));
  Fold* fold = w.fold.get();

  proxy_.DropNextDelivery("$KV.hb.k9");  // the burst's last: seq 10
  for (int i = 5; i < 10; ++i) kv_.Put("hb", "k" + std::to_string(i), "w");
  // Nothing is written after it: only the heartbeat can reveal the gap.
  WaitForCursor(*fold, 10, std::chrono::seconds(12));
  ASSERT_TRUE(w.Stop().ok()) << w.status.ToString();
  EXPECT_EQ(proxy_.dropped(), 1);
  EXPECT_NE(Log().find("delivery reset: heartbeat says the consumer sent message"),
            std::string::npos)
      << Log();
  EXPECT_EQ(Count(Log(), "consumer sequence jumped"), 0u) << Log();
  EXPECT_EQ(fold->ReadMeta()->cursor, 10u);
  EXPECT_EQ(Revisions(), Range(1, 10));
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("hb"));
}

// Invariant: a consumer whose delete the server did not answer (a cluster
// node cut off from its peers loses it) is deleted again over a server that
// serves, not left to the server's inactive threshold, which a cluster may
// not apply after a heal. Here the proxy loses the delete of the consumer a
// gap broke; the watch's next request that the server answers deletes it,
// long before the 30 s threshold could.
TEST_F(DeliveryGapLiveTest, AConsumerWhoseDeleteWasLostIsDeletedAgain) {
  RunningWatch w;
  ASSERT_NO_FATAL_FAILURE(StartFiveKeyWatch("lost", &w));
  Fold* fold = w.fold.get();

  proxy_.LoseConsumerDeletes(true);
  proxy_.DropNextDelivery("$KV.lost.k5");  // seq 6: the gap breaks the consumer
  for (int i = 5; i < 10; ++i) kv_.Put("lost", "k" + std::to_string(i), "w");
  // The broken consumer's delete is lost; the watch waits out its timeout.
  const auto lost_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (proxy_.lost_deletes() == 0 && std::chrono::steady_clock::now() < lost_by) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  proxy_.LoseConsumerDeletes(false);
  EXPECT_EQ(proxy_.lost_deletes(), 1);
  WaitForCursor(*fold, 10, std::chrono::seconds(15));
  kv_.Put("lost", "k10", "w");  // more traffic: more requests the server answers
  // A bound, not a target: only the live consumer is left.
  const auto deleted_by = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (ConsumerCount("lost") != 1 && std::chrono::steady_clock::now() < deleted_by) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(ConsumerCount("lost"), 1u) << Log();
  ASSERT_TRUE(w.Stop().ok()) << w.status.ToString();
  EXPECT_EQ(ConsumerCount("lost"), 0u);
  EXPECT_EQ(proxy_.dropped(), 1);
  EXPECT_EQ(fold->ReadMeta()->cursor, 11u);
  EXPECT_EQ(Revisions(), Range(1, 11));
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("lost"));
}

// Invariant: closing the source gives its stranded consumers one last try
// even while the wait an unanswered round earned still runs (30 s and
// more): a mirror restarted within it must not leave them on the server,
// which may never drop them (StrandedConsumers). Here both the broken
// consumer's delete and the round that tries it again are lost; the server
// answers again, and the watch closes within the wait.
TEST_F(DeliveryGapLiveTest, ClosingWithinARetryWaitStillDeletesStrandedConsumers) {
  kv_.CreateBucket("close");
  for (int i = 0; i < 5; ++i) kv_.Put("close", "k" + std::to_string(i), "v");
  RunningWatch w;
  ConnectOptions co;
  co.url = proxy_.url();
  co.timeout = milliseconds(1000);  // a lost delete costs this
  w.source = Must(OpenNatsBucket(co, "close"), "opening bucket close");
  w.fold = OpenFold();
  WatchOptions o = Recorded();
  o.stop = w.stop.get_token();
  w.thread = std::thread([&w, o] { w.status = Watch(*w.source, *w.fold, o); });
  WaitForCursor(*w.fold, 5, std::chrono::seconds(5));
  ASSERT_EQ(w.fold->ReadMeta()->cursor, 5u);

  proxy_.LoseConsumerDeletes(true);
  proxy_.DropNextDelivery("$KV.close.k5");  // seq 6: the gap breaks the consumer
  for (int i = 5; i < 10; ++i) kv_.Put("close", "k" + std::to_string(i), "w");
  // The delivery's own delete, then the stranded round's before the next
  // delivery opens: a wait of 30 s starts.
  const auto lost_by = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (proxy_.lost_deletes() < 2 && std::chrono::steady_clock::now() < lost_by) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  proxy_.LoseConsumerDeletes(false);
  ASSERT_EQ(proxy_.lost_deletes(), 2) << Log();
  WaitForCursor(*w.fold, 10, std::chrono::seconds(10));
  kv_.Put("close", "k10", "w");  // traffic: requests the server answers, within the wait
  WaitForCursor(*w.fold, 11, std::chrono::seconds(10));
  EXPECT_EQ(ConsumerCount("close"), 2u) << "the live consumer and the stranded one\n" << Log();
  ASSERT_TRUE(w.Stop().ok()) << w.status.ToString();
  EXPECT_EQ(ConsumerCount("close"), 1u);  // the watch deleted its own
  w.source.reset();                       // closing: the last try, wait or no wait
  EXPECT_EQ(ConsumerCount("close"), 0u) << Log();
  EXPECT_EQ(LiveEntries(*w.fold), kv_.Truth("close"));
}

// Writes, to `bucket`, messages a client may write that carry the name of
// protocol: a `Status` header with a value (an application's own
// metadata), an unknown `KV-Operation`, and empty bodies under `Status: 100`
// (what a heartbeat or flow control looks like), `Status: 404` and `409`
// (what a pull's end or a deleted consumer looks like), and a body under
// `Status: 100` (which a headers-only listing receives empty). The keys
// carry `prefix`. Each is stored as a put.
void WriteLookalikes(KvClient& kv, const std::string& bucket, const std::string& prefix) {
  using H = KvClient::Headers;
  kv.PutWithHeaders(bucket, prefix + "app", "a", H{{"Status", "active"}});
  kv.PutWithHeaders(bucket, prefix + "op", "f", H{{"KV-Operation", "FOO"}});
  kv.PutWithHeaders(bucket, prefix + "hb", "",
                    H{{"Status", "100"}, {"Description", "Idle Heartbeat"}});
  kv.PutWithHeaders(bucket, prefix + "fc", "",
                    H{{"Status", "100"}, {"Description", "FlowControl Request"}});
  kv.PutWithHeaders(bucket, prefix + "nf", "",
                    H{{"Status", "404"}, {"Description", "No Messages"}});
  kv.PutWithHeaders(bucket, prefix + "cd", "",
                    H{{"Status", "409"}, {"Description", "Consumer Deleted"}});
  kv.PutWithHeaders(bucket, prefix + "body", "b", H{{"Status", "100"}});
  kv.Put(bucket, prefix + "after", "z");
}

// Invariant: user data is never protocol. A stored message (it has a
// JetStream ack reply) whose headers look like a server status, or whose
// KV-Operation kvfold does not know, is folded as a put, as nats.go folds
// it, and the mirror moves past it: in the state sync, in a running watch,
// in a key listing (headers only: every body arrives empty) and in a key's
// last message. The old rule (any `Status` header is the server's) reset
// the delivery at such a message forever.
TEST_F(DeliveryGapLiveTest, HeadersThatLookLikeProtocolAreData) {
  kv_.CreateBucket("look");
  kv_.Put("look", "first", "v");
  WriteLookalikes(kv_, "look", "s.");
  RunningWatch w;
  w.source = SourceThroughProxy("look");
  w.fold = OpenFold();
  WatchOptions o = Recorded();
  o.stop = w.stop.get_token();
  w.thread = std::thread([&w, o] { w.status = Watch(*w.source, *w.fold, o); });
  uint64_t last = kv_.LastSeq("look");
  WaitForCursor(*w.fold, last, std::chrono::seconds(10));
  EXPECT_EQ(w.fold->ReadMeta()->cursor, last) << Log();

  // A running watch, caught up, meets them live.
  WriteLookalikes(kv_, "look", "r.");
  last = kv_.LastSeq("look");
  WaitForCursor(*w.fold, last, std::chrono::seconds(10));
  ASSERT_TRUE(w.Stop().ok()) << w.status.ToString();
  EXPECT_EQ(w.fold->ReadMeta()->cursor, last) << Log();
  EXPECT_EQ(Revisions(), Range(1, last));
  EXPECT_EQ(LiveEntries(*w.fold), kv_.Truth("look"));
  EXPECT_EQ(kv_.Truth("look").size(), 17u);  // every one of them a live key
  EXPECT_EQ(Count(Log(), "delivery reset"), 0u) << Log();

  // The key listing (what relist and restore run) ends and names them all.
  std::map<std::string, uint64_t> listed;
  uint64_t listed_last = 0;
  Status ls = w.source->ListKeys(
      Scope(),
      [&](std::string_view key, uint64_t rev) {
        listed[std::string(key)] = rev;
        return Status::OK();
      },
      &listed_last);
  ASSERT_TRUE(ls.ok()) << ls.ToString();
  EXPECT_EQ(listed_last, last);
  std::map<std::string, uint64_t> truth;
  for (const auto& [key, e] : kv_.Truth("look")) truth[key] = e.revision;
  EXPECT_EQ(listed, truth);

  // A key's last message with an unknown operation is a put.
  auto op = w.source->LastOfKey("s.op");
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  ASSERT_TRUE(op->has_value());
  EXPECT_EQ((*op)->op, Op::kPut);
}

// Apart from the delivery-gap tests (not in the mutation runner's live
// filter): this one waits out two silences of three heartbeats (about 30 s).
class SilentServerLiveTest : public DeliveryGapLiveTest {};

// Invariant: given several servers, a watch whose server stays connected
// and answers requests but whose deliveries go silent (a cluster node cut
// off from its peers, answering from its stale copy) moves to another
// server of the list and follows the bucket there. nats.c alone stays:
// the connection is fine. Here both URLs lead to one server, the first
// through a proxy that silences deliveries and heartbeats.
TEST_F(SilentServerLiveTest, ServerWhoseDeliveriesGoSilentIsLeftForAnotherOfTheList) {
  kv_.CreateBucket("silent");
  for (int i = 0; i < 5; ++i) kv_.Put("silent", "k" + std::to_string(i), "v");
  ConnectOptions o;
  o.url = proxy_.url() + "," + server_.url();
  // nats.c picks a URL of the list at random: open until it took the proxy.
  std::unique_ptr<BucketSource> source;
  for (int tries = 0; tries < 50 && !source; ++tries) {
    const int before = proxy_.accepted();
    auto s = OpenNatsBucket(o, "silent");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    if (proxy_.accepted() > before) source = std::move(s).value();
  }
  ASSERT_NE(source, nullptr) << "never connected through the proxy";
  auto fold = OpenFold();
  WatchOptions w = Recorded();
  std::stop_source stop;
  w.stop = stop.get_token();
  Status watch_status;
  std::thread watch([&] { watch_status = Watch(*source, *fold, w); });
  WaitForCursor(*fold, 5, std::chrono::seconds(10));
  ASSERT_EQ(fold->ReadMeta()->cursor, 5u);

  proxy_.SilenceDeliveries(true);
  for (int i = 5; i < 10; ++i) kv_.Put("silent", "k" + std::to_string(i), "w");
  // The writes may come in by stream reads (a delivery opened after them
  // reads them from the store, delta_delivery.h), and what follows the
  // reads stays silent: the move is waited for, not the cursor. A bound,
  // not a target: about two silences of 15 s each pass first.
  const std::string moved = "moved to 127.0.0.1:" + std::to_string(server_.port());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (Log().find(moved) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  WaitForCursor(*fold, 10, std::chrono::seconds(10));
  stop.request_stop();
  watch.join();
  ASSERT_TRUE(watch_status.ok()) << watch_status.ToString();
  EXPECT_EQ(fold->ReadMeta()->cursor, 10u) << Log();
  EXPECT_NE(Log().find(moved), std::string::npos) << Log();
  EXPECT_EQ(Revisions(), Range(1, 10));
  EXPECT_EQ(LiveEntries(*fold), kv_.Truth("silent"));
}

}  // namespace
}  // namespace kvfold::live
