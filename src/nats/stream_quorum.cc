#include "nats/stream_quorum.h"

#include <cstdint>

#include "core/json_fields.h"

namespace kvfold::nats {

std::string LeaderWithoutQuorum(const nlohmann::json& info) {
  const auto cluster = info.find("cluster");
  if (cluster == info.end() || !cluster->is_object()) return "";
  const auto replicas = cluster->find("replicas");
  if (replicas == cluster->end() || !replicas->is_array() || replicas->empty()) return "";
  std::string leader;
  (void)core::ReadJsonField(*cluster, "leader", &leader);
  // A member without a leader answers too (2.14+), listing itself among
  // the replicas: nothing it says moves.
  if (leader.empty()) {
    return "the stream has no leader (this server's copy does not move until one is elected)";
  }
  const int64_t silence_ns = std::chrono::nanoseconds(kPeerSilence).count();
  size_t heard = 0;
  std::string gone;
  for (const auto& r : *replicas) {
    bool offline = false;
    int64_t active_ns = INT64_MAX;  // unknown counts as not heard from
    std::string name = "?";
    if (r.is_object()) {
      (void)core::ReadJsonField(r, "offline", &offline);
      (void)core::ReadJsonField(r, "active", &active_ns);
      (void)core::ReadJsonField(r, "name", &name);
    }
    if (!offline && active_ns >= 0 && active_ns <= silence_ns) {
      ++heard;
    } else {
      gone += (gone.empty() ? "" : ", ") + name;
    }
  }
  const size_t peers = replicas->size() + 1;
  if (2 * (heard + 1) > peers) return "";
  return "its leader " + leader + " has not heard from " + gone + " for over " +
         std::to_string(kPeerSilence.count()) + " s: no quorum of its " + std::to_string(peers) +
         " replicas (cut off from them?), so its view of the stream does not move";
}

}  // namespace kvfold::nats
