// The programs bench/run times beside kvfold: a loader, the wire's limit (a
// bare nats.c ordered consumer), the loop a user writes without kvfold, the
// export's limit (a RocksDB scan plus zstd), the seed's limit (the same
// sorted entries through SstFileWriter and one ingestion, unverified), a
// put-to-hook latency probe and the fold's read latency while a catch-up
// writes into it.
//
//   kvfold_bench_tool load     --server URL --bucket B --keys N [--first I] [--value-bytes 100]
//                              [--order sorted|shuffled]
//                              [--history H] [--max-msgs M]
//   kvfold_bench_tool raw      --server URL --bucket B
//   kvfold_bench_tool naive    --server URL --bucket B --db DIR
//   kvfold_bench_tool scan-zstd --fold DIR
//   kvfold_bench_tool sst-ingest --fold DIR --to DIR
//   kvfold_bench_tool latency  --server URL --bucket B --fold DIR --rate R --seconds S
//   kvfold_bench_tool getlat   --server URL --bucket B --fold DIR --keys N [--samples 100000]
//   kvfold_bench_tool hooked   --server URL --bucket B --fold DIR
//   kvfold_bench_tool quiet-trips --server URL --dir DIR [--runs 10] [--burst 200000]
//                              [--max-msgs 3000]
//
// Each prints one line of facts on stdout; bench/run does the timing.

#include <nats/nats.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kvfold/kvfold.h"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "kvfold_bench_tool: %s\n", what.c_str());
  std::exit(1);
}

void Check(natsStatus s, const char* what) {
  if (s != NATS_OK) Die(std::string(what) + ": " + natsStatus_GetText(s));
}

struct Args {
  std::map<std::string, std::string> kv;
  std::string Get(const std::string& k, const std::string& def = "") const {
    auto it = kv.find(k);
    if (it != kv.end()) return it->second;
    if (def.empty()) Die("missing --" + k);
    return def;
  }
  long long Int(const std::string& k, const std::string& def = "") const {
    return std::stoll(Get(k, def));
  }
};

struct Conn {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  // Asynchronous publishes the server refused (a stream without a leader
  // yet answers 503): without a handler nats.c drops them silently, and a
  // load would "succeed" short. (One never acknowledged makes
  // js_PublishAsyncComplete time out instead.)
  std::atomic<long long> failed_acks{0};
  std::string first_ack_error;  // set once, by nats.c's callback thread
  static void OnAckError(jsCtx*, jsPubAckErr* pae, void* closure) {
    auto* self = static_cast<Conn*>(closure);
    if (self->failed_acks++ == 0) {
      self->first_ack_error = std::string(natsStatus_GetText(pae->Err)) +
                              (pae->ErrText != nullptr ? std::string(": ") + pae->ErrText : "");
    }
  }
  // What nats.c reported asynchronously (a subscription's missed
  // heartbeats, a slow consumer): a wire measured through one is void.
  std::atomic<long long> async_errors{0};
  std::atomic<natsStatus> first_async_error{NATS_OK};
  static void OnAsyncError(natsConnection*, natsSubscription*, natsStatus err, void* closure) {
    auto* self = static_cast<Conn*>(closure);
    if (self->async_errors++ == 0) self->first_async_error = err;
  }
  explicit Conn(const std::string& url, bool async_publish = false) {
    natsOptions* o = nullptr;
    Check(natsOptions_Create(&o), "options");
    Check(natsOptions_SetURL(o, url.c_str()), "url");
    Check(natsOptions_SetErrorHandler(o, &Conn::OnAsyncError, this), "error handler");
    Check(natsConnection_Connect(&nc, o), "connect");
    natsOptions_Destroy(o);
    jsOptions jo;
    jsOptions_Init(&jo);
    // nats-server 2.9 takes 8-14 s to create a consumer on a 10M-message
    // stream: nats.c's 5 s default would end the wire's measure there.
    jo.Wait = 60000;
    if (async_publish) {
      jo.PublishAsync.MaxPending = std::getenv("KVFOLD_BENCH_PENDING") != nullptr
                                       ? std::atoi(std::getenv("KVFOLD_BENCH_PENDING"))
                                       : 4096;
      jo.PublishAsync.StallWait = 60000;  // a server busy removing old revisions stalls
      jo.PublishAsync.ErrHandler = &Conn::OnAckError;
      jo.PublishAsync.ErrHandlerClosure = this;
    }
    Check(natsConnection_JetStream(&js, nc, &jo), "jetstream");
  }
  ~Conn() {
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
  }
};

