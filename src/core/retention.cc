#include "kvfold/retention.h"

#include "core/mutation.h"

namespace kvfold {

namespace {

// What removes current values without a trace a listing would show: a
// volume limit with discard old, or max_age where no limit marker declares
// the expiry. "" when nothing does.
std::string EvictionCause(const StreamState& s) {
  if (!s.discard_new && (s.max_msgs > 0 || s.max_bytes > 0)) return "volume";
  if (s.max_age_ns > 0 && s.marker_ttl_ns <= 0) return "unmarked age";
  // Before 2026-12-03 an expiry counted as an eviction.
  if (KVFOLD_MUTANT("retention-expiry-evicts") &&
      (s.max_age_ns > 0 || s.allow_msg_ttl || s.marker_ttl_ns > 0)) {
    return "expiry";
  }
  return "";
}

}  // namespace

Retention ClassifyRetention(const StreamState& s, bool eviction_observed) {
  Retention r;
  // An expiry (per-message TTL, or max_age with limit markers) is a delete:
  // the key leaves the truth and the key listing alike.
  r.eviction_cause = EvictionCause(s);
  r.evicts_current_values = !r.eviction_cause.empty();
  r.first_retained_revision = s.first_seq;
  // max_age passes over a message with `Nats-TTL: never` and ages out the
  // ones behind it: where TTLs are allowed first_seq proves nothing about
  // unmarked age.
  const bool head_proves_nothing =
      (r.eviction_cause == "unmarked age" && s.allow_msg_ttl &&
       !KVFOLD_MUTANT("retention-trust-head-under-never")) ||
      (KVFOLD_MUTANT("retention-expiry-evicts") && (s.allow_msg_ttl || s.marker_ttl_ns > 0));
  r.has_evicted = r.evicts_current_values && (s.first_seq > 1 || head_proves_nothing);
  r.listing_is_truth =
      (!eviction_observed && !r.has_evicted) || KVFOLD_MUTANT("retention-listing-always-truth");
  return r;
}

std::string DescribeRetention(const StreamState& s, const Retention& r) {
  std::string limits;
  auto add = [&limits](const std::string& part) { limits += (limits.empty() ? "" : ", ") + part; };
  if (s.max_msgs > 0) add("max_msgs " + std::to_string(s.max_msgs));
  if (s.max_bytes > 0) add("max_bytes " + std::to_string(s.max_bytes));
  if (s.max_age_ns > 0) add("max_age " + std::to_string(s.max_age_ns / 1000000) + " ms");
  if (s.allow_msg_ttl) add("per-message TTL");
  if (s.marker_ttl_ns > 0)
    add("limit markers " + std::to_string(s.marker_ttl_ns / 1000000) + " ms");
  add(s.discard_new ? "discard new" : "discard old");
  std::string out = r.evicts_current_values ? "evicts current values by " + r.eviction_cause
                                            : "keeps current values (expiries are deletes)";
  out += " (" + limits + "), first retained revision " + std::to_string(s.first_seq) + ", last " +
         std::to_string(s.last_seq);
  if (!r.listing_is_truth) out += "; a key listing is not the truth";
  return out;
}

}  // namespace kvfold
