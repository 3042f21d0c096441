#include "live/kv_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/base64.h"

namespace kvfold::live {

using nlohmann::json;

KvClient::KvClient(const std::string& url, const std::function<void(natsOptions*)>& configure) {
  natsOptions* opts = nullptr;
  natsOptions_Create(&opts);
  // A comma-separated list is a cluster's URLs (nats.c takes them apart
  // only through SetServers).
  std::vector<std::string> urls;
  std::stringstream list(url);
  for (std::string one; std::getline(list, one, ',');) urls.push_back(one);
  std::vector<const char*> servers;
  for (const auto& u : urls) servers.push_back(u.c_str());
  natsOptions_SetServers(opts, servers.data(), static_cast<int>(servers.size()));
  natsOptions_SetMaxReconnect(opts, -1);
  natsOptions_SetReconnectWait(opts, 100);
  if (configure) configure(opts);
  natsStatus s = natsConnection_Connect(&nc_, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    throw std::runtime_error("test client cannot connect to " + url + ": " + natsStatus_GetText(s) +
                             " (" + nats_GetLastError(nullptr) + ")");
  }
}

KvClient::~KvClient() {
  natsConnection_Close(nc_);
  natsConnection_Destroy(nc_);
}

json KvClient::Api(const std::string& subject, const json& body,
                   std::chrono::milliseconds patience) {
  const std::string data = body.is_null() ? "" : body.dump();
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (true) {
    natsMsg* reply = nullptr;
    const auto timeout = std::min<int64_t>(5000, std::max<int64_t>(patience.count(), 1));
    natsStatus s = natsConnection_Request(&reply, nc_, subject.c_str(), data.data(),
                                          static_cast<int>(data.size()), timeout);
    if (s == NATS_OK) {
      json j = json::parse(std::string(natsMsg_GetData(reply), natsMsg_GetDataLength(reply)));
      natsMsg_Destroy(reply);
      if (j.contains("error")) throw std::runtime_error(subject + ": " + j.dump());
      return j;
    }
    // The server may be restarting in a test: keep trying for a while.
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(subject + ": " + natsStatus_GetText(s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void KvClient::CreateBucket(const std::string& bucket, const json& overrides) {
  json cfg = {
      {"name", "KV_" + bucket}, {"subjects", {"$KV." + bucket + ".>"}},
      {"retention", "limits"},  {"max_msgs_per_subject", 10},
      {"discard", "new"},       {"allow_rollup_hdrs", true},
      {"deny_delete", true},    {"deny_purge", false},
      {"allow_direct", true},   {"storage", "file"},
      {"num_replicas", 1},
  };
  for (auto it = overrides.begin(); it != overrides.end(); ++it) cfg[it.key()] = it.value();
  Api("$JS.API.STREAM.CREATE.KV_" + bucket, cfg);
}

void KvClient::PurgeSubject(const std::string& bucket, const std::string& key) {
  Api("$JS.API.STREAM.PURGE.KV_" + bucket, json{{"filter", "$KV." + bucket + "." + key}});
}

void KvClient::UpdateBucket(const std::string& bucket, const json& overrides) {
  json info = Api("$JS.API.STREAM.INFO.KV_" + bucket, nullptr);
  json cfg = info["config"];
  for (auto it = overrides.begin(); it != overrides.end(); ++it) cfg[it.key()] = it.value();
  Api("$JS.API.STREAM.UPDATE.KV_" + bucket, cfg);
}

void KvClient::DeleteBucket(const std::string& bucket) {
  Api("$JS.API.STREAM.DELETE.KV_" + bucket, nullptr);
  truth_.erase(bucket);
}

uint64_t KvClient::Write(const std::string& bucket, const std::string& key,
                         const std::string& value, const char* op, const Headers& headers) {
  const std::string subject = "$KV." + bucket + "." + key;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    natsMsg* msg = nullptr;
    natsMsg_Create(&msg, subject.c_str(), nullptr, value.data(), static_cast<int>(value.size()));
    if (op != nullptr) {
      natsMsgHeader_Set(msg, "KV-Operation", op);
      if (std::string(op) == "PURGE") natsMsgHeader_Set(msg, "Nats-Rollup", "sub");
    }
    for (const auto& [name, v] : headers) natsMsgHeader_Set(msg, name.c_str(), v.c_str());
    natsMsg* reply = nullptr;
    natsStatus s = natsConnection_RequestMsg(&reply, nc_, msg, 5000);
    natsMsg_Destroy(msg);
    if (s == NATS_OK) {
      json ack = json::parse(std::string(natsMsg_GetData(reply), natsMsg_GetDataLength(reply)));
      natsMsg_Destroy(reply);
      if (ack.contains("error")) throw std::runtime_error("write refused: " + ack.dump());
      const uint64_t seq = ack["seq"].get<uint64_t>();
      std::lock_guard lock(truth_mu_);
      if (op == nullptr) {
        truth_[bucket][key] = Entry{seq, false, value};
      } else {
        truth_[bucket].erase(key);
      }
      return seq;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("write failed: " + std::string(natsStatus_GetText(s)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

uint64_t KvClient::Put(const std::string& bucket, const std::string& key,
                       const std::string& value) {
  return Write(bucket, key, value, nullptr);
}
uint64_t KvClient::PutWithTtl(const std::string& bucket, const std::string& key,
                              const std::string& value, const std::string& ttl) {
  return Write(bucket, key, value, nullptr, {{"Nats-TTL", ttl}});
}
uint64_t KvClient::PutWithHeaders(const std::string& bucket, const std::string& key,
                                  const std::string& value, const Headers& headers) {
  Write(bucket, key, value, nullptr, headers);
  auto stored = StoredLast(bucket, key);
  if (!stored) throw std::runtime_error("no message stored for " + key);
  if (stored->deleted) {
    truth_[bucket].erase(key);  // a delete by its headers (a limit marker)
  } else {
    truth_[bucket][key] = *stored;
  }
  return stored->revision;
}
uint64_t KvClient::PutBatch(const std::string& bucket,
                            const std::vector<std::pair<std::string, std::string>>& puts) {
  static int batches = 0;
  const std::string id = "kvfold-test-" + std::to_string(++batches);
  for (size_t i = 0; i < puts.size(); ++i) {
    const auto& [key, value] = puts[i];
    const std::string subject = "$KV." + bucket + "." + key;
    natsMsg* msg = nullptr;
    natsMsg_Create(&msg, subject.c_str(), nullptr, value.data(), static_cast<int>(value.size()));
    natsMsgHeader_Set(msg, "Nats-Batch-Id", id.c_str());
    natsMsgHeader_Set(msg, "Nats-Batch-Sequence", std::to_string(i + 1).c_str());
    const bool commit = i + 1 == puts.size();
    if (commit) natsMsgHeader_Set(msg, "Nats-Batch-Commit", "1");
    natsMsg* reply = nullptr;
    natsStatus s = natsConnection_RequestMsg(&reply, nc_, msg, 5000);
    natsMsg_Destroy(msg);
    if (s != NATS_OK)
      throw std::runtime_error("batch publish: " + std::string(natsStatus_GetText(s)));
    const std::string body(natsMsg_GetData(reply), natsMsg_GetDataLength(reply));
    natsMsg_Destroy(reply);
    if (!commit) {
      if (!body.empty()) throw std::runtime_error("batch publish refused: " + body);
      continue;
    }
    json ack = json::parse(body);
    if (ack.contains("error")) throw std::runtime_error("batch refused: " + ack.dump());
    const uint64_t last = ack["seq"].get<uint64_t>();
    for (size_t j = 0; j < puts.size(); ++j) {
      truth_[bucket][puts[j].first] = Entry{last - (puts.size() - 1 - j), false, puts[j].second};
    }
    return last;
  }
  throw std::runtime_error("empty batch");
}
bool KvClient::HasLimitMarkers(const std::string& bucket) {
  const json cfg = StreamInfo(bucket)["config"];
  return cfg.value("allow_msg_ttl", false) &&
         cfg.value("subject_delete_marker_ttl", int64_t{0}) > 0;
}
uint64_t KvClient::Delete(const std::string& bucket, const std::string& key) {
  return Write(bucket, key, "", "DEL");
}
uint64_t KvClient::Purge(const std::string& bucket, const std::string& key) {
  return Write(bucket, key, "", "PURGE");
}

void KvClient::PutNoAck(const std::string& bucket, const std::string& key,
                        const std::string& value) {
  const std::string subject = "$KV." + bucket + "." + key;
  natsConnection_Publish(nc_, subject.c_str(), value.data(), static_cast<int>(value.size()));
}

void KvClient::Flush() { natsConnection_FlushTimeout(nc_, 10000); }

void KvClient::RecordPut(const std::string& bucket, const std::string& key,
                         const std::string& value, uint64_t seq) {
  truth_[bucket][key] = Entry{seq, false, value};
}

json KvClient::StreamInfo(const std::string& bucket) {
  return Api("$JS.API.STREAM.INFO.KV_" + bucket, nullptr);
}

uint64_t KvClient::LastSeq(const std::string& bucket) {
  return StreamInfo(bucket)["state"]["last_seq"].get<uint64_t>();
}

void KvClient::WaitForLastSeq(const std::string& bucket, uint64_t seq) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (LastSeq(bucket) < seq) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("stream never reached sequence " + std::to_string(seq));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::optional<Entry> KvClient::StoredLast(const std::string& bucket, const std::string& key) {
  const std::string body = json{{"last_by_subj", "$KV." + bucket + "." + key}}.dump();
  const std::string subject = "$JS.API.STREAM.MSG.GET.KV_" + bucket;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    natsMsg* reply = nullptr;
    natsStatus s = natsConnection_Request(&reply, nc_, subject.c_str(), body.data(),
                                          static_cast<int>(body.size()), 5000);
    if (s == NATS_OK) {
      json j = json::parse(std::string(natsMsg_GetData(reply), natsMsg_GetDataLength(reply)));
      natsMsg_Destroy(reply);
      if (j.contains("error")) {
        if (j["error"].value("err_code", 0) == 10037) return std::nullopt;  // no message found
        throw std::runtime_error(subject + ": " + j.dump());
      }
      const json& m = j["message"];
      const std::string headers =
          m.contains("hdrs") ? core::Base64Decode(m["hdrs"].get<std::string>()).value_or("") : "";
      // A nats-server 2.11+ limit marker has no KV-Operation: a delete too.
      const bool marker = headers.find("KV-Operation: DEL") != std::string::npos ||
                          headers.find("KV-Operation: PURGE") != std::string::npos ||
                          headers.find("Nats-Marker-Reason:") != std::string::npos;
      const std::string data =
          m.contains("data") ? core::Base64Decode(m["data"].get<std::string>()).value_or("") : "";
      return Entry{m["seq"].get<uint64_t>(), marker, marker ? "" : data};
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(subject + ": " + natsStatus_GetText(s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::map<std::string, Entry> KvClient::Truth(const std::string& bucket, const Scope& scope) const {
  std::map<std::string, Entry> out;
  auto it = truth_.find(bucket);
  if (it == truth_.end()) return out;
  for (const auto& [k, e] : it->second) {
    if (scope.Contains(k)) out.emplace(k, e);
  }
  return out;
}

}  // namespace kvfold::live