uint64_t StreamMessages(Conn& c, const std::string& bucket) {
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  Check(js_GetStreamInfo(&si, c.js, ("KV_" + bucket).c_str(), nullptr, &jerr), "stream info");
  const uint64_t n = si->State.Msgs;
  jsStreamInfo_Destroy(si);
  return n;
}

// Creates the bucket when missing and writes keys k<first>..k<first+N-1>.
int Load(const Args& a) {
  Conn c(a.Get("server"), /*async_publish=*/true);
  const std::string bucket = a.Get("bucket");
  kvConfig cfg;
  kvConfig_Init(&cfg);
  cfg.Bucket = bucket.c_str();
  cfg.History = static_cast<uint8_t>(a.Int("history", "1"));
  kvStore* kv = nullptr;
  if (js_KeyValue(&kv, c.js, bucket.c_str()) != NATS_OK) {
    if (const long long max_msgs = a.Int("max-msgs", "0"); max_msgs > 0) {
      // A bucket that evicts by count (discard old), as kvfold's volume
      // repairs know it; kvConfig has no max_msgs.
      const std::string sc = "{\"name\":\"KV_" + bucket + "\",\"subjects\":[\"$KV." + bucket +
                             ".>\"],\"max_msgs_per_subject\":" + std::to_string(cfg.History) +
                             ",\"max_msgs\":" + std::to_string(max_msgs) +
                             ",\"discard\":\"old\",\"allow_rollup_hdrs\":true,\"deny_delete\":true,"
                             "\"allow_direct\":true,\"storage\":\"file\",\"num_replicas\":1}";
      natsMsg* reply = nullptr;
      Check(natsConnection_RequestString(
                &reply, c.nc, ("$JS.API.STREAM.CREATE.KV_" + bucket).c_str(), sc.c_str(), 5000),
            "create bucket");
      natsMsg_Destroy(reply);
    } else {
      Check(js_CreateKeyValue(&kv, c.js, &cfg), "create bucket");
    }
  }
  kvStore_Destroy(kv);
  const long long n = a.Int("keys"), first = a.Int("first", "0");
  std::string value(static_cast<size_t>(a.Int("value-bytes", "100")), 'v');
  // --order shuffled: the same keys in a random order (a fixed seed), as
  // updates to a real bucket arrive, instead of in key order.
  std::vector<long long> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), first);
  const std::string ordering = a.Get("order", "sorted");
  if (ordering != "sorted" && ordering != "shuffled") Die("load: --order is sorted or shuffled");
  if (ordering == "shuffled") std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
  char subject[256];
  for (const long long i : order) {
    std::snprintf(subject, sizeof subject, "$KV.%s.k%09lld", bucket.c_str(), i);
    const std::string tag = std::to_string(i);
    std::memcpy(value.data(), tag.data(), std::min(tag.size(), value.size()));
    Check(js_PublishAsync(c.js, subject, value.data(), static_cast<int>(value.size()), nullptr),
          "publish");
  }
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = 120000;
  Check(js_PublishAsyncComplete(c.js, &po), "publish complete");
  if (c.failed_acks > 0) {
    Die("load: " + std::to_string(c.failed_acks.load()) + " of " + std::to_string(n) +
        " publishes were not stored (first: " + c.first_ack_error + ")");
  }
  std::printf("loaded %lld keys\n", n);
  return 0;
}

