#include "nats/kv_subjects.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "core/mutation.h"

namespace kvfold::nats {

std::string StreamName(std::string_view bucket) { return "KV_" + std::string(bucket); }

std::string SubjectPrefix(std::string_view bucket) { return "$KV." + std::string(bucket) + "."; }

std::optional<std::string_view> KeyOfSubject(std::string_view bucket, std::string_view subject) {
  // "$KV." bucket "." key, checked in place (once per delivered message).
  constexpr std::string_view kKv = "$KV.";
  const size_t prefix = kKv.size() + bucket.size() + 1;
  if (subject.size() <= prefix || !subject.starts_with(kKv) ||
      subject.substr(kKv.size(), bucket.size()) != bucket || subject[prefix - 1] != '.') {
    return std::nullopt;
  }
  return subject.substr(prefix);
}

std::vector<std::string> ScopeFilters(std::string_view bucket, const Scope& scope) {
  const std::string base = SubjectPrefix(bucket);
  std::vector<std::string> filters;
  for (const auto& p : scope.prefixes()) {
    const size_t dot = p.rfind('.');
    // Tokens complete up to the last '.'; ">" matches one or more tokens,
    // and a key always has at least one token after its prefix's last '.'.
    const std::string head = dot == std::string::npos ? "" : p.substr(0, dot + 1);
    filters.push_back(base + head + ">");
  }
  std::sort(filters.begin(), filters.end());
  filters.erase(std::unique(filters.begin(), filters.end()), filters.end());
  // Drop filters another one covers: "X.>" covers every filter starting
  // "X.". Checked against every other filter, not only the previous one in
  // sorted order: "a.1.>" sorts before "a.>" ('1' < '>').
  auto covered = [&filters](const std::string& f) {
    for (const auto& g : filters) {
      if (g != f && f.starts_with(std::string_view(g).substr(0, g.size() - 1))) return true;
    }
    return false;
  };
  std::vector<std::string> disjoint;
  for (const auto& f : filters) {
    if (!covered(f)) disjoint.push_back(f);
  }
  return disjoint;
}

Op OpOfHeaders(std::string_view kv_operation, std::string_view marker_reason) {
  if (kv_operation == "DEL") return Op::kDelete;
  if (kv_operation == "PURGE") return Op::kPurge;
  // Unknown: nats.go's watcher and Get fold it as a put. A fatal error here
  // would restart a mirror into the same message forever.
  if (!kv_operation.empty()) return Op::kPut;
  // A limit marker has no KV-Operation; any reason (MaxAge, Purge, Remove)
  // means the key's value is gone.
  if (!marker_reason.empty()) return Op::kDelete;
  return Op::kPut;
}

bool IsServerStatus(std::string_view reply, size_t body_size, std::string_view status) {
  if (KVFOLD_MUTANT("delivery-status-by-header")) return !status.empty();
  return !status.empty() && body_size == 0 && !reply.starts_with("$JS.ACK.");
}

std::optional<AckReply> ParseAckReply(std::string_view reply) {
  // Parsed once per delivered message: tokens stay views, on the stack
  // (only the first 11 are ever read; the count keeps going).
  std::array<std::string_view, 12> tokens;
  size_t count = 0;
  size_t start = 0;
  while (true) {
    size_t dot = reply.find('.', start);
    if (count < tokens.size()) {
      tokens[count] =
          reply.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    }
    ++count;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (count < 9 || tokens[0] != "$JS" || tokens[1] != "ACK") {
    return std::nullopt;
  }
  // v1: $JS.ACK.stream.consumer.delivered.sseq.cseq.ts.pending (9 tokens)
  // v2: $JS.ACK.domain.acchash.stream.consumer.delivered.sseq.cseq.ts.pending.token
  size_t base = 0;
  if (count == 9) {
    base = 2;
  } else if (count >= 11) {
    base = 4;
  } else {
    return std::nullopt;
  }
  auto num = [](std::string_view t, uint64_t* out) {
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
    return ec == std::errc() && ptr == t.data() + t.size();
  };
  AckReply out;
  uint64_t delivered = 0;
  uint64_t ts = 0;
  if (!num(tokens[base + 2], &delivered) || !num(tokens[base + 3], &out.stream_seq) ||
      !num(tokens[base + 4], &out.consumer_seq) || !num(tokens[base + 5], &ts) ||
      !num(tokens[base + 6], &out.pending)) {
    return std::nullopt;
  }
  out.time_ns = ts > static_cast<uint64_t>(INT64_MAX) ? 0 : static_cast<int64_t>(ts);
  return out;
}

}  // namespace kvfold::nats
