// A test-side KV writer over plain nats.c that records the truth: every
// acknowledged write minus every delete, with the sequence the server gave.

#ifndef KVFOLD_TESTS_LIVE_KV_CLIENT_H_
#define KVFOLD_TESTS_LIVE_KV_CLIENT_H_

#include <nats/nats.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvfold/fold.h"
#include "kvfold/scope.h"

namespace kvfold::live {

class KvClient {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;

  // `configure` sets what the server demands (credentials, TLS) on the
  // connection's options before it connects.
  explicit KvClient(const std::string& url,
                    const std::function<void(natsOptions*)>& configure = nullptr);
  ~KvClient();
  KvClient(const KvClient&) = delete;
  KvClient& operator=(const KvClient&) = delete;

  // Creates stream KV_<bucket> as a KV bucket; `overrides` are merged into
  // the stream config (e.g. {"max_msgs": 10, "discard": "old"}).
  void CreateBucket(const std::string& bucket, const nlohmann::json& overrides = {});
  void DeleteBucket(const std::string& bucket);

  uint64_t Put(const std::string& bucket, const std::string& key, const std::string& value);
  uint64_t Delete(const std::string& bucket, const std::string& key);
  uint64_t Purge(const std::string& bucket, const std::string& key);
  // A put with a per-message TTL (`Nats-TTL`, e.g. "2s"; nats-server
  // 2.11+ on a bucket that allows it).
  uint64_t PutWithTtl(const std::string& bucket, const std::string& key, const std::string& value,
                      const std::string& ttl);
  // A put with extra headers (a counter's Nats-Incr, say). The truth
  // records what the stream stored for the key, read back.
  uint64_t PutWithHeaders(const std::string& bucket, const std::string& key,
                          const std::string& value, const Headers& headers);
  // An atomic batch publish (nats-server 2.12+, a bucket with
  // allow_atomic): every put carries Nats-Batch-Id and -Sequence, the last
  // Nats-Batch-Commit; only the commit is acknowledged. Returns its
  // sequence.
  uint64_t PutBatch(const std::string& bucket,
                    const std::vector<std::pair<std::string, std::string>>& puts);
  // The key expired (its limit marker says so): the truth loses it.
  void RecordExpired(const std::string& bucket, const std::string& key) {
    truth_[bucket].erase(key);
  }
  // Whether the server took the per-message TTL and limit-marker config
  // of `bucket` (read from the config it echoes; older servers drop it).
  bool HasLimitMarkers(const std::string& bucket);
  // Publishes without waiting for the ack (bursts); the caller waits with
  // WaitForLastSeq. Sequences follow publish order on one connection.
  void PutNoAck(const std::string& bucket, const std::string& key, const std::string& value);
  void Flush();

  nlohmann::json StreamInfo(const std::string& bucket);
  // Purges every message of `key`, its delete marker included (what KV
  // PurgeDeletes does). Records nothing: a purged marker does not undo the
  // delete in the truth.
  void PurgeSubject(const std::string& bucket, const std::string& key);
  // Edits the stream's config live (limits can change under a mirror).
  void UpdateBucket(const std::string& bucket, const nlohmann::json& overrides);
  uint64_t LastSeq(const std::string& bucket);
  void WaitForLastSeq(const std::string& bucket, uint64_t seq);

  // What the stream itself holds for `key`, not what this client recorded:
  // its last retained message as an entry (deleted for a DEL or PURGE
  // marker), nullopt when the stream retains no message of `key`.
  std::optional<Entry> StoredLast(const std::string& bucket, const std::string& key);

  // A JetStream API request ($JS.API.<subject>... given whole); the reply,
  // or an exception carrying the server's error. A request nobody answers
  // is retried until `patience` has passed.
  nlohmann::json Api(const std::string& subject, const nlohmann::json& body,
                     std::chrono::milliseconds patience = std::chrono::seconds(30));

  // The truth for `bucket` within `scope`: key -> live entry.
  std::map<std::string, Entry> Truth(const std::string& bucket, const Scope& scope = Scope()) const;
  // Records a write the caller made without an ack (see PutNoAck).
  void RecordPut(const std::string& bucket, const std::string& key, const std::string& value,
                 uint64_t seq);

 private:
  uint64_t Write(const std::string& bucket, const std::string& key, const std::string& value,
                 const char* op, const Headers& headers = {});

  natsConnection* nc_ = nullptr;
  // Writes (Put, PutWithTtl, PutWithHeaders, Delete, Purge) may come from
  // several threads at once (a Mirror's waiters test): they record under it.
  std::mutex truth_mu_;
  std::map<std::string, std::map<std::string, Entry>> truth_;
};

}  // namespace kvfold::live

#endif  // KVFOLD_TESTS_LIVE_KV_CLIENT_H_