// The wire's limit: an ordered push consumer over the whole stream that
// only counts what arrives.
int Raw(const Args& a) {
  Conn c(a.Get("server"));
  const std::string bucket = a.Get("bucket");
  const uint64_t want = StreamMessages(c, bucket);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Ordered = true;
  so.Stream = nullptr;
  // nats-server 2.9 takes 6-20 s to create a consumer on a 10M-message
  // stream, inline in the connection's read loop: with nats.c's default
  // 5 s heartbeat its log showed the ordered consumer created again, and
  // no message came within a 10 s wait. No heartbeat is sent while
  // messages flow, so elsewhere this measures the same wire.
  so.Config.Heartbeat = int64_t{30} * 1000 * 1000 * 1000;
  natsSubscription* sub = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const std::string subject = "$KV." + bucket + ".>";
  Check(js_SubscribeSync(&sub, c.js, subject.c_str(), nullptr, &so, &jerr), "subscribe");
  natsSubscription_SetPendingLimits(sub, -1, -1);
  uint64_t got = 0, bytes = 0;
  while (got < want) {
    natsMsg* m = nullptr;
    Check(natsSubscription_NextMsg(&m, sub, 60000), "next message");
    bytes += static_cast<uint64_t>(natsMsg_GetDataLength(m));
    natsMsg_Destroy(m);
    ++got;
  }
  natsSubscription_Destroy(sub);
  if (c.async_errors > 0) {
    Die("raw: nats.c reported " + std::to_string(c.async_errors.load()) +
        " asynchronous errors while receiving (first: " +
        natsStatus_GetText(c.first_async_error.load()) + "), so this measure of the wire is void");
  }
  std::printf("received %llu messages, %llu bytes\n", static_cast<unsigned long long>(got),
              static_cast<unsigned long long>(bytes));
  return 0;
}

// What a C++ user writes without kvfold: watch everything, one RocksDB Put
// per entry plus a cursor Put, no fsync.
int Naive(const Args& a) {
  Conn c(a.Get("server"));
  const std::string bucket = a.Get("bucket");
  rocksdb::Options o;
  o.create_if_missing = true;
  rocksdb::DB* raw_db = nullptr;
  auto st = rocksdb::DB::Open(o, a.Get("db"), &raw_db);
  if (!st.ok()) Die("open db: " + st.ToString());
  std::unique_ptr<rocksdb::DB> db(raw_db);
  kvStore* kv = nullptr;
  Check(js_KeyValue(&kv, c.js, bucket.c_str()), "open bucket");
  kvWatcher* w = nullptr;
  Check(kvStore_WatchAll(&w, kv, nullptr), "watch");
  uint64_t n = 0;
  rocksdb::WriteOptions wo;
  while (true) {
    kvEntry* e = nullptr;
    Check(kvWatcher_Next(&e, w, 10000), "watch next");
    if (e == nullptr) break;  // the initial values are all delivered
    const char* key = kvEntry_Key(e);
    if (kvEntry_Operation(e) == kvOp_Put) {
      db->Put(wo, key,
              rocksdb::Slice(static_cast<const char*>(kvEntry_Value(e)),
                             static_cast<size_t>(kvEntry_ValueLen(e))));
    } else {
      db->Delete(wo, key);
    }
    db->Put(wo, "__cursor", std::to_string(kvEntry_Revision(e)));
    kvEntry_Destroy(e);
    ++n;
  }
  kvWatcher_Destroy(w);
  kvStore_Destroy(kv);
  std::printf("applied %llu entries\n", static_cast<unsigned long long>(n));
  return 0;
}

// The export's limit: read every entry of a fold in key order and zstd
// (level 3, as artifacts use) it in 4 MiB chunks. Writes nothing.
int ScanZstd(const Args& a) {
  rocksdb::Options o;
  rocksdb::DB* raw_db = nullptr;
  auto st = rocksdb::DB::OpenForReadOnly(o, a.Get("fold"), &raw_db);
  if (!st.ok()) Die("open fold: " + st.ToString());
  std::unique_ptr<rocksdb::DB> db(raw_db);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  std::string raw, out;
  uint64_t records = 0, compressed = 0;
  auto flush = [&] {
    out.resize(ZSTD_compressBound(raw.size()));
    compressed += ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 3);
    raw.clear();
  };
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    raw.append(it->key().data(), it->key().size());
    raw.append(it->value().data(), it->value().size());
    ++records;
    if (raw.size() >= (4u << 20)) flush();
  }
  flush();
  std::printf("scanned %llu records, %llu compressed bytes\n",
              static_cast<unsigned long long>(records),
              static_cast<unsigned long long>(compressed));
  return 0;
}

