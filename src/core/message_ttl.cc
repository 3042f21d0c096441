#include "core/message_ttl.h"

#include <cctype>
#include <limits>
#include <optional>
#include <string>

namespace kvfold::core {
namespace {

// Go's time.ParseDuration, in nanoseconds; nullopt where Go errs.
std::optional<long double> ParseGoDuration(std::string_view s) {
  if (s.empty()) return std::nullopt;
  bool negative = false;
  if (s[0] == '-' || s[0] == '+') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return 0.0L;
  if (s.empty()) return std::nullopt;
  long double total = 0;
  while (!s.empty()) {
    size_t i = 0;
    long double number = 0;
    bool digits = false;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      number = number * 10 + (s[i++] - '0');
      digits = true;
    }
    if (i < s.size() && s[i] == '.') {
      ++i;
      long double scale = 0.1L;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        number += (s[i++] - '0') * scale;
        scale /= 10;
        digits = true;
      }
    }
    if (!digits) return std::nullopt;
    size_t u = i;
    while (u < s.size() && s[u] != '.' && !std::isdigit(static_cast<unsigned char>(s[u]))) ++u;
    const std::string_view unit = s.substr(i, u - i);
    long double ns = 0;
    if (unit == "ns") {
      ns = 1;
    } else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") {
      ns = 1e3L;
    } else if (unit == "ms") {
      ns = 1e6L;
    } else if (unit == "s") {
      ns = 1e9L;
    } else if (unit == "m") {
      ns = 60e9L;
    } else if (unit == "h") {
      ns = 3600e9L;
    } else {
      return std::nullopt;  // a missing or unknown unit
    }
    total += number * ns;
    if (total > static_cast<long double>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    s.remove_prefix(u);
  }
  return negative ? -total : total;
}

}  // namespace

int64_t ParseMessageTtlSeconds(std::string_view header) {
  if (header.empty()) return 0;
  std::string lower(header);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "never") return -1;
  if (auto ns = ParseGoDuration(header)) {
    if (*ns < 1e9L) return 0;  // under a second: refused
    return static_cast<int64_t>(*ns / 1e9L);
  }
  // A plain count of seconds: digits only.
  int64_t seconds = 0;
  for (char c : header) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return 0;
    if (seconds > (std::numeric_limits<int64_t>::max() - 9) / 10) return 0;
    seconds = seconds * 10 + (c - '0');
  }
  return seconds;
}

int64_t MessageDeadlineNs(int64_t time_ns, std::string_view header) {
  const int64_t seconds = ParseMessageTtlSeconds(header);
  if (seconds <= 0 || time_ns <= 0) return 0;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (seconds > (kMax - time_ns) / 1'000'000'000) return 0;  // past any clock
  return time_ns + seconds * 1'000'000'000;
}

bool ExpiriesMayGoUnmarked(const StreamState& state) {
  return state.allow_msg_ttl && (state.marker_ttl_ns <= 0 || state.history != 1);
}

}  // namespace kvfold::core