// The seed's limit: every record of a fold, in key order, written into
// 8 MiB table files (LZ4, whole-key bloom filters, as the fold's own) and
// ingested into a new database at once. No artifact, no verification.
int SstIngest(const Args& a) {
  rocksdb::Options ro;
  rocksdb::DB* raw_src = nullptr;
  auto st = rocksdb::DB::OpenForReadOnly(ro, a.Get("fold"), &raw_src);
  if (!st.ok()) Die("open fold: " + st.ToString());
  std::unique_ptr<rocksdb::DB> src(raw_src);
  rocksdb::Options o;
  o.create_if_missing = true;
  o.compression = rocksdb::kLZ4Compression;
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.whole_key_filtering = true;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  const std::string to = a.Get("to");
  rocksdb::DB* raw_dst = nullptr;
  st = rocksdb::DB::Open(o, to, &raw_dst);
  if (!st.ok()) Die("open " + to + ": " + st.ToString());
  std::unique_ptr<rocksdb::DB> dst(raw_dst);
  std::vector<std::string> files;
  std::unique_ptr<rocksdb::SstFileWriter> w;
  auto close = [&] {
    if (!w) return;
    auto s = w->Finish();
    if (!s.ok()) Die("finish: " + s.ToString());
    w.reset();
  };
  std::unique_ptr<rocksdb::Iterator> it(src->NewIterator(rocksdb::ReadOptions()));
  uint64_t records = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (w && w->FileSize() >= (8u << 20)) close();
    if (!w) {
      files.push_back(to + "/stage-" + std::to_string(files.size()) + ".sst");
      w = std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(o), o);
      auto s = w->Open(files.back());
      if (!s.ok()) Die("open " + files.back() + ": " + s.ToString());
    }
    auto s = w->Put(it->key(), it->value());
    if (!s.ok()) Die("put: " + s.ToString());
    ++records;
  }
  close();
  rocksdb::IngestExternalFileOptions io;
  io.move_files = true;
  io.write_global_seqno = false;
  st = dst->IngestExternalFile(files, io);
  if (!st.ok()) Die("ingest: " + st.ToString());
  std::printf("ingested %llu records in %zu files\n", static_cast<unsigned long long>(records),
              files.size());
  return 0;
}

// Put-to-hook latency: a publisher at a fixed rate stamps each value with
// its send time; the watcher's apply hook reads the stamp.
int Latency(const Args& a) {
  const std::string server = a.Get("server"), bucket = a.Get("bucket");
  const long long rate = a.Int("rate"), seconds = a.Int("seconds");
  const long long total = rate * seconds;
  kvfold::ConnectOptions co;
  co.url = server;
  auto source = kvfold::OpenNatsBucket(co, bucket);
  if (!source.ok()) Die(source.status().ToString());
  auto fold = kvfold::OpenRocksFold(a.Get("fold"));
  if (!fold.ok()) Die(fold.status().ToString());

  std::vector<double> micros;
  micros.reserve(static_cast<size_t>(total));
  std::stop_source stop;
  kvfold::WatchOptions wo;
  wo.stop = stop.get_token();
  wo.apply = [&](const kvfold::Change& ch) {
    if (ch.value.size() >= 8 && ch.key.starts_with("lat")) {
      int64_t sent = 0;
      std::memcpy(&sent, ch.value.data(), 8);
      const int64_t now = Clock::now().time_since_epoch().count();
      micros.push_back(static_cast<double>(now - sent) / 1000.0);
      if (static_cast<long long>(micros.size()) >= total) stop.request_stop();
    }
    return kvfold::Status::OK();
  };
  kvfold::Status result;
  std::thread watcher([&] { result = kvfold::Watch(**source, **fold, wo); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // consumer in place

  Conn c(server, /*async_publish=*/true);
  char subject[256];
  const auto start = Clock::now();
  for (long long i = 0; i < total; ++i) {
    std::this_thread::sleep_until(start + std::chrono::nanoseconds(i * 1000000000LL / rate));
    std::snprintf(subject, sizeof subject, "$KV.%s.lat%06lld", bucket.c_str(), i % 1000);
    const int64_t now = Clock::now().time_since_epoch().count();
    char value[16] = {};
    std::memcpy(value, &now, 8);
    Check(js_PublishAsync(c.js, subject, value, sizeof value, nullptr), "publish");
  }
  watcher.join();
  if (!result.ok()) Die(result.ToString());
  std::sort(micros.begin(), micros.end());
  auto pct = [&](double p) {
    return micros[std::min(micros.size() - 1, static_cast<size_t>(p * micros.size()))];
  };
  std::printf("latency rate=%lld n=%zu p50_us=%.0f p99_us=%.0f\n", rate, micros.size(), pct(0.50),
              pct(0.99));
  return 0;
}

// Fold::Get latency on a fold while a catch-up writes into it: the fold is
// opened in this process (an empty block cache: cold), a watch catches up
// the bucket's backlog in a thread, and another reads random keys of
// k000000000..k<N-1> (the loader's names) twice: the first pass cold, the
// same keys again warm. The operating system's page cache is dropped first
// when this process may (root); the output says which.
int GetLatency(const Args& a) {
  const long long keys = a.Int("keys"), samples = a.Int("samples", "100000");
  if (keys <= 0 || samples <= 0) Die("getlat: --keys and --samples must be positive");
  const bool dropped = [] {
    ::sync();
    FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w");
    if (f == nullptr) return false;
    const bool ok = std::fputs("3", f) >= 0;
    return std::fclose(f) == 0 && ok;
  }();
  kvfold::ConnectOptions co;
  co.url = a.Get("server");
  co.timeout = std::chrono::seconds(60);  // as Conn's: a consumer on a 10M stream, on 2.9
  auto source = kvfold::OpenNatsBucket(co, a.Get("bucket"));
  if (!source.ok()) Die(source.status().ToString());
  auto fold = kvfold::OpenRocksFold(a.Get("fold"));
  if (!fold.ok()) Die(fold.status().ToString());
  std::atomic<bool> writing{true};
  kvfold::WatchOptions wo;
  wo.until_caught_up = true;
  kvfold::Status result;
  std::thread watcher([&] {
    result = kvfold::Watch(**source, **fold, wo);
    writing = false;
  });
  std::vector<std::string> sample;
  sample.reserve(static_cast<size_t>(samples));
  uint64_t x = 0x9e3779b97f4a7c15ULL;  // a fixed xorshift: the same keys every run
  char key[32];
  for (long long i = 0; i < samples; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::snprintf(key, sizeof key, "k%09llu", static_cast<unsigned long long>(x % keys));
    sample.emplace_back(key);
  }
  auto pass = [&](const char* name) {
    std::vector<double> micros;
    micros.reserve(sample.size());
    long long during = 0, missing = 0;
    kvfold::Entry e;
    for (const std::string& k : sample) {
      const bool w = writing;
      const auto t0 = Clock::now();
      const kvfold::Status s = (*fold)->Get(k, &e);
      micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      if (!s.ok()) {
        if (!s.IsNotFound()) Die("get " + k + ": " + s.ToString());
        ++missing;
      }
      during += w ? 1 : 0;
    }
    std::sort(micros.begin(), micros.end());
    auto pct = [&](double p) {
      return micros[std::min(micros.size() - 1, static_cast<size_t>(p * micros.size()))];
    };
    std::printf("%s_p50_us=%.1f %s_p99_us=%.1f %s_p999_us=%.1f %s_during_catchup=%.0f%% ", name,
                pct(0.50), name, pct(0.99), name, pct(0.999), name,
                100.0 * static_cast<double>(during) / static_cast<double>(sample.size()));
    if (missing > 0) std::printf("%s_missing=%lld ", name, missing);
  };
  pass("cold");
  pass("warm");
  watcher.join();
  if (!result.ok()) Die(result.ToString());
  std::printf("samples=%lld keys=%lld page_cache=%s\n", samples, keys,
              dropped ? "dropped" : "kept (not root)");
  return 0;
}

// A catch-up with an apply hook, as a service embedding kvfold runs it
// (the CLI's mirror has none): the hook sees every change and its
// previous revision, which the watch reads from the fold.
int Hooked(const Args& a) {
  kvfold::ConnectOptions co;
  co.url = a.Get("server");
  auto source = kvfold::OpenNatsBucket(co, a.Get("bucket"));
  if (!source.ok()) Die(source.status().ToString());
  auto fold = kvfold::OpenRocksFold(a.Get("fold"));
  if (!fold.ok()) Die(fold.status().ToString());
  long long changes = 0, replaced = 0;
  kvfold::WatchOptions wo;
  wo.until_caught_up = true;
  wo.apply = [&](const kvfold::Change& ch) {
    ++changes;
    replaced += ch.previous_revision != 0 ? 1 : 0;
    return kvfold::Status::OK();
  };
  const kvfold::Status result = kvfold::Watch(**source, **fold, wo);
  if (!result.ok()) Die(result.ToString());
  std::printf("hooked changes=%lld replaced=%lld\n", changes, replaced);
  return 0;
}

// False floor trips: a mirror of prefix `quiet.`, which sees no writes,
// while a burst of puts on other prefixes turns a max_msgs bucket over many
// times. It has lost nothing, so any trip is false. One bucket and fold
// per run; prints the trips of each run and their total.
int QuietTrips(const Args& a) {
  const std::string server = a.Get("server"), dir = a.Get("dir");
  const long long runs = a.Int("runs", "10"), burst = a.Int("burst", "200000");
  const long long max_msgs = a.Int("max-msgs", "3000");
  Conn c(server, /*async_publish=*/true);
  uint64_t total = 0;
  for (long long run = 0; run < runs; ++run) {
    const std::string bucket = "quiet" + std::to_string(getpid()) + "_" + std::to_string(run);
    const std::string cfg =
        "{\"name\":\"KV_" + bucket + "\",\"subjects\":[\"$KV." + bucket +
        ".>\"],\"max_msgs_per_subject\":1,\"max_msgs\":" + std::to_string(max_msgs) +
        ",\"discard\":\"old\",\"allow_rollup_hdrs\":true,\"deny_delete\":true,"
        "\"allow_direct\":true,\"storage\":\"file\",\"num_replicas\":1}";
    natsMsg* reply = nullptr;
    Check(natsConnection_RequestString(&reply, c.nc, ("$JS.API.STREAM.CREATE.KV_" + bucket).c_str(),
                                       cfg.c_str(), 5000),
          "create bucket");
    natsMsg_Destroy(reply);
    Check(
        js_Publish(nullptr, c.js, ("$KV." + bucket + ".quiet.1").c_str(), "q", 1, nullptr, nullptr),
        "put");
    kvfold::ConnectOptions co;
    co.url = server;
    auto source = kvfold::OpenNatsBucket(co, bucket);
    if (!source.ok()) Die(source.status().ToString());
    kvfold::FoldOptions fo;  // durable commits, as kvfold mirror runs by default
    auto fold = kvfold::OpenRocksFold(dir + "/" + bucket, fo);
    if (!fold.ok()) Die(fold.status().ToString());
    kvfold::WatchMetrics metrics;
    std::stop_source stop;
    kvfold::WatchOptions wo;
    wo.scope = *kvfold::Scope::Make({"quiet."});
    wo.metrics = &metrics;
    wo.stop = stop.get_token();
    kvfold::Status result;
    std::thread watcher([&] { result = kvfold::Watch(**source, **fold, wo); });
    while (metrics.Snapshot().cursor != 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    char subject[256];
    const auto began = Clock::now();
    for (long long i = 0; i < burst; ++i) {
      std::snprintf(subject, sizeof subject, "$KV.%s.churn.%lld", bucket.c_str(), i % 1000);
      Check(js_PublishAsync(c.js, subject, "x", 1, nullptr), "publish");
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 120000;
    Check(js_PublishAsyncComplete(c.js, &po), "publish complete");
    const double secs = std::chrono::duration<double>(Clock::now() - began).count();
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the probe catches up
    stop.request_stop();
    watcher.join();
    const kvfold::WatchStats s = metrics.Snapshot();
    std::printf("run %lld: %.0f puts/s, trips=%llu status=%s\n", run,
                static_cast<double>(burst) / secs,
                static_cast<unsigned long long>(s.floor_guard_trips),
                result.ok() ? "ok" : result.ToString().c_str());
    total += s.floor_guard_trips;
  }
  std::printf("quiet-trips runs=%lld burst=%lld max_msgs=%lld trips=%llu\n", runs, burst, max_msgs,
              static_cast<unsigned long long>(total));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2)
    Die("usage: kvfold_bench_tool "
        "load|raw|naive|scan-zstd|sst-ingest|latency|getlat|hooked|quiet-trips "
        "--flag value "
        "...");
  Args a;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strncmp(argv[i], "--", 2) != 0) Die(std::string("bad flag ") + argv[i]);
    a.kv[argv[i] + 2] = argv[i + 1];
  }
  const std::string cmd = argv[1];
  if (cmd == "load") return Load(a);
  if (cmd == "raw") return Raw(a);
  if (cmd == "naive") return Naive(a);
  if (cmd == "scan-zstd") return ScanZstd(a);
  if (cmd == "sst-ingest") return SstIngest(a);
  if (cmd == "latency") return Latency(a);
  if (cmd == "getlat") return GetLatency(a);
  if (cmd == "hooked") return Hooked(a);
  if (cmd == "quiet-trips") return QuietTrips(a);
  Die("unknown command " + cmd);
}
